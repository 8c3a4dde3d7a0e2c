"""`clueue explain` on a coscheduling PodGroup: its phase, why, and what it holds, also before
any of its pods exist (no workload to explain yet), as text and as data; and beside its gang's
explanation once its pods exist."""

from __future__ import annotations

import json

import yaml
from click.testing import CliRunner

from clueue.adapters.cli import main
from tests.builders import cluster_queue, flatten, flavor, local_queue, pod
from tests.scenarios.test_podgroup_holds import held_group
from tests.scenarios.test_podgroups import gang

QUEUE = [flavor("default"), cluster_queue("cq", {"default": {"cpu": 4}}), local_queue("cq")]


def explain(tmp_path, *objs, args=()):
    path = tmp_path / "snapshot.yaml"
    path.write_text(yaml.safe_dump_all(flatten(objs)))
    result = CliRunner().invoke(main, ["explain", str(path), *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_explain_a_group_without_pods_says_it_is_in_queue_and_what_it_holds(tmp_path):
    out = explain(tmp_path, QUEUE, held_group(), args=("default/g",))
    assert out.splitlines() == [
        "PodGroup default/g: InQueue: minResources fit; it holds cpu 3 in ClusterQueue cq until its pods are admitted",
        "  holds 3 cpu of ClusterQueue cq in flavor default"]
    data = json.loads(explain(tmp_path, QUEUE, held_group(), args=("g", "-o", "json")))
    assert data["phase"] == "InQueue" and data["holds"] == {"cpu": "3"} and data["gang"] == "default/podgroup-g"
    assert data["quota"] == [{"clusterQueue": "cq", "flavor": "default", "resource": "cpu", "amount": "3"}]


def test_explain_a_competitor_names_the_hold(tmp_path):
    out = explain(tmp_path, QUEUE, held_group(), pod("other", cpu=2, minute=5), args=("default/pod-other",))
    assert "so it is 1 short" in out and "; 3 cpu are reserved for InQueue PodGroup(s) default/g" in out


def test_explain_a_gang_adds_its_groups_phase(tmp_path):
    out = explain(tmp_path, QUEUE, held_group(), gang("g", 2), args=("default/podgroup-g",))
    assert out.splitlines()[0].startswith("default/podgroup-g: pending")
    assert "PodGroup default/g: InQueue: minResources fit; it holds cpu 3" in out
