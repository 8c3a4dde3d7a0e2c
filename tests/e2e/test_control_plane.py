"""End-to-end: clueue's CRDs and the core rules it relies on, checked by a real kube-apiserver.

- every CRD installs and is Established, at the versions and scopes users expect;
- realistic Kueue manifests, written once for v1beta1 and once for v1beta2 as a user would, are
  accepted unchanged with strict field validation (so no field is unknown and dropped), both by
  create and by server-side apply, and read back with every field they had;
- status is a subresource (writes to the object ignore it, the status endpoint accepts it);
- an object written in one version reads back in the other (conversion strategy None);
- ``kubectl get`` columns show the interesting fields;
- the schema's own rules refuse broken objects;
- the core rule clueue's admission is built on: a Pod's scheduling gates can be removed but
  never added after creation.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from kubernetes import client

from tests.testenv.control_plane import ControlPlane, api_error_message

KUEUE = "kueue.x-k8s.io"
SCHEDULING = "scheduling.x-k8s.io"
FIELD_MANAGER = "clueue-e2e"
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"

#: kind -> (group, plural, namespaced, served versions) as users expect them.
KINDS: dict[str, tuple[str, str, bool, tuple[str, ...]]] = {
    "ResourceFlavor": (KUEUE, "resourceflavors", False, ("v1beta1", "v1beta2")),
    "ClusterQueue": (KUEUE, "clusterqueues", False, ("v1beta1", "v1beta2")),
    "LocalQueue": (KUEUE, "localqueues", True, ("v1beta1", "v1beta2")),
    "Cohort": (KUEUE, "cohorts", False, ("v1beta1", "v1beta2")),
    "WorkloadPriorityClass": (KUEUE, "workloadpriorityclasses", False, ("v1beta1", "v1beta2")),
    "Workload": (KUEUE, "workloads", True, ("v1beta1", "v1beta2")),
    "AdmissionCheck": (KUEUE, "admissionchecks", False, ("v1beta1", "v1beta2")),
    "MultiKueueConfig": (KUEUE, "multikueueconfigs", False, ("v1beta1", "v1beta2")),
    "MultiKueueCluster": (KUEUE, "multikueueclusters", False, ("v1beta1", "v1beta2")),
    "Topology": (KUEUE, "topologies", False, ("v1beta1", "v1beta2")),
    "PodGroup": (SCHEDULING, "podgroups", True, ("v1alpha1",)),
    "ProvisioningRequestConfig": (KUEUE, "provisioningrequestconfigs", False, ("v1beta1", "v1beta2")),
}

#: Manifests as users write them, and statuses as controllers write them (see the files).
MANIFESTS = Path(__file__).resolve().parent / "manifests"


def docs(name: str) -> list[dict[str, Any]]:
    """The YAML documents of one file in ``manifests/``."""
    return [doc for doc in yaml.safe_load_all((MANIFESTS / name).read_text()) if doc]


def as_dict(value: object) -> dict[str, Any]:
    """The generated clients return ``object`` for custom resources; they are JSON objects."""
    assert isinstance(value, dict), type(value)
    return value


def resource(manifest: dict[str, Any]) -> tuple[str, str, str, bool]:
    """(group, version, plural, namespaced) of a manifest."""
    group, version = manifest["apiVersion"].split("/")
    kind_group, plural, namespaced, _ = KINDS[manifest["kind"]]
    assert group == kind_group
    return group, version, plural, namespaced


def call_with_content_type(method: Any, content_type: str, *args: Any, **kwargs: Any) -> Any:
    """Call a generated PATCH method with an explicit Content-Type, on every supported client.

    kubernetes >= 36 takes ``_content_type``; older clients (31-35) choose the Content-Type
    themselves from a fixed list (JSON patch, or strategic merge, which custom resources do
    not support), so for them the choice is overridden on the ApiClient for this one call.
    """
    try:
        return method(*args, _content_type=content_type, **kwargs)
    except TypeError as error:  # kubernetes < 36: ApiTypeError, "unexpected keyword argument"
        if "_content_type" not in str(error):
            raise
    api_client = method.__self__.api_client
    api_client.select_header_content_type = lambda *_args, **_kwargs: content_type
    try:
        return method(*args, **kwargs)
    finally:
        del api_client.select_header_content_type


def create(api: client.CustomObjectsApi, manifest: dict[str, Any], namespace: str) -> dict[str, Any]:
    """POST with strict field validation: any field the schema does not know is an error."""
    group, version, plural, namespaced = resource(manifest)
    if namespaced:
        return as_dict(
            api.create_namespaced_custom_object(group, version, namespace, plural, manifest, field_validation="Strict")
        )
    return as_dict(api.create_cluster_custom_object(group, version, plural, manifest, field_validation="Strict"))


def apply(api: client.CustomObjectsApi, manifest: dict[str, Any], namespace: str) -> dict[str, Any]:
    """Server-side apply (what `kubectl apply --server-side` sends), with strict validation."""
    group, version, plural, namespaced = resource(manifest)
    name = manifest["metadata"]["name"]
    options: dict[str, Any] = {"field_manager": FIELD_MANAGER, "force": True, "field_validation": "Strict"}
    content_type = "application/apply-patch+yaml"

    def send(body: object) -> dict[str, Any]:
        method: Any
        target: tuple[str, ...]
        if namespaced:
            method, target = api.patch_namespaced_custom_object, (group, version, namespace, plural, name)
        else:
            method, target = api.patch_cluster_custom_object, (group, version, plural, name)
        return as_dict(call_with_content_type(method, content_type, *target, body, **options))

    try:
        return send(manifest)
    except client.ApiException as error:
        # kubernetes < 37 serialises only JSON content types itself and wants an apply-patch
        # body pre-serialised (status 0: refused in the client, nothing was sent); >= 37 wants
        # a dict.  JSON is YAML, so the same manifest goes as a JSON string.
        if error.status not in (0, None):
            raise
        return send(json.dumps(manifest))


def get(
    api: client.CustomObjectsApi, manifest: dict[str, Any], namespace: str, version: str | None = None
) -> dict[str, Any]:
    """Read the object of ``manifest`` back, in its own version or in ``version``."""
    group, own_version, plural, namespaced = resource(manifest)
    name = manifest["metadata"]["name"]
    if namespaced:
        return as_dict(api.get_namespaced_custom_object(group, version or own_version, namespace, plural, name))
    return as_dict(api.get_cluster_custom_object(group, version or own_version, plural, name))


def patch_status(
    api: client.CustomObjectsApi, manifest: dict[str, Any], namespace: str, status: dict[str, Any]
) -> dict[str, Any]:
    """Merge-patch the status subresource (what a controller does), with strict validation."""
    group, version, plural, namespaced = resource(manifest)
    name = manifest["metadata"]["name"]
    method: Any
    target: tuple[str, ...]
    if namespaced:
        method, target = api.patch_namespaced_custom_object_status, (group, version, namespace, plural, name)
    else:
        method, target = api.patch_cluster_custom_object_status, (group, version, plural, name)
    merge = "application/merge-patch+json"
    return as_dict(call_with_content_type(method, merge, *target, {"status": status}, field_validation="Strict"))


def missing_fields(expected: Any, actual: Any, path: str = "") -> list[str]:
    """Paths where ``actual`` lacks or changed what ``expected`` has (defaults may be added)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path or '.'}: expected an object, got {actual!r}"]
        problems: list[str] = []
        for key, value in expected.items():
            if key not in actual:
                problems.append(f"{path}.{key}: missing")
            else:
                problems.extend(missing_fields(value, actual[key], f"{path}.{key}"))
        return problems
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: expected {expected!r}, got {actual!r}"]
        problems = []
        for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
            problems.extend(missing_fields(want, got, f"{path}[{index}]"))
        return problems
    return [] if expected == actual else [f"{path}: expected {expected!r}, got {actual!r}"]


def table(kube: ControlPlane, path: str) -> dict[str, str]:
    """The `kubectl get` columns of one object, as {column name: printed value}."""
    answer = kube.get_json(path, accept=TABLE)
    names = [column["name"] for column in answer["columnDefinitions"]]
    (row,) = answer["rows"]
    return {name: str(cell) for name, cell in zip(names, row["cells"], strict=True)}


@pytest.fixture
def objects(kube: ControlPlane) -> Iterator[client.CustomObjectsApi]:
    with kube.api_client() as api:
        yield client.CustomObjectsApi(api)


@pytest.fixture
def core(kube: ControlPlane) -> Iterator[client.CoreV1Api]:
    with kube.api_client() as api:
        yield client.CoreV1Api(api)


# ---------------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------------


def test_crds_are_established_with_the_expected_versions_and_scopes(kube: ControlPlane) -> None:
    crds = kube.get_json("/apis/apiextensions.k8s.io/v1/customresourcedefinitions")["items"]
    by_kind = {crd["spec"]["names"]["kind"]: crd for crd in crds}
    assert set(by_kind) == set(KINDS)
    for kind, (group, plural, namespaced, versions) in KINDS.items():
        crd = by_kind[kind]
        assert crd["metadata"]["name"] == f"{plural}.{group}"
        assert crd["spec"]["scope"] == ("Namespaced" if namespaced else "Cluster"), kind
        assert [v["name"] for v in crd["spec"]["versions"] if v["served"]] == list(versions), kind
        assert [v["name"] for v in crd["spec"]["versions"] if v["storage"]] == [versions[0]], kind
        conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
        assert conditions["Established"] == "True", kind
        assert conditions["NamesAccepted"] == "True", kind
        # A non-structural schema would be reported here (and its fields silently kept).
        assert "NonStructuralSchema" not in conditions, kind
    # Discovery serves both Kueue versions, so `kubectl` and clients find them.
    discovery = kube.get_json(f"/apis/{KUEUE}")
    assert sorted(v["version"] for v in discovery["versions"]) == ["v1beta1", "v1beta2"]
    assert discovery["preferredVersion"]["version"] == "v1beta2"


@pytest.mark.parametrize(
    "manifests, workload_status",
    [
        pytest.param("kueue-v1beta1.yaml", "kueue-v1beta1-workload-status.yaml", id="v1beta1"),
        pytest.param("kueue-v1beta2.yaml", "kueue-v1beta2-workload-status.yaml", id="v1beta2"),
    ],
)
def test_kueue_manifests_apply_unchanged_and_read_back_whole(
    kube: ControlPlane,
    objects: client.CustomObjectsApi,
    namespace: str,
    manifests: str,
    workload_status: str,
) -> None:
    applied = docs(manifests)
    assert {m["kind"] for m in applied} == set(KINDS) - {"PodGroup"}

    for manifest in applied:
        created = create(objects, manifest, namespace)
        assert missing_fields(manifest, created) == [], manifest["kind"]
        # Re-applying the same manifest server-side (kubectl apply --server-side) is accepted
        # too, and exercises the list-map keys declared in the schema.
        reapplied = apply(objects, manifest, namespace)
        assert missing_fields(manifest, reapplied) == [], manifest["kind"]
        assert reapplied["metadata"]["generation"] == created["metadata"]["generation"], manifest["kind"]

    for manifest in applied:
        stored = get(objects, manifest, namespace)
        assert missing_fields(manifest, stored) == [], manifest["kind"]

    # Status is written through the status subresource, as a controller does.
    (workload,) = [m for m in applied if m["kind"] == "Workload"]
    (status,) = docs(workload_status)
    patched = patch_status(objects, workload, namespace, status)
    assert missing_fields(status, patched["status"]) == []
    assert missing_fields(workload["spec"], patched["spec"]) == []
    assert missing_fields(status, get(objects, workload, namespace)["status"]) == []


def test_defaults_match_kueue(objects: client.CustomObjectsApi, namespace: str) -> None:
    cq = create(
        objects,
        {"apiVersion": f"{KUEUE}/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "defaults"}, "spec": {}},
        namespace,
    )
    assert cq["spec"]["queueingStrategy"] == "BestEffortFIFO"
    assert cq["spec"]["stopPolicy"] == "None"
    assert cq["spec"]["flavorFungibility"] == {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"}
    assert cq["spec"]["preemption"] == {
        "reclaimWithinCohort": "Never",
        "withinClusterQueue": "Never",
        "borrowWithinCohort": {"policy": "Never"},
    }
    wl = create(
        objects,
        {
            "apiVersion": f"{KUEUE}/v1beta1",
            "kind": "Workload",
            "metadata": {"name": "defaults"},
            "spec": {"podSets": [{"template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}]},
        },
        namespace,
    )
    assert wl["spec"]["active"] is True
    assert wl["spec"]["podSets"][0]["name"] == "main"
    assert wl["spec"]["podSets"][0]["count"] == 1


def test_status_is_a_subresource(objects: client.CustomObjectsApi, namespace: str) -> None:
    (manifest,) = docs("podgroup.yaml")
    (status,) = docs("podgroup-status.yaml")
    created = create(objects, {**manifest, "status": status}, namespace)
    # Writes to the object itself ignore status: only controllers set it, via /status.
    assert "status" not in created or not created["status"]
    assert missing_fields(manifest, created) == []
    patched = patch_status(objects, manifest, namespace, status)
    assert missing_fields(status, patched["status"]) == []


def test_objects_read_back_in_the_other_version(objects: client.CustomObjectsApi, namespace: str) -> None:
    # Conversion strategy None: same fields, only apiVersion differs.  The schemas accept both
    # versions' field names, so nothing written in one version is pruned when read in the other.
    cq = {
        "apiVersion": f"{KUEUE}/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": "cross-version"},
        "spec": {
            "cohort": "legacy-cohort",
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "default", "resources": [{"name": "cpu", "nominalQuota": 4, "borrowingLimit": 2}]}
                    ],
                }
            ],
        },
    }
    create(objects, cq, namespace)
    as_v1beta2 = get(objects, cq, namespace, version="v1beta2")
    assert as_v1beta2["apiVersion"] == f"{KUEUE}/v1beta2"
    assert missing_fields(cq["spec"], as_v1beta2["spec"]) == []

    cohort = {
        "apiVersion": f"{KUEUE}/v1beta2",
        "kind": "Cohort",
        "metadata": {"name": "cross-version-child"},
        "spec": {"parentName": "cross-version-root"},
    }
    create(objects, cohort, namespace)
    as_v1beta1 = get(objects, cohort, namespace, version="v1beta1")
    assert as_v1beta1["spec"] == {"parentName": "cross-version-root"}


def test_kubectl_get_columns(kube: ControlPlane, objects: client.CustomObjectsApi, namespace: str) -> None:
    create(
        objects,
        {
            "apiVersion": f"{KUEUE}/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "columns"},
            "spec": {"cohortName": "columns-cohort", "queueingStrategy": "StrictFIFO"},
        },
        namespace,
    )
    cq = {"apiVersion": f"{KUEUE}/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "columns"}}
    patch_status(objects, cq, namespace, {"pendingWorkloads": 3, "admittedWorkloads": 2, "reservingWorkloads": 2})
    columns = table(kube, f"/apis/{KUEUE}/v1beta2/clusterqueues/columns")
    assert {k: columns[k] for k in ("Cohort", "Strategy", "Pending Workloads", "Admitted Workloads")} == {
        "Cohort": "columns-cohort",
        "Strategy": "StrictFIFO",
        "Pending Workloads": "3",
        "Admitted Workloads": "2",
    }
    # The v1beta1 view reads the v1beta1 field name (a v1beta2 manifest shows in "Cohort Name").
    assert "Cohort" in table(kube, f"/apis/{KUEUE}/v1beta1/clusterqueues/columns")

    lq = {
        "apiVersion": f"{KUEUE}/v1beta2",
        "kind": "LocalQueue",
        "metadata": {"name": "q"},
        "spec": {"clusterQueue": "columns"},
    }
    create(objects, lq, namespace)
    patch_status(objects, lq, namespace, {"pendingWorkloads": 1, "admittedWorkloads": 5})
    columns = table(kube, f"/apis/{KUEUE}/v1beta2/namespaces/{namespace}/localqueues/q")
    assert columns == {"Name": "q", "ClusterQueue": "columns", "Pending Workloads": "1", "Admitted Workloads": "5"}

    wl = {
        "apiVersion": f"{KUEUE}/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w"},
        "spec": {
            "queueName": "q",
            "podSets": [
                {"name": "main", "count": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
            ],
        },
    }
    create(objects, wl, namespace)
    patch_status(
        objects,
        wl,
        namespace,
        {
            "admission": {
                "clusterQueue": "columns",
                "podSetAssignments": [{"name": "main", "flavors": {"cpu": "default"}, "count": 1}],
            },
            "conditions": [
                {
                    "type": "Admitted",
                    "status": "True",
                    "reason": "Admitted",
                    "message": "",
                    "lastTransitionTime": "2026-01-05T10:00:00Z",
                }
            ],
        },
    )
    columns = table(kube, f"/apis/{KUEUE}/v1beta2/namespaces/{namespace}/workloads/w")
    assert {k: columns[k] for k in ("Queue", "Reserved in", "Admitted", "Finished")} == {
        "Queue": "q",
        "Reserved in": "columns",
        "Admitted": "True",
        "Finished": "None",  # not finished: no such condition (kubectl prints <none>)
    }
    assert "Age" in columns


#: What Kueue v0.19's CRDs print, by kind: `kubectl get` columns (after NAME) and those `-o wide`
#: adds, in order; a user's scripts parse them. clueue may add its own after these, in -o wide only.
KUEUE_COLUMNS: dict[str, tuple[list[str], list[str]]] = {
    "clusterqueues": (["Cohort", "Pending Workloads"], ["Strategy", "Admitted Workloads"]),
    "localqueues": (["ClusterQueue", "Pending Workloads", "Admitted Workloads"], []),
    "workloads": (["Queue", "Reserved in", "Admitted", "Finished", "Age"], []),
    "workloadpriorityclasses": (["Value"], []),
    "multikueueclusters": (["Connected", "Age"], []),
    "admissionchecks": (["Age"], []),  # no columns of its own: kubectl's NAME AGE
    "cohorts": (["Age"], []),
    "resourceflavors": (["Age"], []),
    "topologies": (["Age"], []),
    "multikueueconfigs": (["Age"], []),
    "provisioningrequestconfigs": (["Age"], []),
}


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
@pytest.mark.parametrize("plural", sorted(KUEUE_COLUMNS))
def test_kubectl_get_prints_kueues_columns(kube: ControlPlane, plural: str, version: str) -> None:
    namespaced = plural in ("localqueues", "workloads")
    path = f"/apis/{KUEUE}/{version}/{'namespaces/default/' if namespaced else ''}{plural}"
    definitions = kube.get_json(path, accept=TABLE)["columnDefinitions"]
    shown = [c["name"] for c in definitions if c["priority"] == 0]
    wide = [c["name"] for c in definitions if c["priority"] > 0]
    default, extra = KUEUE_COLUMNS[plural]
    assert shown == ["Name", *default]
    assert wide[: len(extra)] == extra


@pytest.mark.parametrize(
    "manifest, complaint",
    [
        pytest.param(
            {"kind": "ClusterQueue", "spec": {"cohort": "x", "cohortName": "y"}},
            "must agree",
            id="cohort-and-cohortName-disagree",
        ),
        pytest.param(
            {
                "kind": "ClusterQueue",
                "spec": {
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [
                                {"name": "f", "resources": [{"name": "cpu", "nominalQuota": 1, "borrowingLimit": 1}]}
                            ],
                        }
                    ]
                },
            },
            "borrowingLimit requires a cohort",
            id="borrowing-without-cohort",
        ),
        pytest.param(
            {
                "kind": "ClusterQueue",
                "spec": {
                    "cohort": "c",
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu"],
                            "flavors": [{"name": "f", "resources": [{"name": "cpu", "nominalQuota": "lots"}]}],
                        }
                    ],
                },
            },
            "nominalQuota",
            id="quantity-not-a-quantity",
        ),
        pytest.param(
            {"kind": "ClusterQueue", "spec": {"queueingStrategy": "Random"}},
            "queueingStrategy",
            id="unknown-queueing-strategy",
        ),
        pytest.param(
            {"kind": "WorkloadPriorityClass", "description": "no value"},
            "value",
            id="priority-class-without-value",
        ),
    ],
)
def test_schema_rules_refuse_broken_objects(
    objects: client.CustomObjectsApi, namespace: str, manifest: dict[str, Any], complaint: str
) -> None:
    body = {"apiVersion": f"{KUEUE}/v1beta2", "metadata": {"name": "broken"}, **manifest}
    with pytest.raises(client.ApiException) as raised:
        create(objects, body, namespace)
    assert raised.value.status == 422, api_error_message(raised.value)
    assert complaint in api_error_message(raised.value)


def test_unknown_fields_are_refused_under_strict_validation(objects: client.CustomObjectsApi, namespace: str) -> None:
    # The schemas are structural, so a misspelt field is not silently kept: strict validation
    # (kubectl's default) refuses it, lax validation would prune it.
    body = {
        "apiVersion": f"{KUEUE}/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "typo"},
        "spec": {"cohrtName": "x"},
    }
    with pytest.raises(client.ApiException) as raised:
        create(objects, body, namespace)
    assert raised.value.status == 400
    assert "cohrtName" in api_error_message(raised.value)


ADMISSION_GATE = "kueue.x-k8s.io/admission"


def _json_patch(core: client.CoreV1Api, namespace: str, name: str, operations: list[dict[str, Any]]) -> None:
    call_with_content_type(core.patch_namespaced_pod, "application/json-patch+json", name, namespace, operations)


def test_scheduling_gates_can_be_removed_but_never_added(
    kube: ControlPlane, core: client.CoreV1Api, namespace: str
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "gated",
            "labels": {"kueue.x-k8s.io/managed": "true", "kueue.x-k8s.io/queue-name": "team-a"},
        },
        "spec": {
            "schedulingGates": [{"name": ADMISSION_GATE}],
            "containers": [
                {"name": "main", "image": "registry.example.com/app:1", "resources": {"requests": {"cpu": "100m"}}}
            ],
        },
    }
    core.create_namespaced_pod(namespace, cast(Any, pod))  # a dict body works with every client
    path = f"/api/v1/namespaces/{namespace}/pods/gated"
    assert kube.get_json(path)["spec"]["schedulingGates"] == [{"name": ADMISSION_GATE}]

    # Adding a second gate to a gated pod: refused.
    with pytest.raises(client.ApiException) as raised:
        _json_patch(
            core,
            namespace,
            "gated",
            [{"op": "add", "path": "/spec/schedulingGates/-", "value": {"name": "example.com/other"}}],
        )
    assert raised.value.status == 422, api_error_message(raised.value)
    assert "schedulingGates" in api_error_message(raised.value)

    # Removing the admission gate (what clueue does to admit a pod): accepted.
    _json_patch(core, namespace, "gated", [{"op": "remove", "path": "/spec/schedulingGates/0"}])
    assert not kube.get_json(path)["spec"].get("schedulingGates")

    # Putting it back after creation: refused, so a gate is the one chance to hold a pod.
    with pytest.raises(client.ApiException) as raised:
        _json_patch(
            core,
            namespace,
            "gated",
            [{"op": "add", "path": "/spec/schedulingGates", "value": [{"name": ADMISSION_GATE}]}],
        )
    assert raised.value.status == 422, api_error_message(raised.value)
    assert "schedulingGates" in api_error_message(raised.value)
