"""Controller logs: the JSON and text formats and the per-cycle summary line."""

from __future__ import annotations

import io
import json
import logging
from typing import Iterator

import pytest

from clueue.adapters.controller.logs import configure_logging, cycle_summary
from tests.builders import group, pod
from tests.unit.test_metrics import CycleResult, cycle, queues


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for h in list(root.handlers):
        root.removeHandler(h)
    for h in handlers:
        root.addHandler(h)
    root.setLevel(level)


def test_json_is_one_object_per_line_with_extra_fields(restore_logging: None) -> None:
    out = io.StringIO()
    configure_logging("json", "info", stream=out)
    log = logging.getLogger("clueue.test")
    log.debug("not shown")
    log.info("cycle %s", "done", extra={"cycle": {"admitted": 2}})
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        log.exception("failed")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    first, second = map(json.loads, lines)
    assert first["level"] == "info" and first["logger"] == "clueue.test" and first["message"] == "cycle done"
    assert first["cycle"] == {"admitted": 2}
    assert first["time"].endswith("Z") and "T" in first["time"]
    assert second["level"] == "error" and "RuntimeError: boom" in second["exception"]


def test_text_is_readable_and_reconfiguring_does_not_double_lines(restore_logging: None) -> None:
    out = io.StringIO()
    configure_logging("json", "debug", stream=io.StringIO())
    configure_logging("text", "debug", stream=out)
    logging.getLogger("clueue.test").debug("hello %d", 1, extra={"cycle": {}})
    (line,) = out.getvalue().splitlines()
    assert line.endswith(" debug clueue.test: hello 1")


def test_unknown_format_or_level_is_named() -> None:
    with pytest.raises(ValueError, match="log format 'yaml' is not one of text, json"):
        configure_logging("yaml")
    with pytest.raises(ValueError, match="log level 'loud'"):
        configure_logging("text", "loud")


def test_summary_of_a_cycle() -> None:
    result = cycle(queues(cpu=2), group("g", 2), pod("late", minute=5), pod("huge", cpu="10"),
                   writes=["create Workload default/g", "status Workload default/g", "ungate Pod default/g-0"])
    message, fields = cycle_summary(result)
    assert message.startswith("cycle optimal: 1 admitted (default/g), 1 pending, 1 inadmissible, 0 evicted; "
                              "pods 1 ungated, 0 rejected; 3 writes, 0 errors, 0 retries; snapshot 0.010s")
    assert {k: fields[k] for k in ("outcome", "admitted", "pending", "inadmissible", "ungated", "writes")} == {
        "outcome": "optimal", "admitted": 1, "pending": 1, "inadmissible": 1, "ungated": 1, "writes": 3}
    assert fields["phases"] == {"snapshot": 0.01, "decide": 0.2, "apply": 0.05}
    assert fields["rounds"] == 1 and fields["snapshot"].startswith("sha256:")
    assert fields["admittedNames"] == ["default/g"] and "evictedNames" not in fields
    json.dumps(fields)  # as the JSON log writes it


def test_a_summary_names_the_first_few_workloads_and_counts_the_rest() -> None:
    result = cycle(queues(cpu=10), *(pod(f"p{i}") for i in range(5)), writes=[])
    message, fields = cycle_summary(result)
    assert message.startswith("cycle optimal: 5 admitted (default/pod-p0, default/pod-p1, default/pod-p2, +2 more), ")
    assert fields["admittedNames"] == ["default/pod-p0", "default/pod-p1", "default/pod-p2", "+2 more"]


def test_summary_of_a_failed_cycle() -> None:
    ok = cycle(queues(), writes=[])
    message, fields = cycle_summary(CycleResult(ok.snapshot, None, None, phases={"snapshot": 0.5}, error="apiserver down"))
    assert message == "cycle failed: apiserver down; snapshot 0.500s"
    assert fields["outcome"] == "failed" and fields["error"] == "apiserver down"
