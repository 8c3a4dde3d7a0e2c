"""What dispatch reads and how it is shown: worker directories of a file snapshot, the
``multiKueue`` configuration section, and ``clueue plan``/``explain`` on examples/multicluster."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from clueue.adapters.cli import main
from clueue.adapters.files import load_snapshot, parse_config
from clueue.engine import Document, SnapshotError
from clueue.engine.config import INCREMENTAL, OPTIMIZED
from tests.builders import TEST_TIME_BUDGET

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "multicluster")


def test_worker_directories_become_worker_views_not_manager_objects():
    snapshot = load_snapshot([EXAMPLE])
    assert sorted(snapshot.workers) == ["worker-a", "worker-b", "worker-c"]
    assert {k: v.age for k, v in snapshot.workers.items()} == {"worker-a": 5, "worker-b": 5, "worker-c": 400}
    assert snapshot.workers["worker-b"].snapshot.cluster_queues["team-a"].resource_groups[0].flavors[0] \
        .resources["nvidia.com/gpu"].nominal == 16
    assert snapshot.cluster_queues["team-a"].resource_groups[0].flavors[0].resources["nvidia.com/gpu"].nominal == 40
    assert snapshot.multikueue_configs == {"workers": ("worker-a", "worker-b", "worker-c")}
    assert not snapshot.multikueue_clusters["worker-c"].active


def test_a_worker_view_document_with_a_bad_age_names_its_file(tmp_path: Path):
    (tmp_path / "workers" / "w").mkdir(parents=True)
    (tmp_path / "workers" / "w" / "view.yaml").write_text("apiVersion: clueue.dev/v1\nkind: WorkerView\nageSeconds: -3\n")
    with pytest.raises(SnapshotError, match="ageSeconds"):
        load_snapshot([str(tmp_path)])


def test_the_multikueue_section_sets_the_dispatcher():
    config = parse_config(Document("c.yaml", {"kind": "Configuration", "multiKueue": {
        "dispatcherName": INCREMENTAL, "clustersPerRound": 2, "roundSeconds": 60, "gcInterval": "1m"}}))
    assert (config.multikueue.dispatcher_name, config.multikueue.clusters_per_round,
            config.multikueue.round_seconds) == (INCREMENTAL, 2, 60)
    assert parse_config(Document("c.yaml", {"kind": "Configuration"})).multikueue.dispatcher_name == OPTIMIZED
    with pytest.raises(SnapshotError, match="multiKueue.copiesWhenUncertain"):
        parse_config(Document("c.yaml", {"kind": "Configuration", "multiKueue": {"copiesWhenUncertain": 0}}))


def test_clueue_plan_and_explain_run_on_the_example():
    plan = CliRunner().invoke(main, ["plan", "--time-budget", str(TEST_TIME_BUDGET), EXAMPLE])
    assert plan.exit_code == 0, plan.output
    assert "nominate   team-a/train-big  workers worker-b" in plan.output
    explained = CliRunner().invoke(main, ["explain", "--time-budget", str(TEST_TIME_BUDGET), EXAMPLE, "team-a/train-big"])
    assert explained.exit_code == 0, explained.output
    assert "dispatch (Optimized): nominated worker-b" in explained.output
    assert "worker-a: team-a/main (ClusterQueue team-a) has 4 nvidia.com/gpu free in flavor default, needs 8" \
        in explained.output
    assert "worker-c: inactive" in explained.output


def test_the_examples_region_policy_moves_its_labelled_workload():
    # a budget far above the work: the default's share for dispatch (2 s) can end the search
    # before its preferences are weighed on a loaded machine
    budget = ["--time-budget", str(TEST_TIME_BUDGET)]
    plain = CliRunner().invoke(main, ["plan", *budget, EXAMPLE])
    regional = CliRunner().invoke(main, ["plan", *budget, "--policy", f"{EXAMPLE}/policies", EXAMPLE])
    assert regional.exit_code == 0, regional.output
    assert "nominate   team-a/etl  workers worker-a" in plain.output
    assert "nominate   team-a/etl  workers worker-b" in regional.output

