"""The dashboard in a real headless Chromium: its pages load, show the numbers of a known
snapshot (examples/cluster) and of a recorded decision log, and each page is photographed
(build/screenshots/) for people to look at."""

from __future__ import annotations

from collections import defaultdict
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator

import pytest

from clueue.adapters.dashboard.sources import recorded
from clueue.engine.quantity import format_quantity, parse_quantity

from .conftest import screenshot
from .fixtures import example_current, record_log, serve


@pytest.fixture(scope="module")
def example() -> Any:
    return example_current()


@pytest.fixture(scope="module")
def site(example: Any) -> Iterator[str]:
    yield from serve(lambda: example)


def _held(plan: Any) -> dict[tuple[str, str, str], Fraction]:
    """(ClusterQueue, flavor, resource) -> what its admitted workloads hold, summed here from
    the plan's own data (requests times admitted count), not by the dashboard's code."""
    held: dict[tuple[str, str, str], Fraction] = defaultdict(Fraction)
    for w in plan.to_dict()["workloads"]:
        if w["state"] != "admitted":
            continue
        requests = {p["name"]: p["requests"] for p in w["podSets"]}
        for ps in w["admission"]["podSets"]:
            for resource, flavor in ps["flavors"].items():
                if resource in requests[ps["name"]]:
                    held[(w["clusterQueue"], flavor, resource)] += parse_quantity(requests[ps["name"]][resource]) * ps["count"]
    return held


def _cells(row: Any) -> dict[str, str]:
    from selenium.webdriver.common.by import By
    return {td.get_attribute("class"): td.text for td in row.find_elements(By.TAG_NAME, "td") if td.get_attribute("class")}


def test_overview_shows_quota_usage_and_borrowing(browser: Any, site: str, example: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    browser.get(site + "/")
    assert browser.title == "Queues - clueue dashboard"
    cards = {c.get_attribute("data-cq"): c for c in browser.find_elements(By.CSS_SELECTOR, "section[data-cq]")}
    assert set(cards) == {"team-a", "team-b", "research"}
    rows = {(cq, r.get_attribute("data-flavor"), r.get_attribute("data-resource")): _cells(r)
            for cq, card in cards.items() for r in card.find_elements(By.CSS_SELECTOR, "tbody tr")}
    # the quotas of examples/cluster/20-queues.yaml
    assert rows[("team-a", "on-demand", "cpu")]["nominal"] == "8"
    assert rows[("team-a", "on-demand", "cpu")]["borrowing-limit"] == "4"
    assert rows[("team-b", "on-demand", "cpu")]["lending-limit"] == "2"
    assert rows[("research", "a100", "nvidia.com/gpu")]["nominal"] == "4"
    assert rows[("research", "on-demand", "memory")]["nominal"] == "64Gi"
    # usage as the plan's admitted workloads hold it, and what exceeds the nominal quota borrowed
    held = _held(example.plan)
    assert any(held.values())
    for key, cells in rows.items():
        used = held.get(key, Fraction(0))
        assert cells["used"] == format_quantity(used), key
        assert cells["borrowed"] == format_quantity(max(Fraction(0), used - parse_quantity(cells["nominal"]))), key
    # every ClusterQueue with quota has its bars, drawn as SVG in the page
    for card in cards.values():
        svg = card.find_element(By.TAG_NAME, "svg")
        assert svg.size["width"] > 300 and len(svg.find_elements(By.TAG_NAME, "rect")) >= 3
    cohort = browser.find_element(By.CSS_SELECTOR, "section[data-cohort='eng']")
    cpu = next(r for r in cohort.find_elements(By.CSS_SELECTOR, "tbody tr")
               if (r.get_attribute("data-flavor"), r.get_attribute("data-resource")) == ("on-demand", "cpu"))
    assert _cells(cpu)["nominal"] == "16"  # team-a's 8 and team-b's 8
    assert _cells(cpu)["used"] == format_quantity(held[("team-a", "on-demand", "cpu")] + held[("team-b", "on-demand", "cpu")])
    screenshot(browser, tmp_path, "dashboard-queues")


def test_pending_lists_each_queue_in_order_with_the_plans_reasons(browser: Any, site: str, example: Any,
                                                                   tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    browser.get(site + "/pending")
    waiting = {w.name: w for w in example.plan.workloads if w.state in ("pending", "inadmissible")}
    assert waiting
    seen = []
    for section in browser.find_elements(By.CSS_SELECTOR, "section[data-queue], section#elsewhere"):
        rows = section.find_elements(By.CSS_SELECTOR, "tbody tr")
        positions = [r.find_element(By.CLASS_NAME, "position").text for r in rows]
        if section.get_attribute("data-queue"):
            assert positions == [str(i) for i in range(len(rows))]  # in order, from 0
        for r in rows:
            name = r.get_attribute("data-workload")
            seen.append(name)
            entry = waiting[name]
            assert section.get_attribute("data-queue") in (None, entry.cluster_queue)
            shown = [li.text for li in r.find_elements(By.CSS_SELECTOR, "ul.reasons li")]
            assert shown == [f"{x.code} {x.message}" for x in entry.reasons]
    assert sorted(seen) == sorted(waiting)
    screenshot(browser, tmp_path, "dashboard-pending")
    # a workload's page from the list: its decision now (no log: says how to get a timeline)
    first = browser.find_element(By.CSS_SELECTOR, "section[data-queue] tbody tr a")
    name = first.text
    first.click()
    assert browser.find_element(By.TAG_NAME, "h1").text == name
    assert "--db" in browser.find_element(By.ID, "timeline").text


@pytest.fixture(scope="module")
def recorded_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    db = record_log(tmp_path_factory.mktemp("dashboard-log"))
    yield from serve(recorded(db), db)


def test_timeline_of_a_recorded_workload(browser: Any, recorded_site: str, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    browser.get(recorded_site + "/")
    assert "cycle 3 of the decision log" in browser.find_element(By.ID, "source").text
    card = browser.find_element(By.CSS_SELECTOR, "section[data-cq='cq']")
    assert _cells(card.find_element(By.CSS_SELECTOR, "tbody tr"))["used"] == "2"  # team/b, admitted in cycle 3
    field = browser.find_element(By.NAME, "name")
    field.send_keys("team/b")
    field.submit()
    assert browser.find_element(By.TAG_NAME, "h1").text == "team/b"
    timeline = browser.find_element(By.ID, "timeline")
    states = [r.find_elements(By.TAG_NAME, "td")[2].text for r in timeline.find_elements(By.CSS_SELECTOR, "tbody tr")]
    assert states == ["pending", "admitted"]
    assert "InsufficientQuota" in timeline.text
    phases = timeline.find_elements(By.CSS_SELECTOR, "svg rect.phase")
    assert [p.get_attribute("data-state") for p in phases] == ["pending", "admitted"]
    assert "in cq" in timeline.find_element(By.TAG_NAME, "svg").text
    screenshot(browser, tmp_path, "dashboard-timeline")
