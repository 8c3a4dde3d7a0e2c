"""deploy/ on a real kube-apiserver with RBAC authorization, as `kubectl apply -k deploy/` would.

There is no container engine here, so the manifests are checked where it counts: every object is
applied server-side (the apiserver validates each); the Deployment's Pod template is created as a
dry run in its namespace, where the `restricted` Pod Security Standard is enforced; the
controller's ServiceAccount, authenticated by a token the apiserver minted for it, is allowed what
the controller calls and refused what it must not do; and the controller runs with that token only.
"""

from __future__ import annotations

import copy
import filecmp
import json
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.dynamic import DynamicClient

from tests.e2e.controller_harness import (
    controller_log, free_port, lease_holder, metrics_port, start_controller, stop_controller, wait_until,
)
from tests.e2e.test_adapter import create, gated_pod, queue_setup, tag
from tests.e2e.test_controller import waiting_recorded
from tests.testenv.build import ensure_binaries
from tests.testenv.control_plane import ControlPlane, api_error_message

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
NAMESPACE = "clueue-system"
SERVICE_ACCOUNT = "clueue-controller"
MUTATING, VALIDATING = "clueue-pod-mutating", "clueue-pod-validating"

#: Kinds of deploy/ that are cluster-scoped: kustomize's `namespace:` leaves them alone.
CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
                  "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService"}
#: Objects that live in another namespace than the controller's, as the kustomization's
#: transformers keep them (the visibility API's reader binding, beside the Role it binds).
ELSEWHERE = {("RoleBinding", "clueue-visibility-auth-reader"): "kube-system"}
#: The kustomization fields the reader below understands; any other one fails the test rather
#: than being silently ignored (and the rendering differing from kubectl's).
KUSTOMIZATION_FIELDS = {"apiVersion", "kind", "namespace", "resources", "transformers"}


# --------------------------------------------------------------------------------------------
# Rendering deploy/ (test-side: what `kubectl kustomize` does for plain resources)
# --------------------------------------------------------------------------------------------


def render(directory: Path) -> list[dict[str, Any]]:
    """The objects of the kustomization in ``directory``: its `resources` (files, and directories
    holding a kustomization, recursively) in order, with its `namespace` set on namespaced ones."""
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    unknown = set(kustomization) - KUSTOMIZATION_FIELDS
    assert not unknown, f"{directory}/kustomization.yaml: fields this test cannot render: {sorted(unknown)}"
    objects: list[dict[str, Any]] = []
    for entry in kustomization.get("resources", []):
        path = (directory / entry).resolve()
        if path.is_dir():
            objects.extend(render(path))
            continue
        # kustomize's default load restrictor: a file resource must lie inside the kustomization.
        assert directory.resolve() in path.parents, f"{directory}: {entry} is outside the kustomization"
        objects.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    namespace = kustomization.get("namespace")
    if namespace:
        for obj in objects:
            if obj["kind"] not in CLUSTER_SCOPED:
                obj["metadata"]["namespace"] = namespace
    for entry in kustomization.get("transformers", []):  # after `namespace:`, as kustomize runs them
        for transformer in yaml.safe_load_all((directory / entry).read_text()):
            _transform(transformer, objects)
    return objects


def _transform(transformer: dict[str, Any], objects: list[dict[str, Any]]) -> None:
    """Apply a builtin PatchTransformer whose patch replaces metadata.namespace (the only kind
    of transformer deploy/ uses; any other fails the test rather than being ignored)."""
    assert transformer["kind"] == "PatchTransformer", f"a transformer this test cannot apply: {transformer}"
    (operation,) = json.loads(transformer["patch"])
    assert operation["op"] == "replace" and operation["path"] == "/metadata/namespace", operation
    target = transformer["target"]
    assert set(target) <= {"kind", "name"}, target
    for obj in objects:
        if all((obj["kind"] if k == "kind" else obj["metadata"].get(k)) == v for k, v in target.items()):
            obj["metadata"]["namespace"] = operation["value"]


def key(obj: dict[str, Any]) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


@pytest.fixture(scope="module")
def manifests() -> list[dict[str, Any]]:
    return render(DEPLOY)


def by_kind(manifests: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [obj for obj in manifests if obj["kind"] == kind]


# --------------------------------------------------------------------------------------------
# The files themselves
# --------------------------------------------------------------------------------------------


def test_deploy_crds_are_the_package_crds() -> None:
    """adapters/crds is the single source (shipped in the package, printed by `clueue crds`);
    deploy/crds holds copies because kustomize reads no file outside its directory."""
    source = sorted(p.name for p in (REPO / "adapters" / "crds").glob("*.yaml"))
    copies = sorted(p.name for p in (DEPLOY / "crds").glob("*.yaml") if p.name != "kustomization.yaml")
    assert copies == source, "deploy/crds differs from adapters/crds: cp adapters/crds/*.yaml deploy/crds/"
    different = [name for name in source
                 if not filecmp.cmp(REPO / "adapters" / "crds" / name, DEPLOY / "crds" / name, shallow=False)]
    assert not different, f"stale copies in deploy/crds: {different}; cp adapters/crds/*.yaml deploy/crds/"
    listed = yaml.safe_load((DEPLOY / "crds" / "kustomization.yaml").read_text())["resources"]
    assert sorted(listed) == source


def test_every_namespaced_object_is_in_clueue_system_and_refers_to_it(manifests: list[dict[str, Any]]) -> None:
    """The namespace is written in each file too, so `kubectl apply -f deploy/FILE` agrees with
    `-k`, and the renderer above (which only sets metadata.namespace) with kustomize's."""
    for path in DEPLOY.glob("*.yaml"):
        if path.name == "kustomization.yaml":
            continue
        if path.name == "kube-system-rolebinding.yaml":  # a transformer, not an object
            continue
        for obj in (doc for doc in yaml.safe_load_all(path.read_text()) if doc):
            expected = None if obj["kind"] in CLUSTER_SCOPED else NAMESPACE
            expected = ELSEWHERE.get((obj["kind"], obj["metadata"]["name"]), expected)
            assert obj["metadata"].get("namespace") == expected, f"{path.name}: {key(obj)}"
    for (kind, name), namespace in ELSEWHERE.items():  # where kustomize leaves it too
        assert [o["metadata"]["namespace"] for o in by_kind(manifests, kind) if o["metadata"]["name"] == name] \
            == [namespace]
    for binding in by_kind(manifests, "ClusterRoleBinding") + by_kind(manifests, "RoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]
    for configuration in by_kind(manifests, "MutatingWebhookConfiguration") + by_kind(
            manifests, "ValidatingWebhookConfiguration"):
        for webhook in configuration["webhooks"]:
            assert webhook["clientConfig"]["service"]["namespace"] == NAMESPACE
            excluded = webhook["namespaceSelector"]["matchExpressions"][0]
            assert excluded["operator"] == "NotIn" and {"kube-system", NAMESPACE} <= set(excluded["values"])
            assert webhook["failurePolicy"] == "Fail" and "caBundle" not in webhook["clientConfig"]


def test_webhook_configurations_are_the_ones_the_controller_registers(manifests: list[dict[str, Any]]) -> None:
    """deploy/webhooks.yaml and webhook_configurations() describe the same webhooks (labels
    aside), so the manifests and a controller that registers its own configurations agree."""
    from clueue.adapters.webhook.configuration import webhook_configurations

    ours = {obj["metadata"]["name"]: {**obj, "metadata": {"name": obj["metadata"]["name"]}}
            for obj in manifests if obj["kind"].endswith("WebhookConfiguration")}
    registered = {obj["metadata"]["name"]: obj
                  for obj in webhook_configurations(NAMESPACE, service="clueue-webhook")}
    assert ours == registered
    assert set(ours) == {MUTATING, VALIDATING}


def test_rendering_agrees_with_kubectl_kustomize_when_kubectl_is_installed(manifests: list[dict[str, Any]]) -> None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:  # the reader above is then the only rendering: nothing to compare with
        return
    output = subprocess.run([kubectl, "kustomize", str(DEPLOY)], capture_output=True, text=True, timeout=120)
    assert output.returncode == 0, output.stderr
    theirs = {key(obj): obj for obj in yaml.safe_load_all(output.stdout) if obj}
    assert theirs == {key(obj): obj for obj in manifests}


def test_containerfile_copies_everything_the_package_is_built_from() -> None:
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    containerfile = (DEPLOY / "Containerfile").read_text()
    sources = set(project["tool"]["setuptools"]["package-dir"].values()) | {"pyproject.toml",
                                                                             project["project"]["readme"]}
    copied = {part.rstrip("/") for line in containerfile.splitlines() if line.startswith("COPY ")
              and "--from" not in line for part in line.split()[1:-1]}
    assert sources <= copied, f"deploy/Containerfile does not COPY {sorted(sources - copied)}"
    assert "USER 65532" in containerfile and 'ENTRYPOINT ["clueue"]' in containerfile
    assert "pip wheel" in containerfile and ".[kube]" in containerfile


def test_every_python_package_of_the_source_is_in_the_built_package() -> None:
    """A folder of modules left out of ``[tool.setuptools] packages`` works in an editable
    install and is missing from the wheel the image is built from."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    setuptools = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set()
    for package, folder in setuptools["package-dir"].items():
        for init in (REPO / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(REPO / folder).parts
            found.add(".".join((package, *relative)))
    assert found == set(setuptools["packages"]), f"missing: {sorted(found - set(setuptools['packages']))}"


# --------------------------------------------------------------------------------------------
# On the apiserver
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plane() -> Iterator[ControlPlane]:
    """A control plane of this module's own: the webhook configurations (failurePolicy Fail,
    pointing at a Service with no endpoints) would refuse other tests' Pods."""
    with ControlPlane(ensure_binaries()) as plane:
        yield plane


@pytest.fixture(scope="module")
def applied(plane: ControlPlane, manifests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """deploy/ applied server-side as `kubectl apply --server-side -k` does, in the
    kustomization's order (the Namespace and CRDs first; the CRDs, installed by the control plane
    already, are applied over); returns what the apiserver stored."""
    stored = []
    with plane.api_client() as api:
        dynamic = DynamicClient(api)
        for obj in manifests:
            resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            try:
                result = dynamic.server_side_apply(resource, body=obj, name=obj["metadata"]["name"],
                                                   namespace=obj["metadata"].get("namespace"),
                                                   field_manager="kubectl", force_conflicts=True)
            except client.ApiException as error:
                pytest.fail(f"the apiserver refused {key(obj)}: {api_error_message(error)}")
            stored.append(result.to_dict())
    return stored


def test_every_manifest_is_accepted_by_the_apiserver(applied: list[dict[str, Any]],
                                                    manifests: list[dict[str, Any]]) -> None:
    assert [key(obj) for obj in applied] == [key(obj) for obj in manifests]
    deployment = next(obj for obj in applied if obj["kind"] == "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pdb = next(obj for obj in applied if obj["kind"] == "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1


def test_the_pod_template_meets_the_restricted_pod_security_standard(plane: ControlPlane, applied: Any,
                                                                     manifests: list[dict[str, Any]]) -> None:
    """No kubelet runs Pods here, but PodSecurity admission judges a Pod when it is created: a
    dry run of the Deployment's Pod in clueue-system (which enforces `restricted`) is admitted,
    and the same Pod made to run as root is refused, which shows the check is really made."""
    template = by_kind(manifests, "Deployment")[0]["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "template-check", **template["metadata"]},
           "spec": template["spec"]}
    root = copy.deepcopy(pod)
    root["spec"]["securityContext"] = {"runAsUser": 0}
    root["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    with plane.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespaced_pod(NAMESPACE, pod, dry_run="All")
        with pytest.raises(client.ApiException) as refused:
            core.create_namespaced_pod(NAMESPACE, root, dry_run="All")
    assert refused.value.status == 403 and "restricted" in api_error_message(refused.value)


def user_pod(namespace: str, name: str) -> dict[str, Any]:
    """A Pod for LocalQueue `main` (one cpu) as a user writes it: the webhook is what adds the
    gate, the managed label and the finalizer."""
    pod = gated_pod(namespace, name, cpu="1")
    pod["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "main"}
    del pod["metadata"]["finalizers"], pod["spec"]["schedulingGates"]
    return pod


def test_with_no_webhook_replica_only_pods_subject_to_queueing_are_refused(plane: ControlPlane,
                                                                           applied: Any) -> None:
    """The documented failure mode, live: nothing answers the webhook here, so a Pod with the
    queue-name label is refused (never created ungated), and so is one of a coscheduling
    PodGroup, while a Pod with neither, and one in clueue-system, are created as if clueue were
    not installed."""
    plane.create_namespace("team-down")
    with plane.api_client() as admin:
        core = client.CoreV1Api(admin)
        queued = user_pod("team-down", "queued")
        with pytest.raises(client.ApiException) as refused:
            core.create_namespaced_pod("team-down", queued, dry_run="All")
        assert "failed calling webhook" in api_error_message(refused.value)
        grouped = copy.deepcopy(queued)  # a coscheduling PodGroup's Pod without a queue: gang-scheduled too
        grouped["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": "mpi"}
        with pytest.raises(client.ApiException) as refused:
            core.create_namespaced_pod("team-down", grouped, dry_run="All")
        assert "failed calling webhook" in api_error_message(refused.value)
        plain = copy.deepcopy(queued)
        plain["metadata"]["labels"] = {}
        core.create_namespaced_pod("team-down", plain, dry_run="All")
        own = copy.deepcopy(queued)
        own["metadata"]["namespace"] = NAMESPACE
        own["spec"]["securityContext"] = {"runAsNonRoot": True, "runAsUser": 65532,
                                          "seccompProfile": {"type": "RuntimeDefault"}}
        own["spec"]["containers"][0]["securityContext"] = {"allowPrivilegeEscalation": False,
                                                           "capabilities": {"drop": ["ALL"]}}
        core.create_namespaced_pod(NAMESPACE, own, dry_run="All")


# --------------------------------------------------------------------------------------------
# RBAC, as the controller's ServiceAccount
# --------------------------------------------------------------------------------------------


def service_account_kubeconfig(plane: ControlPlane, path: Path) -> Path:
    """A kubeconfig for the controller's ServiceAccount: the plane's server and CA, and a token
    the apiserver minted for it (TokenRequest needs no controller-manager). No admin certificate."""
    with plane.api_client() as api:
        request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(
            audiences=[], expiration_seconds=3600))
        token = client.CoreV1Api(api).create_namespaced_service_account_token(
            SERVICE_ACCOUNT, NAMESPACE, request).status.token
    admin = yaml.safe_load(plane.kubeconfig.read_text())
    user = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": admin["clusters"],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "clueue", "context": {"cluster": admin["clusters"][0]["name"], "user": user}}],
        "current-context": "clueue"}))
    path.chmod(0o600)
    return path


@pytest.fixture(scope="module")
def controller_kubeconfig(plane: ControlPlane, applied: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return service_account_kubeconfig(plane, tmp_path_factory.mktemp("sa") / "kubeconfig")


@pytest.fixture(scope="module")
def as_controller(controller_kubeconfig: Path) -> Iterator[client.ApiClient]:
    api = config.new_client_from_config(config_file=str(controller_kubeconfig))
    try:
        yield api
    finally:
        api.close()


# (verb, group, resource, namespace, name): "" namespace is every namespace (or a cluster-scoped
# object); "" name is any object.
Access = tuple[str, str, str, str, str]


def _everywhere(verbs: str, group: str, resources: str) -> list[Access]:
    return [(verb, group, resource, ns, "") for verb in verbs.split() for resource in resources.split()
            for ns in ("", "team-a")]


#: What the controller calls (adapters/kube, adapters/controller, adapters/webhook).
NEEDED: list[Access] = [
    *_everywhere("get list watch", "", "namespaces nodes"),
    *_everywhere("get list watch", "scheduling.k8s.io", "priorityclasses"),
    *[(verb, "", "configmaps", "kueue-system", "kueue-manager-config") for verb in ("get", "list", "watch")],
    *_everywhere("get list watch", "kueue.x-k8s.io",
                 "resourceflavors clusterqueues cohorts localqueues workloadpriorityclasses admissionchecks"),
    *_everywhere("get list watch update", "scheduling.x-k8s.io", "podgroups"),
    *_everywhere("get update", "scheduling.x-k8s.io", "podgroups/status"),
    *_everywhere("get list watch update delete", "", "pods"),
    *_everywhere("get list watch create update delete", "kueue.x-k8s.io", "workloads"),
    *_everywhere("get update", "kueue.x-k8s.io",
                 "workloads/status clusterqueues/status localqueues/status cohorts/status"),
    *_everywhere("create", "", "events"),
    *[(verb, "admissionregistration.k8s.io", f"{kind}webhookconfigurations", "", name)
      for verb in ("get", "update") for kind, name in (("mutating", MUTATING), ("validating", VALIDATING))],
    ("create", "coordination.k8s.io", "leases", NAMESPACE, ""),
    *[(verb, "coordination.k8s.io", "leases", NAMESPACE, name)
      for verb in ("get", "update") for name in ("clueue-controller", "clueue-decider")],
    ("create", "", "secrets", NAMESPACE, ""),
    ("get", "", "secrets", NAMESPACE, "clueue-webhook-tls"),
    ("update", "", "secrets", NAMESPACE, "clueue-webhook-tls"),
    # the visibility API (adapters/visibility/): its certificate, its APIServices' caBundle, the
    # front proxy's configuration, and the SubjectAccessReviews it authorizes requests with
    ("get", "", "secrets", NAMESPACE, "clueue-visibility-tls"),
    ("update", "", "secrets", NAMESPACE, "clueue-visibility-tls"),
    *[(verb, "apiregistration.k8s.io", "apiservices", "", f"{version}.visibility.kueue.x-k8s.io")
      for verb in ("get", "update") for version in ("v1beta1", "v1beta2")],
    ("get", "", "configmaps", "kube-system", "extension-apiserver-authentication"),
    ("create", "authorization.k8s.io", "subjectaccessreviews", "", ""),
    ("get", "", "secrets", NAMESPACE, "a-worker-kubeconfig"),  # MultiKueue: named by MultiKueueClusters
    *_everywhere("get list", "kueue.x-k8s.io", "multikueueclusters multikueueconfigs"),
    *_everywhere("get update", "kueue.x-k8s.io", "multikueueclusters/status admissionchecks/status"),
    *_everywhere("update", "", "pods/status"),
]

def _table(text: str) -> list[Access]:
    """Rows of ``verb  resource[/subresource][.group]  namespace  name``; ``-`` is empty."""
    rows = []
    for line in text.strip().splitlines():
        verb, resource, namespace, name = ("" if field == "-" else field for field in line.split())
        resource, _, group = resource.partition(".")
        rows.append((verb, group, resource, namespace, name))
    return rows


#: What a controller with this role must not be able to do.
DENIED: list[Access] = _table(f"""
    get          secrets                                        default          clueue-webhook-tls
    list         secrets                                        -                -
    list         secrets                                        {NAMESPACE}    -
    update       secrets                                        {NAMESPACE}    another-secret
    create       secrets                                        default          -
    delete       secrets                                        {NAMESPACE}    clueue-webhook-tls
    delete       namespaces                                     -                team-a
    create       namespaces                                     -                -
    create       pods                                           team-a           -
    patch        pods                                           team-a           -
    patch        pods/status                                    team-a           -
    create       pods/exec                                      team-a           -
    update       nodes                                          -                -
    create       configmaps                                     {NAMESPACE}    -
    get          configmaps                                     kueue-system     another-config
    list         configmaps                                     kueue-system     -
    list         configmaps                                     -                -
    update       configmaps                                     kueue-system     kueue-manager-config
    create       configmaps                                     kueue-system     -
    update       clusterqueues.kueue.x-k8s.io                   -                -
    delete       localqueues.kueue.x-k8s.io                     team-a           -
    update       mutatingwebhookconfigurations.admissionregistration.k8s.io    -  another-webhook
    update       validatingwebhookconfigurations.admissionregistration.k8s.io  -  another-webhook
    create       mutatingwebhookconfigurations.admissionregistration.k8s.io    -  -
    delete       validatingwebhookconfigurations.admissionregistration.k8s.io  -  {VALIDATING}
    list         mutatingwebhookconfigurations.admissionregistration.k8s.io    -  -
    create       leases.coordination.k8s.io                     kube-system      -
    update       leases.coordination.k8s.io                     kube-system      clueue-controller
    update       leases.coordination.k8s.io                     {NAMESPACE}    another-lease
    update       leases.coordination.k8s.io                     kube-node-lease  node-1
    create       clusterrolebindings.rbac.authorization.k8s.io  -                -
    escalate     clusterroles.rbac.authorization.k8s.io         -                -
    impersonate  serviceaccounts                                -                -
    create       serviceaccounts/token                          {NAMESPACE}    {SERVICE_ACCOUNT}
    update       customresourcedefinitions.apiextensions.k8s.io -                -
    update       apiservices.apiregistration.k8s.io             -                v1.another.example.com
    patch        apiservices.apiregistration.k8s.io             -                v1beta2.visibility.kueue.x-k8s.io
    create       apiservices.apiregistration.k8s.io             -                -
    delete       apiservices.apiregistration.k8s.io             -                v1beta2.visibility.kueue.x-k8s.io
    get          configmaps                                     kube-system      another-config
    update       configmaps                                     kube-system      extension-apiserver-authentication
    update       secrets                                        {NAMESPACE}    clueue-visibility-tls-old
""")


def allowed(api: client.ApiClient, access: Access) -> bool:
    """Ask the apiserver, as the identity of ``api``, whether it may do ``access``."""
    verb, group, resource, namespace, name = access
    resource, _, subresource = resource.partition("/")
    attributes = {"verb": verb, "group": group, "resource": resource, "subresource": subresource,
                  "namespace": namespace, "name": name}
    review = client.AuthorizationV1Api(api).create_self_subject_access_review(
        {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
         "spec": {"resourceAttributes": attributes}})
    return bool(review.status.allowed)


def test_the_service_account_may_do_what_the_controller_calls(as_controller: client.ApiClient) -> None:
    refused = [access for access in NEEDED if not allowed(as_controller, access)]
    assert not refused, f"the role lacks: {refused}"


def test_the_service_account_may_do_nothing_more(as_controller: client.ApiClient) -> None:
    granted = [access for access in DENIED if allowed(as_controller, access)]
    assert not granted, f"the role allows: {granted}"


def test_the_token_really_works_and_is_really_refused(plane: ControlPlane, as_controller: client.ApiClient) -> None:
    """Requests, not reviews: the review answers above are what the apiserver enforces."""
    plane.create_namespace("team-a")
    with plane.api_client() as admin:
        client.CoreV1Api(admin).create_namespaced_secret(
            "team-a", {"metadata": {"name": "private"}, "stringData": {"password": "hunter2"}})
    core = client.CoreV1Api(as_controller)
    assert core.list_pod_for_all_namespaces().items is not None
    coordination = client.CoordinationV1Api(as_controller)
    lease = coordination.create_namespaced_lease(NAMESPACE, {"metadata": {"name": "clueue-decider"}})
    coordination.replace_namespaced_lease("clueue-decider", NAMESPACE, lease)
    with plane.api_client() as admin:  # an empty record would only be in the controller's way
        client.CoordinationV1Api(admin).delete_namespaced_lease("clueue-decider", NAMESPACE)
    for forbidden in (lambda: core.read_namespaced_secret("private", "team-a"),
                      lambda: core.list_secret_for_all_namespaces(),
                      lambda: coordination.create_namespaced_lease("team-a", {"metadata": {"name": "x"}})):
        with pytest.raises(client.ApiException) as error:
            forbidden()
        assert error.value.status == 403


# --------------------------------------------------------------------------------------------
# The controller, authenticated by the ServiceAccount's token alone
# --------------------------------------------------------------------------------------------


def test_the_deployment_args_are_the_controller_cli(manifests: list[dict[str, Any]]) -> None:
    """Every argument the Deployment passes parses as `clueue controller` options (the
    kubelet expands $(POD_NAMESPACE) first)."""
    from clueue.adapters.cli import main

    container = by_kind(manifests, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]
    command, *args = [arg.replace("$(POD_NAMESPACE)", NAMESPACE) for arg in container["args"]]
    assert command == "controller"
    with main.commands["controller"].make_context("controller", args) as context:
        assert context.params["namespace"] == NAMESPACE and context.params["in_cluster"]
        config_path = context.params["config_path"]
    assert {env["name"] for env in container["env"]} >= {"POD_NAME", "POD_NAMESPACE"}
    # --config names the file of the ConfigMap clueue-config, mounted read-only.
    template = by_kind(manifests, "Deployment")[0]["spec"]["template"]["spec"]
    (mount,) = [m for m in container["volumeMounts"] if config_path.startswith(m["mountPath"] + "/")]
    assert mount.get("readOnly") is True
    (volume,) = [v for v in template["volumes"] if v["name"] == mount["name"]]
    (configmap,) = [c for c in by_kind(manifests, "ConfigMap") if c["metadata"]["name"] == volume["configMap"]["name"]]
    assert configmap["metadata"]["name"] == "clueue-config" and configmap["metadata"]["namespace"] == NAMESPACE
    assert config_path == f"{mount['mountPath']}/config.yaml" and "config.yaml" in configmap["data"]


def test_the_configmap_holds_the_default_configuration(manifests: list[dict[str, Any]], tmp_path: Path) -> None:
    """The Configuration shipped in deploy/ is clueue's default one, spelled out, with a decision
    log on the Deployment's own volume (an emptyDir: no StorageClass needed, so the Pods never
    wait for a claim), bounded below its size limit; the replicas are spread over nodes."""
    from dataclasses import replace

    from clueue.adapters.decisionlog.units import parse_size
    from clueue.adapters.files import load_config
    from clueue.engine import Config

    (configmap,) = by_kind(manifests, "ConfigMap")
    (tmp_path / "config.yaml").write_text(configmap["data"]["config.yaml"])
    config = load_config(str(tmp_path / "config.yaml"))
    assert replace(config, decision_log=None) == Config()
    log = config.decision_log
    assert log is not None and log.max_bytes is not None and log.max_age_seconds == 7 * 86400
    template = by_kind(manifests, "Deployment")[0]["spec"]["template"]["spec"]
    (mount,) = [m for m in template["containers"][0]["volumeMounts"] if log.path.startswith(m["mountPath"] + "/")]
    assert not mount.get("readOnly")
    (volume,) = [v for v in template["volumes"] if v["name"] == mount["name"]]
    assert log.max_bytes < parse_size(volume["emptyDir"]["sizeLimit"])
    assert not by_kind(manifests, "PersistentVolumeClaim")
    assert set(template["affinity"]) == {"podAntiAffinity"}  # spread, when there are several nodes
    (term,) = template["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"


def test_the_persistent_decision_log_component_puts_the_log_on_its_claim(manifests: list[dict[str, Any]]) -> None:
    """deploy/persistent-decision-log (a kustomize Component, off by default) replaces the
    decisions volume by its claim, large enough for the log, and keeps the replicas together
    while the claim is ReadWriteOnce (a pod on another node could not attach it)."""
    from clueue.adapters.decisionlog.units import parse_size

    folder = DEPLOY / "persistent-decision-log"
    component = yaml.safe_load((folder / "kustomization.yaml").read_text())
    assert component["kind"] == "Component"
    (claim,) = [d for f in component["resources"] for d in yaml.safe_load_all((folder / f).read_text()) if d]
    assert claim["kind"] == "PersistentVolumeClaim" and claim["metadata"]["namespace"] == NAMESPACE
    (patch,) = [yaml.safe_load((folder / p["path"]).read_text()) for p in component["patches"]]
    (deployment,) = by_kind(manifests, "Deployment")
    assert patch["metadata"]["name"] == deployment["metadata"]["name"]
    (volume,) = patch["spec"]["template"]["spec"]["volumes"]
    assert volume == {"name": "decisions", "emptyDir": None,
                      "persistentVolumeClaim": {"claimName": claim["metadata"]["name"]}}
    config = yaml.safe_load(by_kind(manifests, "ConfigMap")[0]["data"]["config.yaml"])
    assert parse_size(config["decisionLog"]["retention"]["maxBytes"]) < \
        parse_size(claim["spec"]["resources"]["requests"]["storage"])
    affinity = patch["spec"]["template"]["spec"]["affinity"]
    if "ReadWriteMany" not in claim["spec"]["accessModes"]:
        assert affinity["podAntiAffinity"] is None
        (term,) = affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["topologyKey"] == "kubernetes.io/hostname"


def _registered(api: client.ApiClient, url: str) -> bool:
    """Both webhook configurations call ``url`` and trust a CA (the certificate manager's)."""
    admission = client.AdmissionregistrationV1Api(api)
    configurations = [admission.read_mutating_webhook_configuration(MUTATING),
                      admission.read_validating_webhook_configuration(VALIDATING)]
    return all(w.client_config.url and w.client_config.url.startswith(url) and w.client_config.ca_bundle
               for c in configurations for w in c.webhooks)


def _create_when_the_webhook_answers(api: client.ApiClient, body: dict[str, Any], proc: Any) -> None:
    """Create a Pod, again while the apiserver still calls the webhook's previous address (its
    configuration cache follows the update a moment later; failurePolicy Fail refuses meanwhile)."""
    def created() -> bool:
        try:
            create(api, body)
        except client.ApiException as error:
            if "failed calling webhook" not in api_error_message(error):
                raise
            return False
        return True
    wait_until(created, 60, f"the webhook to admit Pod {body['metadata']['name']}", interval=0.5, proc=proc)


def test_a_missing_namespace_the_controller_may_not_create_is_one_clear_error(
        plane: ControlPlane, applied: Any, controller_kubeconfig: Path) -> None:
    proc = start_controller(plane, "--namespace", "not-there", kubeconfig=controller_kubeconfig)
    assert proc.wait(60) == 1
    log = controller_log(proc)
    assert "error: namespace not-there does not exist and the controller may not create it" in log, log
    assert "create on namespaces" in log and "Traceback" not in log, log


def _selectors(api: client.ApiClient) -> list[tuple[Any, Any]]:
    """(namespaceSelector, objectSelector) of each webhook of the two configurations."""
    admission = client.AdmissionregistrationV1Api(api)
    configurations = [admission.read_mutating_webhook_configuration(MUTATING),
                      admission.read_validating_webhook_configuration(VALIDATING)]
    return [(api.sanitize_for_serialization(w.namespace_selector), api.sanitize_for_serialization(w.object_selector))
            for c in configurations for w in c.webhooks]


def test_the_webhooks_selectors_follow_the_controllers_configuration(
        plane: ControlPlane, applied: Any, controller_kubeconfig: Path, tmp_path: Path) -> None:
    """In the cluster (no --webhook-url) the controller, as the ServiceAccount, sets the
    namespaceSelector and objectSelector of deploy/'s two webhook configurations from its
    Configuration at start, along with their caBundle: Pods the engine queues are gated."""
    from clueue.adapters.webhook.configuration import update_configurations
    from clueue.engine import Config
    from clueue.engine.config import PodGroups

    (tmp_path / "config.yaml").write_text(
        "apiVersion: clueue.dev/v1\nkind: Configuration\npodIntegration:\n"
        "  namespaceSelector: {matchLabels: {clueue.dev/queued: \"true\"}}\n"
        "  podSelector: {matchLabels: {team: a}}\n"
        "podGroups: {podSelector: {matchLabels: {team: b}}}\n")
    wanted_namespaces = {"matchLabels": {"clueue.dev/queued": "true"}}
    with plane.api_client() as admin:
        assert all(ns != wanted_namespaces for ns, _ in _selectors(admin))
        proc = start_controller(plane, "--namespace", NAMESPACE, "--webhook", "--config", str(tmp_path / "config.yaml"),
                                "--webhook-bind-address", f"127.0.0.1:{free_port()}", kubeconfig=controller_kubeconfig)
        try:
            wait_until(lambda: all(ns == wanted_namespaces for ns, _ in _selectors(admin)), 60,
                       "the webhooks' namespaceSelector to follow the Configuration", proc=proc)
            (mutating, podgroups, validating) = _selectors(admin)
            assert mutating[1] == {"matchLabels": {"team": "a"}, "matchExpressions": [
                {"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]}
            assert podgroups[1] == {"matchLabels": {"team": "b"}, "matchExpressions": [
                {"key": "scheduling.x-k8s.io/pod-group", "operator": "Exists"},
                {"key": "kueue.x-k8s.io/queue-name", "operator": "DoesNotExist"}]}
            assert validating[1] == {"matchExpressions": [{"key": "kueue.x-k8s.io/managed", "operator": "Exists"}]}
        finally:
            code = stop_controller(proc)
        # podGroups.gangScheduleWithoutQueue: false takes the PodGroup webhook away; on, it is back,
        # calling where the other one calls
        update_configurations(admin, config=Config(pod_groups=PodGroups(gang_schedule_without_queue=False)))
        assert len(_selectors(admin)) == 2
        update_configurations(admin, config=Config())  # deploy/'s selectors again, for the tests after
        hooks = client.AdmissionregistrationV1Api(admin).read_mutating_webhook_configuration(MUTATING).webhooks
        assert [h.name for h in hooks] == ["gate-pods.clueue.dev", "gate-podgroup-pods.clueue.dev"]
        assert hooks[0].client_config == hooks[1].client_config
    log = controller_log(proc)
    assert code == 0, log[-4000:]
    assert "forbidden" not in log.lower() and "no webhook configuration" not in log, log[-4000:]


def test_the_controller_does_its_job_with_the_service_account_token_alone(
        plane: ControlPlane, applied: Any, controller_kubeconfig: Path) -> None:
    """`clueue controller` with leader election and its webhook, as the ServiceAccount: it
    creates its certificate Secret, writes its CA and (out of the cluster) its address into the
    two webhook configurations, takes both leases, gates new Pods, admits one, ungates it, records
    why the other waits, writes queue status and Events; and nothing it asked was forbidden."""
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    with plane.api_client() as admin:
        t = tag()
        ns = queue_setup(admin, t, nominal=1)
        proc = start_controller(plane, "--namespace", NAMESPACE, "--leader-elect", "--webhook",
                                "--webhook-bind-address", f"127.0.0.1:{port}", "--webhook-url", url,
                                "--batch-window", "0.05", "--max-delay", "0.5", "--lease-duration", "4",
                                kubeconfig=controller_kubeconfig)
        try:
            wait_until(lambda: _registered(admin, url), 60, "the webhook configurations to call the controller",
                       proc=proc)
            for name in ("first", "second"):  # one cpu each, one cpu of quota: one waits
                _create_when_the_webhook_answers(admin, user_pod(ns, name), proc)

            core = client.CoreV1Api(admin)

            def outcome() -> dict[str, bool]:
                pods = core.list_namespaced_pod(ns).items
                return {p.metadata.name: bool(p.spec.scheduling_gates) for p in pods}

            wait_until(lambda: sorted(outcome().values()) == [False, True], 60, "one Pod admitted and ungated",
                       proc=proc)
            waiting = next(name for name, is_gated in outcome().items() if is_gated)
            wait_until(lambda: waiting_recorded(admin, ns, waiting), 60, "the waiting Pod's Workload status",
                       proc=proc)
            assert lease_holder(admin, "clueue-controller", NAMESPACE) and lease_holder(
                admin, "clueue-decider", NAMESPACE)
            assert core.read_namespaced_secret("clueue-webhook-tls", NAMESPACE).data["tls.crt"]
            queues = client.CustomObjectsApi(admin)
            wait_until(lambda: queues.get_cluster_custom_object("kueue.x-k8s.io", "v1beta1", "clusterqueues",
                                                                f"cq-{t}").get("status", {}).get("conditions"),
                       60, "the ClusterQueue's status", proc=proc)
            assert core.list_namespaced_event(ns).items
            port = metrics_port(proc)
            for probe in ("/healthz", "/readyz"):  # the Deployment's probes, answered
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{probe}", timeout=10) as answer:
                    assert answer.status == 200, probe
        finally:
            code = stop_controller(proc)
    log = controller_log(proc)
    assert code == 0, log[-4000:]
    assert "forbidden" not in log.lower(), log[-4000:]  # a 403 is logged with its reason, Forbidden
