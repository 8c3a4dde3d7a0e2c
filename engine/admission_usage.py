"""Admission fair sharing's consumed usage: what each LocalQueue used, decayed with a half-life,
as Kueue keeps it in ``status.fairSharing.admissionFairSharingStatus`` (docs/fair-sharing.md).

Every ``usageSamplingInterval`` the consumed usage of a LocalQueue moves toward what its
admitted workloads hold now, by the part of the half-life that passed since its ``lastUpdate``:

    alpha = 1 - 0.5 ** (elapsed / usageHalfLifeTime)
    consumed = consumed * (1 - alpha) + usage * alpha

so a queue that stops using quota sees its consumed usage halve every half-life, and one that
keeps using ``u`` approaches ``u``. A half-life of 0 forgets at once (consumed is empty). A queue
without the status starts empty, stamped now (its first sample folds in nothing, as Kueue's).
Resources are summed over flavors.

**Entry penalty.** A LocalQueue that admits a workload is sampled at once, between samples
too, and the workload's requests times ``alpha`` of one sampling interval are added, as Kueue
settles an admission: a burst of submissions counts against its queue before the next sample.

Pure: the previous status comes from the snapshot (so a restarted controller continues from
it), the time from the caller; the adapter writes what :func:`consumed_updates` returns, and
ordering (fairsharing.py) reads it back from the next snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping

from .config import AdmissionFairSharing
from .objects import LocalQueue
from .fairsharing import held_quota
from .plan import Plan
from .queues import QueueStatuses, entry_usage
from .snapshot import Snapshot

__all__ = ["ConsumedUsage", "decayed", "entry_penalty", "sample", "admitted_requests", "sampled_queues", "consumed_updates", "next_sample",
           "admitted_usage"]

#: Decayed amounts are kept to a thousandth of a unit (milli-cpu; bytes and counts likewise).
_PRECISION = 1000


@dataclass(frozen=True)
class ConsumedUsage:
    """A LocalQueue's ``admissionFairSharingStatus``: resource -> decayed usage, and when it
    was sampled (seconds since the epoch)."""

    resources: Mapping[str, Fraction]
    last_update: int


def decayed(previous: Mapping[str, Fraction], usage: Mapping[str, Fraction], elapsed: float,
            half_life: float) -> dict[str, Fraction]:
    """``previous`` consumed usage moved toward ``usage`` over ``elapsed`` seconds with
    ``half_life`` (see the module docstring); amounts rounded to a thousandth, zeros left out.

    >>> decayed({"cpu": Fraction(8)}, {}, 3600, 3600)
    {'cpu': Fraction(4, 1)}
    >>> decayed({"cpu": Fraction(8)}, {"cpu": Fraction(2)}, 7200, 3600)
    {'cpu': Fraction(7, 2)}
    """
    if half_life <= 0:
        return {}
    alpha = _alpha(elapsed, half_life)
    return _rounded({r: float(previous.get(r, 0)) * (1.0 - alpha) + float(usage.get(r, 0)) * alpha
                     for r in set(previous) | set(usage)})


def entry_penalty(requests: Mapping[str, Fraction], settings: AdmissionFairSharing) -> dict[str, Fraction]:
    """Kueue's entry penalty of a workload admitted between two samples: its ``requests`` times
    what one sampling interval moves consumed usage (``alpha`` of ``usageSamplingInterval``), added
    to its LocalQueue's consumed usage at once, so that a burst of admissions counts before the
    next sample.

    >>> entry_penalty({"cpu": Fraction(4)}, AdmissionFairSharing(half_life_seconds=60, sampling_seconds=60))
    {'cpu': Fraction(2, 1)}
    """
    if settings.half_life_seconds <= 0:
        return {}
    alpha = _alpha(settings.sampling_seconds, settings.half_life_seconds)
    return _rounded({r: float(q) * alpha for r, q in requests.items()})


def sample(lq: LocalQueue, usage: Mapping[str, Fraction], now: int, settings: AdmissionFairSharing,
           penalty: Mapping[str, Fraction] | None = None) -> ConsumedUsage | None:
    """The status ``lq`` gets at ``now`` given what its admitted workloads hold (``usage``) and
    the entry penalty of the workloads it admits now (``penalty``, :func:`entry_penalty`); None
    while its last sample is younger than the sampling interval and it admits nothing (nothing
    to write). A queue that admits is sampled at once, with the penalty added, as Kueue settles
    an admission."""
    if lq.consumed_at and now - lq.consumed_at < settings.sampling_seconds and not penalty:
        return None
    # no status yet: it starts empty, stamped now (its first sample folds in no usage)
    base = decayed(lq.consumed, usage, now - lq.consumed_at, settings.half_life_seconds) if lq.consumed_at else {}
    added = dict(base)
    for r, q in (penalty or {}).items():
        added[r] = added.get(r, Fraction(0)) + q
    return ConsumedUsage(added, now)


def _alpha(elapsed: float, half_life: float) -> float:
    """How far consumed usage moves toward current usage in ``elapsed`` seconds."""
    return 1.0 - 0.5 ** (max(0.0, elapsed) / half_life)


def _rounded(values: Mapping[str, float]) -> dict[str, Fraction]:
    """``values`` to a thousandth, zeros left out, by resource name."""
    out = {}
    for r in sorted(values):
        rounded = Fraction(round(values[r] * _PRECISION), _PRECISION)
        if rounded:
            out[r] = rounded
    return out


def sampled_queues(snapshot: Snapshot) -> list[LocalQueue]:
    """The LocalQueues whose consumed usage is kept: with admission fair sharing on (the
    section in effect, ``snapshot.kueue_settings``), every LocalQueue that is not stopped and
    whose ClusterQueue exists and is not stopped, as Kueue's LocalQueue controller samples them."""
    if snapshot.kueue_settings.admission_fair_sharing is None:
        return []
    return [lq for _, lq in sorted(snapshot.local_queues.items())
            if not lq.stopped and lq.cluster_queue in snapshot.cluster_queues
            and not snapshot.cluster_queues[lq.cluster_queue].stopped]


def consumed_updates(snapshot: Snapshot, usage: Mapping[str, Mapping[str, Fraction]], now: int,
                     admitted: Mapping[str, Mapping[str, Fraction]] | None = None) -> dict[str, ConsumedUsage]:
    """LocalQueue key -> its new consumed usage at ``now``, for each sampled queue whose
    sample is due or that admits now; ``usage``: LocalQueue key -> what its admitted workloads
    hold, by resource; ``admitted``: LocalQueue key -> the requests of the workloads admitted now
    (:func:`admitted_requests`), whose entry penalty is added."""
    settings = snapshot.kueue_settings.admission_fair_sharing
    out = {}
    for lq in sampled_queues(snapshot):
        assert settings is not None
        key = f"{lq.namespace}/{lq.name}"
        requests = (admitted or {}).get(key)
        update = sample(lq, usage.get(key, {}), now, settings, entry_penalty(requests, settings) if requests else None)
        if update is not None:
            out[key] = update
    return out


def next_sample(snapshot: Snapshot, now: int) -> int | None:
    """When the next sample of a LocalQueue is due after a cycle at ``now`` (epoch seconds;
    None: none is kept), so that a controller cycles then though nothing changes. A sample due
    now is taken by this cycle's writes, so the next one is an interval later."""
    settings = snapshot.kueue_settings.admission_fair_sharing
    if settings is None:
        return None
    due = []
    for lq in sampled_queues(snapshot):
        at = lq.consumed_at + settings.sampling_seconds if lq.consumed_at else now
        due.append(at if at > now else now + settings.sampling_seconds)
    return int(min(due)) if due else None


def admitted_usage(statuses: QueueStatuses) -> dict[str, dict[str, Fraction]]:
    """LocalQueue key -> what its admitted workloads hold after the cycle, by resource (its
    ``flavorsUsage`` summed over flavors, as Kueue samples a LocalQueue's usage)."""
    out: dict[str, dict[str, Fraction]] = {}
    for key, lq in statuses.local_queues.items():
        held: dict[str, Fraction] = {}
        for (_, r), q in held_quota(lq.flavors_usage).items():
            held[r] = held.get(r, Fraction(0)) + q
        out[key] = {r: q for r, q in held.items() if q}
    return out


def admitted_requests(plan: Plan) -> dict[str, dict[str, Fraction]]:
    """LocalQueue key -> what the workloads ``plan`` admits (its ``admit`` actions) request,
    by resource: their entry penalty's base."""
    admits = {a.target for a in plan.actions if a.kind == "admit"}
    out: dict[str, dict[str, Fraction]] = {}
    for entry in plan.workloads:
        if entry.name in admits and entry.state == "admitted":
            held = out.setdefault(f"{entry.name.split('/', 1)[0]}/{entry.queue}", {})
            for (_, r), q in entry_usage(entry).items():
                held[r] = held.get(r, Fraction(0)) + q
    return out
