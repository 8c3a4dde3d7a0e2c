"""The dashboard's pictures, drawn as SVG by clueue itself (no charting library, nothing fetched).

Two kinds: quota bars (what a ClusterQueue or a cohort holds of its quota, per flavor and
resource) and a workload's timeline (its states over the recorded cycles). Each function
returns a complete ``<svg>`` element as :class:`markupsafe.Markup`: every text that comes from
the cluster or the log (names, reasons) is escaped here, so the result can be put in a page
as it is, or written to a file (``clueue audit why --svg``).

Colours say the same thing everywhere: blue is quota used within the nominal quota, orange is
borrowed, light grey is free nominal quota, a pale orange outline is what may still be borrowed;
in a timeline amber is pending, red inadmissible, green admitted, grey finished.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping, Sequence

from markupsafe import Markup, escape

__all__ = ["Bar", "Segment", "quota_bars", "timeline_svg", "STATE_COLOURS", "SEGMENT_COLOURS"]

FONT = "font-family=\"DejaVu Sans, Arial, sans-serif\""
USED, BORROWED, FREE, HEADROOM = "#2f6fd6", "#f08c00", "#e3e6ea", "#ffd8a8"
#: Colours of the members of a cohort's stacked bars, in turn.
SEGMENT_COLOURS = ("#2f6fd6", "#7048e8", "#0c8599", "#5c940d", "#c2255c", "#e8590c", "#495057")
STATE_COLOURS = {"pending": "#f2b705", "inadmissible": "#e03131", "admitted": "#2f9e44", "finished": "#868e96",
                 "deleted": "#343a40"}


@dataclass(frozen=True)
class Segment:
    """A part of a bar: ``value`` in the bar's unit, drawn in ``colour``, named by ``label``."""

    label: str
    value: float
    colour: str


@dataclass(frozen=True)
class Bar:
    """One row of a quota chart: ``segments`` laid end to end against ``capacity`` (a marked
    line: the nominal quota), with ``headroom`` more that may be borrowed (None: no bound),
    named ``label`` and described by ``text`` (the numbers, as people write quantities)."""

    label: str
    segments: tuple[Segment, ...]
    capacity: float
    headroom: float | None
    text: str


def _num(x: float) -> str:
    return f"{x:.1f}".rstrip("0").rstrip(".")


def _text(x: float, y: float, content: str, *, size: int = 12, anchor: str = "start", fill: str = "#212529",
          weight: str = "normal") -> str:
    return (f'<text x="{_num(x)}" y="{_num(y)}" font-size="{size}" text-anchor="{anchor}" fill="{fill}" '
            f'font-weight="{weight}" {FONT}>{escape(content)}</text>')


def _fit(content: str, width: float, size: int) -> str:
    """``content`` cut with an ellipsis to about ``width`` pixels at font ``size`` (the whole
    text stays in the element's tooltip)."""
    room = max(8, int(width / (size * 0.6)))
    return content if len(content) <= room else content[:room - 1] + "\u2026"


def _rect(x: float, y: float, w: float, h: float, fill: str, title: str = "", **attrs: str) -> str:
    extra = "".join(f' {k.rstrip("_").replace("_", "-")}="{escape(v)}"' for k, v in attrs.items())
    inner = f"<title>{escape(title)}</title>" if title else ""
    return (f'<rect x="{_num(x)}" y="{_num(y)}" width="{_num(max(w, 0.0))}" height="{_num(h)}" fill="{fill}"{extra}>'
            f"{inner}</rect>")


def _svg(width: float, height: float, body: list[str], label: str) -> Markup:
    return Markup(f'<svg xmlns="http://www.w3.org/2000/svg" width="{_num(width)}" height="{_num(height)}" '
                  f'viewBox="0 0 {_num(width)} {_num(height)}" role="img" aria-label="{escape(label)}">'
                  f"<title>{escape(label)}</title>{''.join(body)}</svg>")


def quota_bars(bars: Sequence[Bar], *, title: str, width: int = 640) -> Markup:
    """A chart of ``bars``, one row each, every row scaled to its own largest value (a row's
    resources are in units of their own: cpu beside bytes of memory)."""
    label_w, text_w, row_h, bar_h = 150.0, 170.0, 30.0, 16.0
    bar_w = width - label_w - text_w - 10
    body: list[str] = []
    for i, bar in enumerate(bars):
        y = 8 + i * row_h
        used = sum(s.value for s in bar.segments)
        top = max(used, bar.capacity + (bar.headroom or 0.0), bar.capacity, 1e-9)
        scale = bar_w / top
        body.append(_text(label_w - 8, y + bar_h - 3, bar.label, anchor="end"))
        body.append(_rect(label_w, y, bar.capacity * scale, bar_h, FREE, f"nominal quota: {_num(bar.capacity)}"))
        if bar.headroom:
            body.append(_rect(label_w + bar.capacity * scale, y, bar.headroom * scale, bar_h, "none",
                              f"may borrow up to {_num(bar.headroom)} more", stroke=HEADROOM, stroke_width="2",
                              stroke_dasharray="4 2"))
        x = label_w
        for s in bar.segments:
            if s.value > 0:
                body.append(_rect(x, y, s.value * scale, bar_h, s.colour, f"{s.label}: {_num(s.value)}"))
                x += s.value * scale
        line = label_w + bar.capacity * scale
        body.append(f'<line x1="{_num(line)}" y1="{_num(y - 3)}" x2="{_num(line)}" y2="{_num(y + bar_h + 3)}" '
                    'stroke="#212529" stroke-width="2"><title>nominal quota</title></line>')
        body.append(_text(label_w + bar_w + 8, y + bar_h - 3, bar.text, size=11))
    return _svg(width, 16 + len(bars) * row_h, body, title)


def _clock(stamp: str) -> str:
    return stamp[11:19]


def _epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def timeline_svg(data: Mapping[str, Any], *, describe: Any = None, width: int = 900) -> Markup:
    """A workload's timeline (the data of ``clueue audit why``: its ``spans`` and ``asOf``) as
    one bar over time, a phase per segment coloured by its state, a time axis, and a line per
    phase below it: when, how long, and its reasons as ``describe(reason)`` words them."""
    from clueue.adapters.decisionlog.timeline import brief
    from clueue.adapters.decisionlog.units import format_duration
    describe = describe or brief
    phases = [(span, phase) for span in data["spans"] for phase in span["phases"]]
    start = _epoch(phases[0][1]["from"]) if phases else 0.0
    end = max(_epoch(data["asOf"]), start + 1.0)
    left, right, bar_y, bar_h = 20.0, 20.0, 44.0, 28.0
    span_w = width - left - right

    def x_of(stamp: str | None) -> float:
        t = end if stamp is None else _epoch(stamp)
        return left + (t - start) / (end - start) * span_w

    body = [_text(left, 22, f"{data['workload']}: as of cycle {data['asOfCycle']} at {data['asOf']} (UTC)", size=14,
                  weight="bold")]
    for span, phase in phases:
        x0, x1 = x_of(phase["from"]), x_of(phase["to"])
        reasons = "; ".join(describe(r) for r in phase["reasons"])
        body.append(_rect(x0, bar_y, max(x1 - x0, 2.0), bar_h, STATE_COLOURS.get(span["state"], "#adb5bd"),
                          f"{span['state']} {format_duration(phase['seconds'])}: {reasons or 'no reason recorded'}",
                          class_="phase", data_state=span["state"]))
    axis_y = bar_y + bar_h + 4
    body.append(f'<line x1="{_num(left)}" y1="{_num(axis_y)}" x2="{_num(left + span_w)}" y2="{_num(axis_y)}" '
                'stroke="#495057" stroke-width="1"/>')
    ticks = 5
    for i in range(ticks + 1):
        t = start + (end - start) * i / ticks
        x = left + span_w * i / ticks
        stamp = datetime.fromtimestamp(t, timezone.utc).strftime("%H:%M:%S")
        body.append(f'<line x1="{_num(x)}" y1="{_num(axis_y)}" x2="{_num(x)}" y2="{_num(axis_y + 5)}" '
                    'stroke="#495057" stroke-width="1"/>')
        body.append(_text(x, axis_y + 18, stamp, size=11, anchor="start" if i == 0 else "end" if i == ticks
                          else "middle", fill="#495057"))
    y = axis_y + 44
    for span, phase in phases:
        colour = STATE_COLOURS.get(span["state"], "#adb5bd")
        body.append(_rect(left, y - 10, 12, 12, colour))
        until = "now" if phase["to"] is None else _clock(phase["to"])
        where = f" in {span['clusterQueue']}" if span["state"] == "admitted" and span.get("clusterQueue") else ""
        reasons = "; ".join(describe(r) for r in phase["reasons"]) or "(no reason recorded)"
        line = (f"{_clock(phase['from'])}-{until}  {span['state']}{where} {format_duration(phase['seconds'])}, "
                f"cycle {phase['cycle']}: {reasons}")
        body.append(f"<g><title>{escape(line)}</title>{_text(left + 18, y, _fit(line, span_w - 18, 12), size=12)}</g>")
        y += 20
    return _svg(width, y + 4, body, f"timeline of {data['workload']}")
