"""The dashboard's pages without a browser: everything escaped, nothing written, clear errors;
``clueue audit why --svg`` and ``clueue dashboard``'s options as users give them."""

from __future__ import annotations

import http.client
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Iterator

import pytest
from click.testing import CliRunner

from clueue.adapters.cli import main
from clueue.adapters.dashboard.server import LatestCycle, render_page
from clueue.adapters.dashboard.svg import Bar, Segment, quota_bars
from clueue.adapters.dashboard.views import Current, overview
from clueue.engine import Config, Document, build_snapshot, load_policy
from clueue.engine.guard import guarded_cycle
from tests.builders import cluster_queue, cohort, flavor, flatten, local_queue, namespace, workload

from .fixtures import example_current, record_log, serve

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    return record_log(tmp_path_factory.mktemp("dashboard-pages"))


@pytest.fixture(scope="module")
def site(db: str) -> Iterator[str]:
    current = example_current()
    yield from serve(lambda: current, db)


def _get(site: str, path: str, method: str = "GET") -> tuple[int, dict[str, str], str]:
    conn = http.client.HTTPConnection(site.removeprefix("http://"), timeout=30)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read().decode()
    finally:
        conn.close()


def test_everything_from_outside_is_escaped(site: str) -> None:
    status, headers, page = _get(site, "/workload?name=%3Cscript%3Ealert(1)%3C/script%3E/x")
    assert status == 200
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;/x" in page
    assert "default-src 'none'" in headers["Content-Security-Policy"] and headers["X-Content-Type-Options"] == "nosniff"
    picture = quota_bars([Bar("<b>&", (Segment("<i>", 1.0, "#000"),), 2.0, None, '"quoted" <x>')], title="<t>")
    assert "<b>" not in picture and "<i>" not in picture and "<x>" not in picture
    ET.fromstring(str(picture))  # well-formed


def test_read_only_and_clear_errors(site: str) -> None:
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        assert _get(site, "/", method)[0] == 501
    status, _, page = _get(site, "/nowhere")
    assert status == 404 and "no page /nowhere" in page
    status, _, page = _get(site, "/workload?name=no-namespace")
    assert status == 400 and "namespace/name" in page
    status, _, page = _get(site, "/workload?name=team/unknown")
    assert status == 200 and "workload team/unknown is not in decision log" in page
    status, headers, css = _get(site, "/style.css")
    assert status == 200 and headers["Content-Type"].startswith("text/css") and "body" in css
    assert render_page("/", None, None)[0] == 503  # a controller before its first cycle


def test_the_controller_feeds_it_its_last_cycle_with_a_plan() -> None:
    latest, current = LatestCycle(), example_current()

    class Result:  # what a CycleResult offers an observer
        def __init__(self, plan: Any) -> None:
            self.snapshot, self.plan, self.started = current.snapshot, plan, 1.0e9

    assert latest.current() is None
    latest(Result(current.plan))
    latest(Result(None))  # a failed cycle leaves the last plan shown
    assert latest.current() is not None and latest.current().plan is current.plan
    assert "cycle 1" in latest.current().origin


def test_audit_why_draws_the_timeline(db: str, tmp_path: Path) -> None:
    out = tmp_path / "why.svg"
    result = CliRunner().invoke(main, ["audit", "why", "team/b", "--db", db, "--svg", str(out)])
    assert result.exit_code == 0, result.output
    assert "InsufficientQuota" in result.output  # the text still printed
    root = ET.parse(out).getroot()
    assert root.tag == f"{SVG}svg"
    assert [r.get("data-state") for r in root.iter(f"{SVG}rect") if r.get("class") == "phase"] == ["pending", "admitted"]
    text = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "InsufficientQuota in cq/default cpu, 2 short" in text and "admitted in cq" in text
    bad = CliRunner().invoke(main, ["audit", "why", "team/b", "--db", db, "--svg", str(tmp_path / "no" / "x.svg")])
    assert bad.exit_code == 1 and "cannot write" in bad.output


def test_dashboard_options(tmp_path: Path) -> None:
    bad = CliRunner().invoke(main, ["dashboard", "--db", str(tmp_path / "x.db"), "--listen", "8090"])
    assert bad.exit_code == 2 and "HOST:PORT" in bad.output
    missing = CliRunner().invoke(main, ["dashboard", str(tmp_path / "nothing.yaml"), "--listen", "127.0.0.1:0"])
    assert missing.exit_code != 0 and "nothing.yaml" in missing.output


def test_a_cohort_tree_sums_its_queues_and_cohorts_quota_and_stacks_their_usage() -> None:
    objs = flatten([namespace("team"), flavor("default"), cohort("root", flavors={"default": {"cpu": 2}}),
                    cohort("child", parent="root"),
                    cluster_queue("a", {"default": {"cpu": 4}}, cohort="child"),
                    cluster_queue("b", {"default": {"cpu": 4}}, cohort="root"),
                    cluster_queue("alone", {"default": {"cpu": 1}}), local_queue("a", ns="team"),
                    workload("big", ns="team", cpu="6")])
    snapshot = build_snapshot([Document(f"obj{i}", o) for i, o in enumerate(objs)])
    plan = guarded_cycle(snapshot, load_policy(()), Config(), now=0)
    view = overview(Current(snapshot, plan, 0.0, "test"))
    (tree,) = view["cohorts"]
    assert tree["name"] == "root" and tree["members"] == ["a", "b"] and tree["cohorts"] == ["child", "root"]
    (row,) = tree["rows"]
    assert (row["nominal"], row["used"], row["by"]) == ("10", "6", {"a": "6", "b": "0"})
    a = next(q for q in view["clusterQueues"] if q["name"] == "a")
    assert (a["rows"][0]["used"], a["rows"][0]["borrowed"], a["rows"][0]["borrowingLimit"]) == ("6", "2", None)
    assert "alone" not in tree["members"]
