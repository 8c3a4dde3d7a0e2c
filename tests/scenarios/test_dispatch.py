"""MultiKueue dispatch (docs/dispatch.md): which workers a workload holding the manager's quota
with its MultiKueue check Pending is nominated to, by each dispatcher, and why."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from clueue.engine import Config, Document, Plan, build_snapshot, load_policy, run_cycle
from clueue.engine.config import ALL_AT_ONCE, INCREMENTAL, MultiKueue
from clueue.engine.dispatch import dispatch_targets, run_dispatch
from clueue.engine.workloads import build_workloads
from clueue.engine.snapshot import WorkerView
from tests.builders import KUEUE, TEST_TIME_BUDGET, cluster_queue, flatten, local_queue, namespace, ts, workload

CHECK = "multikueue"
WORKERS = ("worker-a", "worker-b", "worker-c")


def _active(status: bool) -> dict[str, Any]:
    return {"conditions": [{"type": "Active", "status": "True" if status else "False", "reason": "R", "message": "",
                            "lastTransitionTime": ts(0)}]}


def manager(clusters: tuple[str, ...] = WORKERS, *, inactive: tuple[str, ...] = (),
            labels: dict[str, dict[str, str]] | None = None, cpu: int = 100) -> list[dict[str, Any]]:
    """A manager whose ClusterQueue ``cq`` has the MultiKueue check over ``clusters``."""
    cq = cluster_queue("cq", {"f": {"cpu": cpu}})
    cq["spec"]["admissionChecks"] = [CHECK]
    return [namespace("default"), {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "f"}}, cq,
            local_queue("cq"),
            {"apiVersion": KUEUE, "kind": "AdmissionCheck", "metadata": {"name": CHECK},
             "spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                      "parameters": {"apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": "mk"}},
             "status": _active(True)},
            {"apiVersion": KUEUE, "kind": "MultiKueueConfig", "metadata": {"name": "mk"}, "spec": {"clusters": list(clusters)}},
            *({"apiVersion": KUEUE, "kind": "MultiKueueCluster",
               "metadata": {"name": k, "labels": (labels or {}).get(k, {})},
               "spec": {"kubeConfig": {"locationType": "Secret", "location": k}}, "status": _active(k not in inactive)}
              for k in clusters)]


def worker(name: str, free_cpu: int, *, age: int = 0, used: int = 0) -> WorkerView:
    """A worker whose ClusterQueue ``cq`` (LocalQueue default/main) has ``free_cpu`` of nominal
    ``free_cpu + used`` free: a workload admitted there holds ``used``."""
    objs = [namespace("default"), {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "f"}},
            cluster_queue("cq", {"f": {"cpu": free_cpu + used}}), local_queue("cq")]
    if used:
        objs.append(workload("running", cpu=str(used), admitted_in=("cq", "f")))
    return WorkerView(name, build_snapshot([Document(f"{name}#{i}", o) for i, o in enumerate(objs)]), age)


def with_nodes(view: WorkerView, *cpus: int) -> WorkerView:
    """``view`` whose worker reports Nodes of these allocatable cpus."""
    nodes = [Document(f"{view.name}-node{i}", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
                                                "status": {"allocatable": {"cpu": str(c), "pods": "110"}}})
             for i, c in enumerate(cpus)]
    return dataclasses.replace(view, snapshot=dataclasses.replace(
        view.snapshot, nodes=build_snapshot(nodes).nodes))


def cycle(objs: list[Any], workers: list[WorkerView], *, policy: tuple[str, ...] = (), now: int | None = None,
          **multikueue: Any) -> Plan:
    snapshot = build_snapshot([Document(f"test#{i}", o) for i, o in enumerate(flatten(objs))])
    snapshot = dataclasses.replace(snapshot, workers={w.name: w for w in workers})
    return run_cycle(snapshot, load_policy(policy),
                     Config(multikueue=MultiKueue(**multikueue), time_budget=TEST_TIME_BUDGET), now=now)


def nominated(plan: Plan) -> dict[str, list[str]]:
    return {a.workload: a.details["clusterNames"] for a in plan.actions if a.kind == "nominate"}


def note(plan: Plan, w: str, k: str) -> Any:
    entry = next(d for d in plan.dispatch if d.workload == f"default/{w}")
    return next(n for n in entry.workers if n.worker == k)


def test_the_one_worker_with_room_is_nominated_alone_and_explain_says_why_not_the_others():
    plan = cycle([manager(), workload("big", cpu="8")],
                 [worker("worker-a", 4), worker("worker-b", 16), worker("worker-c", 6, used=10)])
    assert nominated(plan) == {"default/big": ["worker-b"]}
    assert [a.kind for a in plan.actions] == ["admit", "nominate"]  # quota reserved, then dispatched
    assert note(plan, "big", "worker-a").code == "InsufficientQuota"
    assert note(plan, "big", "worker-a").message == "default/main (ClusterQueue cq) has 4 cpu free in flavor f, needs 8"
    assert note(plan, "big", "worker-c").details["free"] == "6"  # its running workload holds 10 of 16
    assert note(plan, "big", "worker-b").code == "Predicted"


def test_workloads_dispatched_together_share_each_workers_free_quota():
    plan = cycle([manager(("worker-a", "worker-b")), [workload(f"w{i}", cpu="3", minute=i) for i in range(3)]],
                 [worker("worker-a", 4), worker("worker-b", 4)])
    got = nominated(plan)
    # each worker has room for one of them: the first two go one to each; the third fits nowhere
    # once they are counted, and with fresh data it waits for room, with no copy anywhere
    assert sorted(got["default/w0"] + got["default/w1"]) == ["worker-a", "worker-b"]
    assert "default/w2" not in got
    assert {note(plan, "w2", k).code for k in ("worker-a", "worker-b")} == {"RoomTaken"}
    # with copiesWhenNoFit it is copied, but never where it fits alone: that worker's queue would
    # admit its copy before the one predicted there
    plan = cycle([manager(), [workload(f"w{i}", cpu="3", minute=i) for i in range(3)]],
                 [worker("worker-a", 4), worker("worker-b", 4), worker("worker-c", 2)], copies_when_no_fit=1)
    assert nominated(plan)["default/w2"] == ["worker-c"]


def test_stale_data_makes_the_prediction_uncertain_and_several_workers_are_nominated():
    workers = [worker("worker-a", 16, age=120), worker("worker-b", 2), worker("worker-c", 2)]
    plan = cycle([manager(), workload("w", cpu="8")], workers)
    assert nominated(plan) == {"default/w": ["worker-a", "worker-b", "worker-c"]}
    assert "stale data 120 s old" in note(plan, "w", "worker-a").message
    plan = cycle([manager(), workload("w", cpu="8")], workers, copies_when_uncertain=2)
    assert nominated(plan)["default/w"][0] == "worker-a" and len(nominated(plan)["default/w"]) == 2


def test_an_inactive_worker_is_never_nominated():
    # worker-c alone has room, but is not Active; worker-a's data is stale: the prediction is
    # uncertain, and every active worker gets a copy
    plan = cycle([manager(inactive=("worker-c",)), workload("w", cpu="8")],
                 [worker("worker-a", 2, age=120), worker("worker-b", 2), worker("worker-c", 16)])
    assert nominated(plan) == {"default/w": ["worker-a", "worker-b"]}
    assert note(plan, "w", "worker-c").code == "Inactive"
    plan = cycle([manager(inactive=("worker-c",)), workload("w", cpu="1")],
                 [worker("worker-a", 2), worker("worker-b", 2), worker("worker-c", 16)], dispatcher_name=ALL_AT_ONCE)
    assert nominated(plan) == {"default/w": ["worker-a", "worker-b"]}


REGION_POLICY = """\
% data-region: a workload labelled with a region prefers workers of that region (@15, users' range)
#program dispatch.
:~ nominate(W,K), dispatch_label(W,"data-region",R), worker_label(K,"region",R2), R != R2. [1@15,W,K]
"""


def test_a_policy_extension_prefers_the_workers_region(tmp_path: Path):
    labelled = workload("w", cpu="2")
    labelled["metadata"]["labels"] = {"data-region": "eu"}
    objs = [manager(("worker-a", "worker-b"), labels={"worker-a": {"region": "eu"}, "worker-b": {"region": "us"}}),
            labelled]
    workers = [worker("worker-a", 16), worker("worker-b", 4)]
    assert nominated(cycle(objs, workers)) == {"default/w": ["worker-b"]}  # the tightest fit
    (tmp_path / "region.lp").write_text(REGION_POLICY)
    assert nominated(cycle(objs, workers, policy=(str(tmp_path),))) == {"default/w": ["worker-a"]}


def test_a_dispatch_the_budget_cut_short_is_not_called_optimal():
    # the first nomination is always found (dispatch's grace period), but with no time left to
    # prove it best the plan must not say "proven optimal": a user reads that as "this is the best"
    objs = [manager(("worker-a", "worker-b")), workload("w", cpu="2")]
    snapshot = dataclasses.replace(build_snapshot([Document(f"test#{i}", o) for i, o in enumerate(flatten(objs))]),
                                   workers={w.name: w for w in [worker("worker-a", 16), worker("worker-b", 4)]})
    targets = dispatch_targets(snapshot, build_workloads(snapshot).by_key.values(),
                               {"default/w": ("cq", frozenset({"f"}))})
    cut = run_dispatch(snapshot, targets, load_policy(), Config(), now=None, budget=0.0)
    assert [e.nominated for e in cut.entries] != [()] and not cut.optimal
    assert run_dispatch(snapshot, targets, load_policy(), Config(), now=None, budget=TEST_TIME_BUDGET).optimal


def test_all_at_once_nominates_every_active_worker():
    plan = cycle([manager(), workload("w")], [], dispatcher_name=ALL_AT_ONCE)
    assert nominated(plan) == {"default/w": list(WORKERS)}


def reserved(name: str, minute: int, *, nominated_: tuple[str, ...] = (), cluster: str = "",
             state: str = "Pending") -> dict[str, Any]:
    """A Workload holding the manager's quota since ``minute``, its MultiKueue check in ``state``."""
    w = workload(name, admitted_in=("cq", "f"))
    w["status"].update({"admissionChecks": [{"name": CHECK, "state": state, "message": "",
                                             "lastTransitionTime": ts(minute)}],
                        "conditions": [{"type": "QuotaReserved", "status": "True", "reason": "QuotaReserved",
                                        "message": "", "lastTransitionTime": ts(minute)}]})
    if nominated_:
        w["status"]["nominatedClusterNames"] = list(nominated_)
    if cluster:
        w["status"]["clusterName"] = cluster
    return w


def _epoch(minute: int) -> int:
    return build_snapshot([Document("t", workload("t", minute=minute))]).workloads["default/t"].created


@pytest.mark.parametrize("minutes, expected", [(0, 3), (4, 3), (5, 5), (11, 5)])
def test_incremental_adds_three_workers_a_round_timed_from_the_reservation(minutes: int, expected: int):
    clusters = tuple(f"worker-{c}" for c in "edcba")
    plan = cycle([manager(clusters), reserved("w", 1)], [], dispatcher_name=INCREMENTAL,
                 now=_epoch(1 + minutes))
    assert nominated(plan) == {"default/w": sorted(clusters)[:expected]}


def test_incremental_rounds_are_configurable():
    clusters = tuple(f"worker-{c}" for c in "abcde")
    plan = cycle([manager(clusters), reserved("w", 1)], [], dispatcher_name=INCREMENTAL, clusters_per_round=1,
                 round_seconds=60, now=_epoch(3))
    assert nominated(plan) == {"default/w": ["worker-a", "worker-b", "worker-c"]}


def test_an_external_dispatcher_is_left_alone():
    plan = cycle([manager(), workload("w")], [worker("worker-a", 4)], dispatcher_name="example.com/my-dispatcher")
    assert nominated(plan) == {} and plan.dispatch == ()


def test_only_pending_checks_without_a_worker_are_dispatched_and_unchanged_nominations_are_not_rewritten():
    objs = [manager(), reserved("same", 1, nominated_=("worker-b",)), reserved("won", 1, cluster="worker-a"),
            reserved("ready", 1, state="Ready"), reserved("moved", 1, nominated_=("worker-a",))]
    plan = cycle(objs, [worker("worker-a", 0), worker("worker-b", 16), worker("worker-c", 0)])
    assert nominated(plan) == {"default/moved": ["worker-b"]}
    assert {d.workload for d in plan.dispatch} == {"default/same", "default/moved"}


def test_without_multikueue_nothing_is_dispatched():
    plan = cycle([namespace("default"), {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "f"}},
                  cluster_queue("cq", {"f": {"cpu": 4}}), local_queue("cq"), workload("w")], [])
    assert plan.dispatch == () and "dispatch" not in plan.to_dict()


def test_a_worker_whose_nodes_lack_room_is_not_predicted_even_with_quota():
    # worker-a has the quota but no node for a 4-cpu pod; worker-b's nodes hold it
    plan = cycle([manager(("worker-a", "worker-b")), workload("w", cpu="4")],
                 [with_nodes(worker("worker-a", 16), 2, 2, 2), with_nodes(worker("worker-b", 32), 8)])
    assert nominated(plan) == {"default/w": ["worker-b"]}
    assert note(plan, "w", "worker-a").code == "NodesShort"
    assert note(plan, "w", "worker-a").message == "its roomiest node has 2 cpu free, a pod needs 4"

