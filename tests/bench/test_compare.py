"""`clueue bench-compare`: reports of two runs lined up, regressions found, bad files refused."""

from __future__ import annotations

import copy
import json

import pytest
from click.testing import CliRunner

from clueue.adapters.cli import main
from clueue.bench.compare import compare, load_report

_RUN = ["bench", "--scenario", "baseline", "--scale", "0.01", "--repeat", "1", "--in-process",
        "--replay", "--replay-latency", "zero", "-o", "json"]


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> dict:
    result = CliRunner().invoke(main, _RUN)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _write(tmp_path, name: str, doc: dict) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def _missing_large_target(doc: dict) -> dict:
    """``doc`` as a run would report it whose large workloads waited past their target."""
    worse = copy.deepcopy(doc)
    replay = worse["scenarios"][0]["replay"]
    replay["admissionSeconds"]["large"]["average"] = 30.0
    for t in replay["targets"]:
        if t["name"] == "average admission large":
            t["value"], t["met"] = "30.00 s", False
    return worse


def test_the_same_run_twice_compares_equal(tmp_path, report):
    a, b = _write(tmp_path, "a.json", report), _write(tmp_path, "b.json", report)
    c = compare([load_report(a), load_report(b)])
    assert c.scenarios == ("baseline",) and not c.regressions and not c.warnings
    values = c.values["baseline"]
    assert values["admitted"] == (30, 30)
    assert values["admission large (avg)"][0] == values["admission large (avg)"][1] >= 0
    assert c.targets["baseline"]["replay: average admission large"] == (True, True)


def test_a_target_missed_in_the_later_run_is_a_regression(tmp_path, report):
    a = _write(tmp_path, "a.json", report)
    b = _write(tmp_path, "b.json", _missing_large_target(report))
    c = compare([load_report(a), load_report(b)])
    assert c.regressions == (f"baseline: replay: average admission large: met in {c.reports[0].label}, "
                             f"missed in {c.reports[1].label}",)
    assert c.values["baseline"]["admission large (avg)"][1] == 30.0
    # A target met later that was missed before is no regression: order matters.
    assert not compare([load_report(b), load_report(a)]).regressions

    table = CliRunner().invoke(main, ["bench-compare", a, b])
    assert table.exit_code == 0, table.output
    assert "MISSED" in table.stdout and "regression" in table.stdout
    failing = CliRunner().invoke(main, ["bench-compare", "--fail-on-regression", a, b])
    assert failing.exit_code == 1
    assert CliRunner().invoke(main, ["bench-compare", "--fail-on-regression", a, a]).exit_code == 0


def test_reports_of_different_settings_are_flagged(tmp_path, report):
    other = CliRunner().invoke(main, [*_RUN, "--seed", "1"])
    assert other.exit_code == 0, other.output
    a = _write(tmp_path, "a.json", report)
    b = _write(tmp_path, "b.json", json.loads(other.stdout))
    c = compare([load_report(a), load_report(b)])
    assert any(w.startswith("baseline: the reports differ in seed (0, 1)") for w in c.warnings)

    out = CliRunner().invoke(main, ["bench-compare", "-o", "json", a, b])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.stdout)
    assert doc["kind"] == "BenchComparison" and [r["path"] for r in doc["reports"]] == [a, b]
    assert doc["scenarios"]["baseline"]["values"]["admitted"] == [30, 30]


def test_a_scenario_missing_from_a_report_is_shown_and_warned(tmp_path, report):
    empty = {**report, "scenarios": []}
    a, b = _write(tmp_path, "a.json", report), _write(tmp_path, "b.json", empty)
    c = compare([load_report(a), load_report(b)])
    assert c.values["baseline"]["admitted"] == (30, None)
    assert c.warnings == (f"baseline: missing from {b}",)


@pytest.mark.parametrize("content, says", [
    ("{not json", "not JSON"),
    ('{"kind": "Plan", "apiVersion": "clueue.dev/v1", "scenarios": []}', "kind: expected 'BenchReport', found 'Plan'"),
    ('{"kind": "BenchReport", "apiVersion": "clueue.dev/v0", "scenarios": []}', "apiVersion: expected 'clueue.dev/v1'"),
    ('{"kind": "BenchReport", "apiVersion": "clueue.dev/v1", "scenarios": [{"cycle": {}}]}',
     "scenarios[0].scenario: expected a scenario name"),
])
def test_a_file_that_is_no_report_is_refused_by_name_and_field(tmp_path, report, content, says):
    good = _write(tmp_path, "good.json", report)
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    result = CliRunner().invoke(main, ["bench-compare", good, str(bad)])
    assert result.exit_code == 1
    assert f"{bad}: {says}" in result.output


def test_one_report_is_not_a_comparison(tmp_path, report):
    result = CliRunner().invoke(main, ["bench-compare", _write(tmp_path, "a.json", report)])
    assert result.exit_code == 2 and "at least two reports" in result.output
