"""The Pod webhook's decisions: which Pods are gated and how, which changes are refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from clueue.engine import Config, Document, build_snapshot
from clueue.engine.objects import LabelSelector, Requirement
from clueue.adapters.webhook.configuration import webhook_configurations
from clueue.adapters.webhook.mutate import MANAGED_LABEL, mutate, pointer, validate
from clueue.engine.config import PodGroups

QUEUE = "kueue.x-k8s.io/queue-name"
GROUP = "kueue.x-k8s.io/pod-group-name"
TOTAL = "kueue.x-k8s.io/pod-group-total-count"
ROLE_HASH = "kueue.x-k8s.io/role-hash"
GATE = "kueue.x-k8s.io/admission"


def user_pod(name: str = "p", *, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
             queue: str | None = "main", group: str | None = None, total: str | None = None, **spec: Any) -> dict[str, Any]:
    """A Pod as its author writes it (nothing clueue adds)."""
    meta: dict[str, Any] = {"name": name}
    lab = dict(labels or {})
    if queue:
        lab[QUEUE] = queue
    if group:
        lab[GROUP] = group
    if lab:
        meta["labels"] = lab
    ann = dict(annotations or {})
    if total is not None:
        ann[TOTAL] = total
    if ann:
        meta["annotations"] = ann
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c", "image": "img:1", "resources": {"requests": {"cpu": "1"}}}],
                     **spec}}


def owned(api_version: str, kind: str) -> dict[str, Any]:
    pod = user_pod()
    pod["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": "o", "uid": "1",
                                           "controller": True}]
    return pod


def create(pod: dict[str, Any], namespace: str = "team-a") -> dict[str, Any]:
    return {"uid": "u1", "operation": "CREATE", "namespace": namespace, "object": pod}


def apply_patch(doc: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 ``add`` (the only op the webhook emits), with RFC 6901 unescaping."""
    out = copy.deepcopy(doc)
    for op in patch:
        assert op["op"] == "add"
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target = out
        for p in parts[:-1]:
            target = target[p]
        if parts[-1] == "-":
            target.append(op["value"])
        else:
            target[parts[-1]] = op["value"]
    return out


def gated(pod: dict[str, Any], namespace: str = "team-a", config: Config = Config(),
          ns_labels: dict[str, str] | None = None) -> dict[str, Any] | None:
    patch = mutate(create(pod, namespace), config, ns_labels or {})
    return apply_patch(pod, patch) if patch else None


# -- which pods are gated ---------------------------------------------------------------------
def test_a_queued_pod_gets_gate_label_and_finalizer() -> None:
    out = gated(user_pod())
    assert out is not None
    assert out["spec"]["schedulingGates"] == [{"name": GATE}]
    assert out["metadata"]["labels"][MANAGED_LABEL] == "true"
    assert out["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
    assert ROLE_HASH not in out["metadata"].get("annotations", {})  # not a group member


@pytest.mark.parametrize("case, pod, namespace, config, ns_labels", [
    ("no queue label", user_pod(queue=None), "team-a", Config(), {}),
    ("kube-system", user_pod(), "kube-system", Config(), {}),
    ("the controller's namespace", user_pod(), "clueue-system", Config(), {}),
    ("a custom controller namespace", user_pod(), "ops", Config(controller_namespace="ops"), {}),
    ("namespace selector", user_pod(), "team-a",
     Config(namespace_selector=LabelSelector(match_labels=(("queued", "yes"),))), {"queued": "no"}),
    ("pod selector", user_pod(labels={"tier": "web"}), "team-a",
     Config(pod_selector=LabelSelector(match_expressions=(Requirement("tier", "In", ("batch",)),))), {}),
    ("owned by a batch/Job", owned("batch/v1", "Job"), "team-a", Config(), {}),
    ("owned by a kubeflow.org/* kind", owned("kubeflow.org/v1", "PyTorchJob"), "team-a", Config(), {}),
])
def test_pods_not_subject_to_queueing_are_untouched(case: str, pod: dict[str, Any], namespace: str, config: Config,
                                                    ns_labels: dict[str, str]) -> None:
    assert mutate(create(pod, namespace), config, ns_labels) == [], case


def test_selectors_that_match_gate() -> None:
    config = Config(namespace_selector=LabelSelector(match_labels=(("queued", "yes"),)),
                    pod_selector=LabelSelector(match_labels=(("tier", "batch"),)))
    assert gated(user_pod(labels={"tier": "batch"}), config=config, ns_labels={"queued": "yes"}) is not None


def test_a_non_controlling_owner_does_not_skip() -> None:
    pod = user_pod()
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "1"}]
    assert gated(pod) is not None


def test_the_namespace_lookup_is_called_only_for_queued_pods() -> None:
    asked: list[str] = []

    def lookup(name: str) -> dict[str, str]:
        asked.append(name)
        return {}

    mutate(create(user_pod(queue=None)), Config(), lookup)
    mutate(create(user_pod(), "team-b"), Config(), lookup)
    assert asked == ["team-b"]


# -- the Pods of coscheduling PodGroups without a queue name (docs/podgroups.md) -----------------
PODGROUP = "scheduling.x-k8s.io/pod-group"
OFF = Config(pod_groups=PodGroups(gang_schedule_without_queue=False))


def test_a_podgroup_pod_without_a_queue_is_gated_so_that_clueue_gang_schedules_it() -> None:
    out = gated(user_pod(queue=None, labels={PODGROUP: "mpi"}))
    assert out is not None
    assert out["spec"]["schedulingGates"] == [{"name": GATE}]
    assert out["metadata"]["labels"][MANAGED_LABEL] == "true"
    assert out["metadata"]["finalizers"] == ["kueue.x-k8s.io/managed"]
    # the engine makes the gang of exactly what the webhook gated: no Pod is left gated for nothing
    snapshot = build_snapshot([Document("t", {**out, "metadata": {**out["metadata"], "namespace": "team-a",
                                                                  "creationTimestamp": "2024-01-01T00:00:00Z"}})])
    from clueue.engine.workloads import build_workloads
    [gang] = build_workloads(snapshot, Config()).workloads
    assert gang.key == "team-a/podgroup-mpi" and gang.queue == "clueue-coscheduling"


@pytest.mark.parametrize("case, pod, namespace, config", [
    ("gangScheduleWithoutQueue off", user_pod(queue=None, labels={PODGROUP: "mpi"}), "team-a", OFF),
    ("podGroups.podSelector", user_pod(queue=None, labels={PODGROUP: "mpi"}), "team-a",
     Config(pod_groups=PodGroups(pod_selector=LabelSelector(match_labels=(("tier", "batch"),))))),
    ("kube-system", user_pod(queue=None, labels={PODGROUP: "mpi"}), "kube-system", Config()),
    ("an empty group name", user_pod(queue=None, labels={PODGROUP: ""}), "team-a", Config()),
    ("owned by a batch/Job", {**owned("batch/v1", "Job"), "metadata": {
        **owned("batch/v1", "Job")["metadata"], "labels": {PODGROUP: "mpi"}}}, "team-a", Config()),
])
def test_podgroup_pods_clueue_does_not_gang_schedule_are_untouched(case: str, pod: dict[str, Any], namespace: str,
                                                                   config: Config) -> None:
    assert mutate(create(pod, namespace), config, {}) == [], case
    snapshot = build_snapshot([Document("t", {**pod, "metadata": {**pod["metadata"], "namespace": namespace,
                                                                  "creationTimestamp": "2024-01-01T00:00:00Z"}})])
    from clueue.engine.workloads import build_workloads
    assert build_workloads(snapshot, config).workloads == (), case  # nor does the engine


def test_with_the_switch_off_a_podgroup_pod_with_a_queue_is_still_gated() -> None:
    assert gated(user_pod(labels={PODGROUP: "mpi"}), config=OFF) is not None


def test_the_podgroup_webhook_selects_podgroup_pods_without_a_queue_while_the_switch_is_on() -> None:
    [mutating, _] = webhook_configurations("clueue-system", service="clueue-webhook")
    assert [w["name"] for w in mutating["webhooks"]] == ["gate-pods.clueue.dev", "gate-podgroup-pods.clueue.dev"]
    assert mutating["webhooks"][1]["objectSelector"] == {"matchExpressions": [
        {"key": PODGROUP, "operator": "Exists"}, {"key": QUEUE, "operator": "DoesNotExist"}]}
    assert mutating["webhooks"][1]["clientConfig"] == mutating["webhooks"][0]["clientConfig"]
    selector = Config(pod_groups=PodGroups(pod_selector=LabelSelector(match_labels=(("tier", "batch"),))))
    [mutating, _] = webhook_configurations("clueue-system", service="clueue-webhook", config=selector)
    assert mutating["webhooks"][1]["objectSelector"]["matchLabels"] == {"tier": "batch"}
    [mutating, _] = webhook_configurations("clueue-system", service="clueue-webhook", config=OFF)
    assert [w["name"] for w in mutating["webhooks"]] == ["gate-pods.clueue.dev"]


def test_update_is_not_mutated() -> None:
    assert mutate({"operation": "UPDATE", "namespace": "a", "object": user_pod()}, Config(), {}) == []


# -- what is added ----------------------------------------------------------------------------
def test_existing_gates_finalizers_labels_and_annotations_are_kept() -> None:
    pod = user_pod(labels={"app": "x"}, annotations={"note": "y"}, group="g", total="2",
                   schedulingGates=[{"name": "example.com/other"}])
    pod["metadata"]["finalizers"] = ["example.com/keep"]
    out = gated(pod)
    assert out is not None
    assert out["spec"]["schedulingGates"] == [{"name": "example.com/other"}, {"name": GATE}]
    assert out["metadata"]["finalizers"] == ["example.com/keep", "kueue.x-k8s.io/managed"]
    assert out["metadata"]["labels"] == {"app": "x", QUEUE: "main", GROUP: "g", MANAGED_LABEL: "true"}
    assert out["metadata"]["annotations"]["note"] == "y"


def test_an_existing_admission_gate_is_not_added_twice() -> None:
    out = gated(user_pod(schedulingGates=[{"name": GATE}]))
    assert out is not None and out["spec"]["schedulingGates"] == [{"name": GATE}]


def test_json_pointer_escaping() -> None:
    assert pointer("metadata", "labels", "a/b~c") == "/metadata/labels/a~1b~0c"
    patch = mutate(create(user_pod()), Config(), {})
    assert {"op": "add", "path": "/metadata/labels/kueue.x-k8s.io~1managed", "value": "true"} in patch


def test_group_members_get_the_engines_role_hash() -> None:
    """The annotation is what the engine computes for the Pod as created, so a Pod read from the
    cluster without it (created before the webhook ran) falls in the same role."""
    worker = user_pod("w", group="g", total="3", nodeSelector={"pool": "gpu"})
    driver = user_pod("d", group="g", total="3")
    out_w, out_d = gated(worker), gated(driver)
    assert out_w is not None and out_d is not None
    snap = build_snapshot([Document("t", {**worker, "metadata": {**worker["metadata"], "namespace": "team-a"}}),
                           Document("t", {**driver, "metadata": {**driver["metadata"], "namespace": "team-a"}})])
    assert out_w["metadata"]["annotations"][ROLE_HASH] == snap.pods["team-a/w"].role_hash
    assert out_d["metadata"]["annotations"][ROLE_HASH] == snap.pods["team-a/d"].role_hash
    assert out_w["metadata"]["annotations"][ROLE_HASH] != out_d["metadata"]["annotations"][ROLE_HASH]
    # What the webhook adds (kueue.x-k8s.io/ labels, the gate) does not change the role.
    unannotated = copy.deepcopy(out_w)
    del unannotated["metadata"]["annotations"][ROLE_HASH]
    unannotated["metadata"]["namespace"] = "team-a"
    again = build_snapshot([Document("t", unannotated)]).pods["team-a/w"].role_hash
    assert again == out_w["metadata"]["annotations"][ROLE_HASH]


# -- validating -------------------------------------------------------------------------------
def managed(pod: dict[str, Any]) -> dict[str, Any]:
    out = gated(pod)
    assert out is not None
    return out


def update(old: dict[str, Any], change: Any) -> list[str]:
    new = copy.deepcopy(old)
    change(new)
    return validate({"uid": "u", "operation": "UPDATE", "namespace": "team-a", "object": new, "oldObject": old})


@pytest.mark.parametrize("case, change, field", [
    ("queue name changed", lambda p: p["metadata"]["labels"].update({QUEUE: "other"}), QUEUE),
    ("queue name removed", lambda p: p["metadata"]["labels"].pop(QUEUE), QUEUE),
    ("group name changed", lambda p: p["metadata"]["labels"].update({GROUP: "h"}), GROUP),
    ("PodGroup changed", lambda p: p["metadata"]["labels"].update({"scheduling.x-k8s.io/pod-group": "h"}),
     "scheduling.x-k8s.io/pod-group"),
    ("total count changed", lambda p: p["metadata"]["annotations"].update({TOTAL: "5"}), TOTAL),
    ("pod-group-sets added", lambda p: p["metadata"]["annotations"].update({"kueue.x-k8s.io/pod-group-sets": "[]"}),
     "kueue.x-k8s.io/pod-group-sets"),
    ("role hash changed", lambda p: p["metadata"]["annotations"].update({ROLE_HASH: "0"}), ROLE_HASH),
    ("managed label removed", lambda p: p["metadata"]["labels"].pop(MANAGED_LABEL), MANAGED_LABEL),
    ("managed label not true", lambda p: p["metadata"]["labels"].update({MANAGED_LABEL: "false"}), MANAGED_LABEL),
])
def test_changes_to_a_managed_pods_queue_and_group_are_refused(case: str, change: Any, field: str) -> None:
    old = managed(user_pod(group="g", total="2"))
    problems = update(old, change)
    assert problems and field in problems[0], case


def test_the_message_says_what_was_and_what_is() -> None:
    old = managed(user_pod())
    [problem] = update(old, lambda p: p["metadata"]["labels"].update({QUEUE: "other"}))
    assert problem.startswith(f"metadata.labels[{QUEUE}]: Forbidden: field is immutable")
    assert "was 'main', now 'other'" in problem


def test_allowed_updates_of_a_managed_pod() -> None:
    old = managed(user_pod(group="g", total="2"))
    ungated = update(old, lambda p: p["spec"].update(schedulingGates=None, nodeSelector={"pool": "a"}))
    unfinalized = update(old, lambda p: p["metadata"].update(finalizers=None))
    relabelled = update(old, lambda p: p["metadata"]["labels"].update({"app": "y"}))
    assert ungated == unfinalized == relabelled == []
    # The controller records the role of a Pod created without it (before the webhook ran).
    bare = copy.deepcopy(old)
    del bare["metadata"]["annotations"][ROLE_HASH]
    assert update(bare, lambda p: p["metadata"]["annotations"].update({ROLE_HASH: "abc"})) == []


def test_an_unretriable_group_stays_unretriable_and_the_gate_is_not_added_back() -> None:
    old = managed(user_pod(group="g", total="2", annotations={"kueue.x-k8s.io/retriable-in-group": "false"}))
    assert "retriable" in update(old, lambda p: p["metadata"]["annotations"].pop("kueue.x-k8s.io/retriable-in-group"))[0]
    running = copy.deepcopy(old)
    running["spec"]["schedulingGates"] = []
    assert "cannot be added back" in update(running, lambda p: p["spec"].update(schedulingGates=[{"name": GATE}]))[0]


def test_updates_of_unmanaged_pods_are_not_validated() -> None:
    old = user_pod()
    assert update(old, lambda p: p["metadata"]["labels"].update({QUEUE: "other"})) == []


@pytest.mark.parametrize("case, total, group, expected", [
    ("not a number", "three", "g", f"metadata.annotations[{TOTAL}]: Invalid value 'three'"),
    ("zero", "0", "g", "at least 1"),
    ("negative", "-2", "g", "at least 1"),
    ("count without group", "2", None, f"metadata.labels[{GROUP}]: Required"),
    ("invalid group name", "2", "Not_A_Name", f"metadata.labels[{GROUP}]: Invalid value 'Not_A_Name'"),
])
def test_create_of_a_group_pod_with_bad_metadata_is_refused(case: str, total: str, group: str | None,
                                                            expected: str) -> None:
    pod = managed(user_pod(group=group, total=total))
    problems = validate(create(pod))
    assert problems and expected in problems[0], case


def test_create_of_good_pods_is_allowed() -> None:
    assert validate(create(managed(user_pod(group="g", total="4")))) == []
    assert validate(create(managed(user_pod(group="g")))) == []  # a worker of a driver's pod-group-sets
    assert validate(create(managed(user_pod()))) == []
    assert validate(create(user_pod(queue=None, total="x"))) == []  # not managed: not clueue's business
