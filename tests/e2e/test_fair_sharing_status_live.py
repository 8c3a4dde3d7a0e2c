"""Fair sharing's queue status against a real kube-apiserver (docs/queue-status.md): with fair
sharing on, ClusterQueues and Cohorts get ``status.fairSharing.weightedShare`` as Kueue reports
it, removed again when it is off; with admission fair sharing on, each LocalQueue's
``status.fairSharing.admissionFairSharingStatus`` is sampled every usageSamplingInterval with
its half-life decay (and at once, with the entry penalty, when it admits), and what is written
is what the next cycle orders by. Each cycle runs at a
chosen time (the engine takes ``now`` from its caller), so the test waits for no clock; a
last test runs ``clueue controller``, which samples again by itself while nothing changes.
"""

from __future__ import annotations

from datetime import datetime, timezone
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from clueue.engine import Config
from clueue.engine.admission_usage import decayed, entry_penalty
from clueue.engine.quantity import format_quantity
from clueue.engine.config import AdmissionFairSharing, FairSharing
from tests.e2e.controller_harness import api, cluster, start_controller, stop_controller, wait_until  # noqa: F401
from tests.e2e.test_adapter import KUEUE, create, tag
from tests.e2e.test_pods_ready_condition_live import cycle_at, live  # noqa: F401
from tests.testenv.control_plane import ControlPlane

GROUP = "kueue.x-k8s.io"
HOUR = 3600
FAIR = Config(fair_sharing=FairSharing(),
              admission_fair_sharing=AdmissionFairSharing(half_life_seconds=HOUR, sampling_seconds=300))


def stamp(epoch: int) -> str:
    return datetime.fromtimestamp(epoch, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def setup(api: client.ApiClient, t: str) -> str:
    """Cohort co-T of ClusterQueues a-T (2 cpu, admission fair sharing between LocalQueues x
    and y) and b-T (6 cpu, lends them)."""
    ns = f"ns-{t}"
    create(api, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    create(api, {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": f"fl-{t}"}, "spec": {}})
    create(api, {"apiVersion": KUEUE, "kind": "Cohort", "metadata": {"name": f"co-{t}"}, "spec": {}})
    for name, nominal in (("a", 2), ("b", 6)):
        spec: dict[str, Any] = {"namespaceSelector": {}, "cohort": f"co-{t}", "resourceGroups": [{
            "coveredResources": ["cpu"], "flavors": [{"name": f"fl-{t}", "resources": [
                {"name": "cpu", "nominalQuota": nominal}]}]}]}
        if name == "a":
            spec["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
        create(api, {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": f"{name}-{t}"}, "spec": spec})
    for lq in ("x", "y"):
        create(api, {"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": lq, "namespace": ns},
                     "spec": {"clusterQueue": f"a-{t}"}})
    return ns


def job(ns: str, name: str, queue: str, cpu: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE, "kind": "Workload", "metadata": {"name": name, "namespace": ns},
            "spec": {"queueName": queue, "podSets": [{"name": "main", "count": 1, "template": {"spec": {
                "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}}]}}


def status(api: client.ApiClient, plural: str, name: str, ns: str | None = None) -> dict[str, Any]:
    objects = client.CustomObjectsApi(api)
    obj = objects.get_namespaced_custom_object(GROUP, "v1beta1", ns, plural, name) if ns \
        else objects.get_cluster_custom_object(GROUP, "v1beta1", plural, name)
    return obj.get("status") or {}


def test_weighted_shares_and_consumed_usage_are_written_and_decay(live: client.ApiClient) -> None:
    t = tag()
    ns = setup(live, t)
    create(live, job(ns, "x1", "x", "4"))
    start = int(datetime.now(timezone.utc).timestamp())

    first = cycle_at(live, ns, start, FAIR)
    assert first.plan is not None and first.plan.workload(f"{ns}/x1").state == "admitted"
    # a borrows 2 of the 8 cpu its cohort can lend: 0.25, Kueue's 250; b and the root: 0
    assert status(live, "clusterqueues", f"a-{t}")["fairSharing"] == {"weightedShare": 250}
    assert status(live, "clusterqueues", f"b-{t}")["fairSharing"] == {"weightedShare": 0}
    assert status(live, "cohorts", f"co-{t}")["fairSharing"] == {"weightedShare": 0}
    # the first sample starts from nothing, stamped at the cycle's time, x's with the entry penalty
    # of the 4 cpu it admits; y's empty; the next is due an interval on
    afs = FAIR.admission_fair_sharing
    assert afs is not None
    penalty = entry_penalty({"cpu": Fraction(4)}, afs)
    x = status(live, "localqueues", "x", ns)["fairSharing"]
    assert x == {"weightedShare": 0, "admissionFairSharingStatus": {
        "consumedResources": {"cpu": format_quantity(penalty["cpu"])}, "lastUpdate": stamp(start)}}
    y = status(live, "localqueues", "y", ns)["fairSharing"]["admissionFairSharingStatus"]
    assert y == {"consumedResources": {}, "lastUpdate": stamp(start)}
    assert first.plan.wake_at == start + 300  # (only() keeps this namespace's PodGroups: no other test's timeout)

    # within the interval: nothing sampled, nothing written for the queues
    quiet = cycle_at(live, ns, start + 60, FAIR)
    assert not [w for w in quiet.applied.writes if w.startswith("status") and t in w], quiet.applied.writes

    # a half-life on: x's consumption is halfway to the 4 cpu it holds; y's stays empty
    later = cycle_at(live, ns, start + HOUR, FAIR)
    assert f"status LocalQueue {ns}/x" in later.applied.writes
    x = status(live, "localqueues", "x", ns)["fairSharing"]["admissionFairSharingStatus"]
    halfway = decayed(penalty, {"cpu": Fraction(4)}, HOUR, HOUR)["cpu"]
    assert abs(halfway - (penalty["cpu"] + 4) / 2) <= Fraction(1, 1000)  # kept to a thousandth
    assert x == {"consumedResources": {"cpu": format_quantity(halfway)}, "lastUpdate": stamp(start + HOUR)}
    assert status(live, "localqueues", "y", ns)["fairSharing"]["admissionFairSharingStatus"]["consumedResources"] == {}

    # the next cycle orders by what was written: y's workload goes before x's, though x's is older
    create(live, job(ns, "x2", "x", "2"))
    create(live, job(ns, "y1", "y", "2"))
    ordered = cycle_at(live, ns, start + HOUR + 60, FAIR)
    assert ordered.plan is not None
    ranks = {w.name: w.rank for w in ordered.plan.workloads if w.rank is not None}
    assert ranks[f"{ns}/y1"] < ranks[f"{ns}/x2"]

    # fair sharing off: the shares are removed, as Kueue removes them; the consumed usage stays
    kept = status(live, "localqueues", "x", ns)["fairSharing"]
    cycle_at(live, ns, start + HOUR + 120, Config())
    assert "fairSharing" not in status(live, "clusterqueues", f"a-{t}")
    assert "fairSharing" not in status(live, "cohorts", f"co-{t}")
    assert status(live, "localqueues", "x", ns)["fairSharing"] == kept


def test_the_controller_samples_consumed_usage_by_itself(cluster: ControlPlane, api: client.ApiClient,
                                                         tmp_path: Path) -> None:
    # a sampling interval of 1 s: the controller wakes for each sample though nothing changes
    t = tag()
    ns = setup(api, t)
    create(api, job(ns, "x1", "x", "4"))
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"apiVersion": "clueue.dev/v1", "kind": "Configuration",
                                      "fairSharing": {"enable": True}, "admissionFairSharing": {
                                          "usageHalfLifeTime": "10s", "usageSamplingInterval": "1s"}}))
    proc = start_controller(cluster, "--batch-window", "0.05", "--max-delay", "0.5", "--config", str(config))

    def consumed() -> dict[str, Any]:
        return ((status(api, "localqueues", "x", ns).get("fairSharing") or {}).get("admissionFairSharingStatus")
                or {})

    try:
        wait_until(lambda: (status(api, "clusterqueues", f"a-{t}").get("fairSharing") or {}).get("weightedShare") == 250,
                   60, "ClusterQueue a's weightedShare 250", proc=proc)
        first = wait_until(lambda: consumed().get("consumedResources", {}).get("cpu") and consumed(), 60,
                           "x's consumed cpu sampled", proc=proc)
        wait_until(lambda: consumed().get("lastUpdate", "") > first["lastUpdate"], 60, "a later sample", proc=proc)
    finally:
        assert stop_controller(proc) == 0
