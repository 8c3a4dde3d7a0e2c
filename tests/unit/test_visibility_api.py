"""The visibility API's pieces without a cluster: its wire format, its pages of a plan's waiting
workloads (in ``clueue list``'s order), and the front proxy's authentication
(adapters/visibility/). The API through a real aggregation layer: tests/e2e/test_visibility.py."""

from __future__ import annotations

from email.message import Message

import pytest

from clueue.adapters.visibility import api as wire
from clueue.adapters.visibility.auth import RequestHeaderConfig, authenticate
from clueue.adapters.visibility.pending import PendingWorkloads
from clueue.engine import Config, Document, build_snapshot, load_policy, run_cycle
from clueue.engine.queues import pending_positions
from tests.builders import cluster_queue, flatten, flavor, local_queue, workload


def _pending(*objs):
    snapshot = build_snapshot([Document(f"test#{i}", o) for i, o in enumerate(flatten(objs))])
    plan = run_cycle(snapshot, load_policy(()), Config())
    return plan, PendingWorkloads(snapshot, plan)


def _queue():
    """cq of 1 cpu, full; LocalQueues main and other; w1, w3 (main) and w2 (other) wait in that order."""
    return (flavor("f"), cluster_queue("cq", {"f": {"cpu": 1}}), local_queue("cq"), local_queue("cq", name="other"),
            workload("running", cpu="1", minute=0), workload("w1", minute=1), workload("w2", queue="other", minute=2),
            workload("w3", minute=3))


def _names(page):
    return [(w.name, w.position_in_cluster_queue, w.position_in_local_queue) for w in page]


def test_a_cluster_queue_lists_its_waiting_workloads_in_clueue_lists_order_and_pages_as_kueue():
    plan, pending = _pending(*_queue())
    page = pending.cluster_queue("cq", limit=wire.DEFAULT_LIMIT, offset=0)
    assert _names(page) == [("w1", 0, 0), ("w2", 1, 0), ("w3", 2, 1)]
    # the positions are those `clueue list` prints (engine/queues.py), not re-derived
    assert {f"default/{w.name}": (w.position_in_cluster_queue, w.position_in_local_queue) for w in page} \
        == pending_positions(plan)
    assert _names(pending.cluster_queue("cq", limit=1, offset=1)) == [("w2", 1, 0)]
    assert pending.cluster_queue("cq", limit=5, offset=9) == []
    assert pending.cluster_queue("missing", limit=5, offset=0) is None


def test_a_local_queue_pages_its_own_workloads_keeping_their_positions():
    _, pending = _pending(*_queue())
    assert _names(pending.local_queue("default", "main", limit=10, offset=0)) == [("w1", 0, 0), ("w3", 2, 1)]
    assert _names(pending.local_queue("default", "main", limit=1, offset=1)) == [("w3", 2, 1)]
    assert _names(pending.local_queue("default", "other", limit=10, offset=0)) == [("w2", 1, 0)]
    assert pending.local_queue("elsewhere", "main", limit=10, offset=0) is None


def test_a_pending_workload_has_kueues_fields():
    _, pending = _pending(*_queue())
    (w1,) = pending.cluster_queue("cq", limit=1, offset=0)
    item = w1.to_dict()
    assert item == {"metadata": {"name": "w1", "namespace": "default",
                                 "creationTimestamp": "2026-11-21T08:01:00Z"},
                    "priority": 0, "localQueueName": "main", "positionInClusterQueue": 0, "positionInLocalQueue": 0}
    summary = wire.summary("v1beta1", [item])
    assert (summary["kind"], summary["apiVersion"]) == ("PendingWorkloadsSummary", "visibility.kueue.x-k8s.io/v1beta1")


@pytest.mark.parametrize("query, bounds", [
    ("", (1000, 0)), ("limit=0", (1000, 0)), ("limit=2&offset=3", (2, 3)), ("limit=-1", (0, 0)),
    ("offset=-4", (1000, 0)), ("limit=200000", (100_000, 0)), ("limit=&offset=", (1000, 0)),
])
def test_limit_and_offset_default_and_bound_as_kueue(query, bounds):
    assert wire.page_bounds(query) == bounds


def test_a_limit_that_is_no_number_is_a_bad_request():
    with pytest.raises(wire.RequestError) as error:
        wire.page_bounds("limit=ten")
    assert error.value.code == 400 and error.value.to_status()["reason"] == "BadRequest"


def test_routes_and_discovery_documents():
    assert wire.route("/apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/ns/localqueues/lq/pendingworkloads") \
        == wire.Route("localqueue", "v1beta1", "ns", "lq")
    assert wire.route("/apis").kind == "groups" and wire.route("/apis/visibility.kueue.x-k8s.io").kind == "group"
    for missing in ("/apis/visibility.kueue.x-k8s.io/v1/clusterqueues/cq/pendingworkloads",
                    "/apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/cq", "/api/v1"):
        with pytest.raises(wire.RequestError) as error:
            wire.route(missing)
        assert error.value.code == 404
    group = wire.api_group()
    assert group["preferredVersion"] == {"groupVersion": "visibility.kueue.x-k8s.io/v1beta2", "version": "v1beta2"}
    assert [v["version"] for v in group["versions"]] == ["v1beta2", "v1beta1"]
    resources = {r["name"]: r for r in wire.resource_list("v1beta2")["resources"]}
    assert resources["clusterqueues/pendingworkloads"]["verbs"] == ["get"]
    assert resources["localqueues/pendingworkloads"]["namespaced"] is True
    assert resources["clusterqueues"]["kind"] == "PendingWorkloadsSummary"


def _headers(**values):
    message = Message()
    for name, value in values.items():
        for v in value if isinstance(value, list) else [value]:
            message[name.replace("_", "-")] = v
    return message


CONFIG = RequestHeaderConfig.from_data({
    "requestheader-client-ca-file": "-----BEGIN CERTIFICATE-----\n...",
    "requestheader-allowed-names": '["front-proxy-client"]',
    "requestheader-username-headers": '["X-Remote-User"]', "requestheader-group-headers": '["X-Remote-Group"]',
    "requestheader-extra-headers-prefix": '["X-Remote-Extra-"]', "requestheader-uid-headers": '["X-Remote-Uid"]'})
PROXY = {"subject": ((("commonName", "front-proxy-client"),),)}


def test_the_front_proxy_names_the_user_its_groups_and_extras():
    headers = _headers(X_Remote_User="alice", X_Remote_Group=["team-a", "devs"], X_Remote_Uid="u-1")
    headers["X-Remote-Extra-Scopes%2FA"] = "x"  # extra keys are percent-encoded, lower-cased once decoded
    user = authenticate(CONFIG, PROXY, headers)
    assert user is not None and user.name == "alice" and user.uid == "u-1"
    assert user.groups == ("team-a", "devs", "system:authenticated")  # as the API server adds it
    assert user.extra == {"scopes/a": ("x",)}


@pytest.mark.parametrize("peer, headers", [
    (None, {"X_Remote_User": "alice"}),  # no client certificate: anyone could write the header
    ({"subject": ((("commonName", "someone-else"),),)}, {"X_Remote_User": "alice"}),  # a name not allowed
    (PROXY, {}),  # the proxy, naming nobody
])
def test_a_request_not_from_the_front_proxy_is_not_authenticated(peer, headers):
    assert authenticate(CONFIG, peer, _headers(**headers)) is None


def test_the_configuration_without_a_front_proxy_ca_is_refused():
    with pytest.raises(ValueError, match="requestheader-client-ca-file"):
        RequestHeaderConfig.from_data({"client-ca-file": "..."})
