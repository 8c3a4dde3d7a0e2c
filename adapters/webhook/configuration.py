"""The Mutating- and ValidatingWebhookConfiguration that register the Pod webhook.

The same bodies are registered by the code and written in ``deploy/`` (the deploy test compares
them with :func:`webhook_configurations`). Decisions they encode (docs/webhook.md):

- ``failurePolicy: Fail``: while the webhook is down, a Pod subject to queueing is refused
  rather than created ungated (it would run without an admission).
- The namespace selector is the Config's (kube-system and the controller's namespace excluded by
  default), so Pods there, including clueue's own, never depend on the webhook.
- The mutating webhook's object selector requires the queue-name label: Pods without it are
  never queued, so the webhook being down never blocks them. A second one, present while
  ``podGroups.gangScheduleWithoutQueue`` is on, requires the coscheduling PodGroup label
  without the queue-name label (one selector cannot say "either label"): the Pods of PodGroups
  without a queue, which clueue gang-schedules (docs/podgroups.md). The validating webhook's
  requires the managed label: only Pods clueue manages have anything to validate.
"""

from __future__ import annotations

import base64
import copy
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from clueue.adapters.kube.retry import call, missing_is_none, update_with_retry
from clueue.engine import AdapterError
from clueue.engine.config import Config
from clueue.engine.objects import LabelSelector, Requirement
from clueue.engine.kueue_api import MANAGED_LABEL, POD_GROUP_LABEL, QUEUE_LABEL

__all__ = ["MUTATING_NAME", "GATE_WEBHOOK", "GATE_PODGROUPS_WEBHOOK", "VALIDATING_NAME", "MUTATE_PATH", "VALIDATE_PATH",
           "webhook_configurations", "selector_body", "register_configurations", "update_configurations",
           "registered_addresses", "unregister_configurations"]

log = logging.getLogger(__name__)

MUTATING_NAME = "clueue-pod-mutating"
#: The mutating webhook of the Pods with a queue name, and that of PodGroups' Pods without one.
GATE_WEBHOOK = "gate-pods.clueue.dev"
GATE_PODGROUPS_WEBHOOK = "gate-podgroup-pods.clueue.dev"
VALIDATING_NAME = "clueue-pod-validating"
MUTATE_PATH = "/mutate-pods"
VALIDATE_PATH = "/validate-pods"
#: Seconds the apiserver waits for an answer before failurePolicy applies.
TIMEOUT_S = 10


def selector_body(selector: LabelSelector, *extra: Requirement) -> dict[str, Any]:
    """``selector`` (plus ``extra`` requirements) as a Kubernetes LabelSelector body."""
    body: dict[str, Any] = {}
    if selector.match_labels:
        body["matchLabels"] = dict(selector.match_labels)
    expressions = [*selector.match_expressions, *extra]
    if expressions:
        body["matchExpressions"] = [
            {"key": r.key, "operator": r.operator, **({"values": list(r.values)} if r.values else {})}
            for r in expressions]
    return body


def _client_config(path: str, namespace: str, service: str | None, url: str | None, service_port: int,
                   ca_bundle: bytes) -> dict[str, Any]:
    if (service is None) == (url is None):
        raise ValueError("webhook_configurations needs exactly one of service= and url=")
    where: dict[str, Any] = ({"url": url.rstrip("/") + path} if url is not None else
                             {"service": {"namespace": namespace, "name": service, "path": path,
                                          "port": service_port}})
    if ca_bundle:
        where["caBundle"] = base64.b64encode(ca_bundle).decode()
    return where


def webhook_configurations(namespace: str, service: str | None = None, url: str | None = None,
                           ca_bundle: bytes = b"", config: Config = Config(), *,
                           service_port: int = 443) -> list[dict[str, Any]]:
    """The MutatingWebhookConfiguration and ValidatingWebhookConfiguration of the Pod webhook.

    Parameters:
        namespace: the controller's namespace (where ``service`` lives).
        service: the webhook's Service, reached on ``service_port``; or
        url: the server's base address, e.g. ``https://127.0.0.1:9443`` (tests on loopback);
            the paths ``/mutate-pods`` and ``/validate-pods`` are appended.
        ca_bundle: PEM of the CA that signed the serving certificate (empty: patched later by
            :class:`~clueue.adapters.webhook.certs.CertManager`).
        config: whose namespace and pod selectors scope the webhooks.
    """
    namespaces = selector_body(config.effective_namespace_selector())
    common = {"failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
              "matchPolicy": "Equivalent", "timeoutSeconds": TIMEOUT_S, "namespaceSelector": namespaces}
    mutating = {
        "name": GATE_WEBHOOK, **common,
        "clientConfig": _client_config(MUTATE_PATH, namespace, service, url, service_port, ca_bundle),
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"],
                   "scope": "Namespaced"}],
        "objectSelector": selector_body(config.pod_selector, Requirement(QUEUE_LABEL, "Exists")),
        "reinvocationPolicy": "Never",
    }
    gates = [mutating]
    if config.pod_groups.gang_schedule_without_queue:  # PodGroups' Pods without a queue name
        gates.append({**mutating, "name": GATE_PODGROUPS_WEBHOOK, "objectSelector": selector_body(
            config.pod_groups.pod_selector, Requirement(POD_GROUP_LABEL, "Exists"),
            Requirement(QUEUE_LABEL, "DoesNotExist"))})
    validating = {
        "name": "validate-pods.clueue.dev", **common,
        "clientConfig": _client_config(VALIDATE_PATH, namespace, service, url, service_port, ca_bundle),
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                   "resources": ["pods"], "scope": "Namespaced"}],
        # On UPDATE the apiserver matches the old or the new object: removing the label is seen.
        "objectSelector": {"matchExpressions": [{"key": MANAGED_LABEL, "operator": "Exists"}]},
    }
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": MUTATING_NAME}, "webhooks": gates},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": VALIDATING_NAME}, "webhooks": [validating]},
    ]


def register_configurations(api: client.ApiClient, bodies: Iterable[dict[str, Any]]) -> list[str]:
    """Create or replace each webhook configuration of ``bodies`` (keeping the caBundle already
    patched into it when the body has none).

    Several controllers may register at once (two replicas started together): a create that
    finds the configuration made meanwhile, or a replace that finds it changed (409 Conflict),
    reads it again and replaces it, as the in-cluster path's updates do.

    Returns:
        the names of the configurations this call created (the others existed and were replaced).

    Raises:
        AdapterError: the API refused (e.g. no permission on the configurations), naming the
            permission only when that is what it said.
    """
    admission = client.AdmissionregistrationV1Api(api)
    created = []
    for body in bodies:
        kind, name = body["kind"], body["metadata"]["name"]
        try:
            if _register(api, admission, body):
                created.append(name)
        except ApiException as e:
            why = (f"the controller needs get, create and update on admissionregistration.k8s.io {kind.lower()}s"
                   if e.status in (401, 403) else "other writers kept changing it" if e.status == 409
                   else "see the API server's answer")
            raise AdapterError(f"{kind} {name}: could not register it: HTTP {e.status} {e.reason}; {why}") from e
    return created


_REGISTER_ATTEMPTS = 10  # conflicts with other registering controllers before giving up


def _register(api: client.ApiClient, admission: client.AdmissionregistrationV1Api, body: dict[str, Any]) -> bool:
    """Create or replace one configuration; a 409 (made or changed meanwhile) reads it again.
    True if it was created."""
    name = body["metadata"]["name"]
    mutating = body["kind"] == "MutatingWebhookConfiguration"
    read = admission.read_mutating_webhook_configuration if mutating else \
        admission.read_validating_webhook_configuration
    create = admission.create_mutating_webhook_configuration if mutating else \
        admission.create_validating_webhook_configuration
    replace = admission.replace_mutating_webhook_configuration if mutating else \
        admission.replace_validating_webhook_configuration
    for attempt in range(_REGISTER_ATTEMPTS):
        try:
            found = missing_is_none(lambda: read(name))
            if found is None:
                call(lambda: create(body))
                return True
            current = api.sanitize_for_serialization(found)
            bundles = {w["name"]: w.get("clientConfig", {}).get("caBundle") for w in current.get("webhooks") or []}
            wanted = copy.deepcopy({**body, "metadata": {**body["metadata"],
                                                         "resourceVersion": current["metadata"]["resourceVersion"]}})
            # a webhook new to the configuration (the PodGroup one) trusts what the others trust
            known = next((b for b in bundles.values() if b), None)
            for w in wanted["webhooks"]:
                bundle = bundles.get(w["name"]) or known
                if not w["clientConfig"].get("caBundle") and bundle:
                    w["clientConfig"] = {**w["clientConfig"], "caBundle": bundle}
            call(lambda: replace(name, wanted))  # noqa: B023 - called within this iteration
            return False
        except ApiException as e:
            if e.status != 409 or attempt == _REGISTER_ATTEMPTS - 1:
                raise
            log.debug("%s %s changed while registering it; reading it again", body["kind"], name)


def _selectors(config: Config) -> dict[str, dict[str, dict[str, Any]]]:
    """Per configuration name, per webhook name, the namespaceSelector and objectSelector that
    webhook must have; a webhook of clueue's not named there must go (the PodGroup one while
    ``podGroups.gangScheduleWithoutQueue`` is off)."""
    return {body["metadata"]["name"]: {w["name"]: {k: w[k] for k in ("namespaceSelector", "objectSelector")}
                                       for w in body["webhooks"]}
            for body in webhook_configurations("-", url="https://-", config=config)}


def _follow(webhooks: list[dict[str, Any]], wanted: dict[str, dict[str, Any]]) -> bool:
    """Bring ``webhooks`` (of one configuration, changed in place) to the ``wanted`` selectors by
    webhook name: a wanted one that is missing is added as a copy of the first one there (its
    address, its caBundle and all but its name and selectors); clueue's PodGroup webhook goes
    when it is not wanted. Returns whether anything changed."""
    changed = False
    for w in list(webhooks):
        if w.get("name") == GATE_PODGROUPS_WEBHOOK and GATE_PODGROUPS_WEBHOOK not in wanted:
            webhooks.remove(w)
            changed = True
    for name, selectors in wanted.items():
        w = next((w for w in webhooks if w.get("name") == name), None)
        if w is None:
            if not webhooks:
                continue
            w = {**webhooks[0], "name": name}
            webhooks.append(w)
            changed = True
        for field, value in selectors.items():
            if (w.get(field) or {}) != value:
                w[field] = value
                changed = True
    return changed


def update_configurations(api: client.ApiClient, *, ca_bundle: bytes | None = None, config: Config | None = None,
                          names: Sequence[str] = (MUTATING_NAME, VALIDATING_NAME), warn_missing: bool = True) -> None:
    """Bring the existing webhook configurations ``names`` in line with this controller: their
    ``caBundle`` (when ``ca_bundle`` is given) and their namespace and object selectors (when
    ``config`` is given: the webhooks must queue exactly the Pods the engine queues), and with
    ``config`` whether the webhook of PodGroups' Pods without a queue is there (added as a copy
    of the other mutating one, or removed). Only these change; a configuration that does not exist is logged (``warn_missing``) and
    skipped.

    Raises:
        AdapterError: the API refused (e.g. no get or update permission on the name).
    """
    admission = client.AdmissionregistrationV1Api(api)
    encoded = base64.b64encode(ca_bundle).decode() if ca_bundle else None
    selectors = _selectors(config) if config is not None else {}
    for name in names:
        found = False
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            mutating = kind == "MutatingWebhookConfiguration"
            read_model = admission.read_mutating_webhook_configuration if mutating else \
                admission.read_validating_webhook_configuration
            replace = admission.replace_mutating_webhook_configuration if mutating else \
                admission.replace_validating_webhook_configuration

            def read() -> dict[str, Any] | None:
                obj = missing_is_none(lambda: read_model(name))  # noqa: B023 - called within this iteration
                return api.sanitize_for_serialization(obj) if obj is not None else None

            def change(obj: dict[str, Any]) -> dict[str, Any] | None:
                changed = False
                webhooks = obj.get("webhooks") or []
                if name in selectors:  # noqa: B023
                    changed = _follow(webhooks, selectors[name])  # noqa: B023
                for w in webhooks:
                    if encoded is not None and w.get("clientConfig", {}).get("caBundle") != encoded:
                        w.setdefault("clientConfig", {})["caBundle"] = encoded
                        changed = True
                return obj if changed else None

            try:
                if read() is None:
                    continue
                found = True
                if update_with_retry(read, change, lambda obj: replace(name, obj)):  # noqa: B023
                    log.info("updated %s %s (%s)", kind, name, ", ".join(
                        (["caBundle"] if encoded else []) + (["selectors"] if selectors else [])))
            except ApiException as e:
                raise AdapterError(f"{kind} {name}: cannot update it: HTTP {e.status} {e.reason}; the controller's "
                                   f"ServiceAccount needs get and update on {kind.lower()}s named {name}") from e
        if not found and warn_missing:
            log.warning("no webhook configuration named %s to update: apply deploy/ (or register it) so the "
                        "apiserver calls the webhook", name)


def registered_addresses(api: client.ApiClient) -> dict[str, str]:
    """Per configuration of clueue's (``clueue-pod-mutating``, ``clueue-pod-validating``) that is
    registered, where its first webhook calls: its URL, or ``service NS/NAME``.

    Raises:
        AdapterError: the API refused to read them.
    """
    admission = client.AdmissionregistrationV1Api(api)
    out: dict[str, str] = {}
    for name, read in ((MUTATING_NAME, admission.read_mutating_webhook_configuration),
                       (VALIDATING_NAME, admission.read_validating_webhook_configuration)):
        try:
            found = missing_is_none(lambda: read(name))  # noqa: B023 - called within this iteration
        except ApiException as e:
            raise AdapterError(f"reading webhook configuration {name}: HTTP {e.status} {e.reason}") from e
        hooks = (found.webhooks or []) if found is not None else []
        if found is None or not hooks:
            continue
        where = hooks[0].client_config
        out[name] = where.url or f"service {where.service.namespace}/{where.service.name}"
    return out


def unregister_configurations(api: client.ApiClient, url: str, names: Sequence[str]) -> list[str]:
    """Delete the webhook configurations ``names`` (those a controller run outside the cluster
    created, which is stopping) while they call ``url``: left behind, their ``failurePolicy:
    Fail`` would refuse every queued Pod. One that calls elsewhere now (another controller
    registered it since) is left; each is deleted only as read (its resourceVersion). Returns the
    names deleted; a failure is logged, not raised (the process is stopping)."""
    admission = client.AdmissionregistrationV1Api(api)
    deleted = []
    for name, read, delete in (
            (MUTATING_NAME, admission.read_mutating_webhook_configuration,
             admission.delete_mutating_webhook_configuration),
            (VALIDATING_NAME, admission.read_validating_webhook_configuration,
             admission.delete_validating_webhook_configuration)):
        if name not in names:
            continue
        try:
            found = missing_is_none(lambda: read(name))  # noqa: B023 - called within this iteration
            if found is None or not all((w.client_config.url or "").startswith(url.rstrip("/") + "/")
                                        for w in found.webhooks or []):
                continue
            options = client.V1DeleteOptions(preconditions=client.V1Preconditions(
                uid=found.metadata.uid, resource_version=found.metadata.resource_version))
            call(lambda: delete(name, body=options))  # noqa: B023
            deleted.append(name)
        except ApiException as e:
            log.warning("could not remove webhook configuration %s (it calls %s, which stops answering): "
                        "HTTP %s %s; delete it: kubectl delete %s %s", name, url, e.status, e.reason,
                        "mutatingwebhookconfiguration" if name == MUTATING_NAME else "validatingwebhookconfiguration",
                        name)
    return deleted
