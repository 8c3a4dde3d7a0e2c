"""The admitted set is the lexicographically best in rank order, checked against brute force.

Random small clusters (two ClusterQueues in a cohort, two flavors, borrowing and lending
limits, pods restricted to one flavor or free to use either) are decided by clueue and by an
exhaustive search written independently here: go through the workloads in rank order and keep
each one if some flavor assignment of it and all kept ones respects every quota.
"""

import itertools
import random

import pytest

from tests.builders import cluster_queue, flavor, local_queue, pod, quota, run

FLAVORS = ("f1", "f2")


def random_cluster(rng):
    queues = {}
    for q in ("a", "b"):
        queues[q] = {f: (rng.randint(0, 4), rng.choice([None, 0, 1, 3]), rng.choice([None, 0, 1, 2])) for f in FLAVORS}
    pods = []
    for i in range(rng.randint(3, 7)):
        q = rng.choice("ab")
        pods.append({"name": f"p{i}", "queue": q, "cpu": rng.randint(1, 4), "prio": rng.choice([0, 0, 5]),
                     "minute": rng.randint(0, 5), "only": rng.choice([None, None, "f1", "f2"])})
    return queues, pods


def objects(queues, pods):
    objs = [flavor(f, labels={"pool": f}) for f in FLAVORS]
    pcs = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": f"p{v}"}, "value": v}
           for v in (0, 5)]
    for q, fl in queues.items():
        objs.append(cluster_queue(q, {f: {"cpu": quota(n, b, l)} for f, (n, b, l) in fl.items()}, cohort="eng"))
        objs.append(local_queue(q, ns=q))
    for p in pods:
        objs.append(pod(p["name"], ns=p["queue"], cpu=p["cpu"], minute=p["minute"], priority_class=f"p{p['prio']}",
                        node_selector={"pool": p["only"]} if p["only"] else None))
    return objs + pcs


def fits(queues, chosen):
    """Quota semantics, independently: per flavor, each queue within nominal + borrowing limit,
    and the cohort's sum of max(usage, guaranteed) within the sum of nominal quotas."""
    for f in FLAVORS:
        total = sum(queues[q][f][0] for q in queues)
        blocked = 0
        for q, fl in queues.items():
            nominal, borrow, lend = fl[f]
            used = sum(p["cpu"] for p, fa in chosen if p["queue"] == q and fa == f)
            if borrow is not None and used > nominal + borrow:
                return False
            guaranteed = max(0, nominal - lend) if lend is not None else 0
            blocked += max(used, guaranteed)
        if blocked > total:
            return False
    return True


def feasible(queues, kept):
    options = [[p["only"]] if p["only"] else list(FLAVORS) for p in kept]
    return any(fits(queues, list(zip(kept, combo))) for combo in itertools.product(*options))


def brute_force(queues, pods):
    ranked = sorted(pods, key=lambda p: (-p["prio"], p["minute"], f"{p['queue']}/pod-{p['name']}"))
    kept = []
    for p in ranked:
        if feasible(queues, kept + [p]):
            kept.append(p)
    return {f"{p['queue']}/pod-{p['name']}" for p in kept}


@pytest.mark.parametrize("seed", range(60))
def test_admitted_set_equals_brute_force(seed):
    rng = random.Random(seed)
    queues, pods = random_cluster(rng)
    plan = run(objects(queues, pods))
    admitted = {w.name for w in plan.workloads if w.state == "admitted"}
    assert admitted == brute_force(queues, pods)
    assert plan.solver.optimal


@pytest.mark.parametrize("seed", range(30))
def test_the_one_by_one_fallback_finds_the_same_set(seed, monkeypatch):
    # With no time for the one-shot search, candidates are checked one by one (solver._rank_checks).
    from clueue.engine import solver
    monkeypatch.setattr(solver, "_ONE_SHOT_SHARE", 0.0)
    rng = random.Random(seed)
    queues, pods = random_cluster(rng)
    plan = run(objects(queues, pods))
    assert {w.name for w in plan.workloads if w.state == "admitted"} == brute_force(queues, pods)
