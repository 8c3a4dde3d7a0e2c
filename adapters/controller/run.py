"""``clueue controller``: the process that wires the parts together and runs until SIGTERM.

Parts, each started only when asked for (docs/controller.md):

- the watch-fed cache and the decision loop (always; adapters/kube/cache.py, loop.py);
- ``/metrics``, ``/healthz`` and ``/readyz`` (always; health.py, metrics.py);
- leader election (``leader_elect``; leader.py): without it this process decides alone,
  still under the decider lease, so a ``clueue apply`` run meanwhile takes turns with it;
- the Pod webhook and its certificates (``webhook``; adapters/webhook/).
- the decision log (when the Configuration has ``decisionLog``; adapters/decisionlog/): every
  cycle recorded, a failure to record counted and logged, never stopping the cycles.
- MultiKueue's controllers (always; adapters/multikueue/): idle while no MultiKueueCluster exists.
- the read-only dashboard (``dashboard_bind``; adapters/dashboard/): the last cycle's plan.
- Kueue's visibility API (``visibility_bind``; adapters/visibility/): pending workloads in order,
  behind the API server's aggregation layer.

A part that cannot start for want of a namespace or a permission is one clear error
(:class:`~clueue.engine.AdapterError`), raised before anything runs.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import signal
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping
from urllib.parse import urlparse

from clueue.engine import AdapterError, Config, Policy, load_policy

from ..files import load_config
from ..http import parse_bind
from ..kube.cache import ClusterCache
from ..kube.connect import connect
from ..kube.errors import api_errors
from ..kube.lease import DURATION_S
from ..kube.dispatch_workers import WorkerReader
from ..multikueue import MultiKueue
from .health import HealthServer
from .leader import LeaderElector, make_identity
from .logs import configure_logging, cycle_summary
from .loop import Controller, CycleResult
from .metrics import Metrics

__all__ = ["ControllerOptions", "run_controller", "parse_bind"]

log = logging.getLogger("clueue.controller")

_ROTATE_CHECK_S = 3600.0  # how often self-managed webhook certificates are checked for renewal


@dataclass
class ControllerOptions:
    """Everything ``clueue controller`` takes (its options, one for one)."""

    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    config_path: str | None = None
    policies: tuple[str, ...] = ()
    time_budget: float | None = None
    namespace: str | None = None  # where the leases (and the webhook's Secret) live; default: the configuration's
    batch_window: float = 0.2
    max_delay: float = 2.0
    resync_period: float = 300.0
    leader_elect: bool = False
    lease_duration: int = DURATION_S
    webhook: bool | None = False  # None: decided at start (:func:`_with_webhook_choice`)
    webhook_bind: str | None = ":9443"  # None: :9443 in a cluster, loopback outside it
    cert_dir: str | None = None  # external certificates (tls.crt, tls.key); default: self-managed in a Secret
    webhook_service: str = "clueue-webhook"
    webhook_url: str | None = None  # register URL-based webhook configurations pointing here (outside a cluster)
    metrics_bind: str = "127.0.0.1:8080"
    dashboard_bind: str = ""  # the read-only dashboard (docs/dashboard.md); "": not served
    visibility_bind: str = ""  # Kueue's visibility API (docs/visibility.md); "": not served
    visibility_service: str = "clueue-visibility"  # its Service, named in its certificate
    log_format: str = "text"
    log_level: str = "info"
    shutdown_grace: float = 5.0


def run_controller(options: ControllerOptions, *, stop: threading.Event | None = None) -> int:
    """Run the controller until SIGTERM or SIGINT (or ``stop`` is set); returns the exit code:
    0 after a clean shutdown, 1 if the decision loop died of a bug.

    Raises:
        AdapterError: the cluster cannot be reached, the lease namespace does not exist, an
            address cannot be bound, the webhook's certificates cannot be made.
        ClueueError: the policy or the configuration is invalid.
    """
    configure_logging(options.log_format, options.log_level)
    policy = load_policy(options.policies)
    config = load_config(options.config_path, time_budget=options.time_budget)
    namespace = options.namespace or config.controller_namespace
    # The engine and the webhook exclude the controller's namespace: the one it really runs in.
    config = replace(config, controller_namespace=namespace)
    stop = stop or threading.Event()
    with _stopped_by_signals(stop):  # from the start: a SIGTERM while starting up stops cleanly too
        return _run(options, policy, config, namespace, stop)


@contextlib.contextmanager
def _stopped_by_signals(stop: threading.Event) -> Iterator[None]:
    """SIGTERM and SIGINT set ``stop`` (in the main thread; elsewhere the caller sets it)."""
    previous: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda signum, frame: stop.set())
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run(options: ControllerOptions, policy: Policy, config: Config, namespace: str, stop: threading.Event) -> int:
    api = connect(options.kubeconfig, options.context, in_cluster=options.in_cluster)
    _ensure_namespace(api, namespace)
    identity = make_identity()
    metrics = Metrics()
    cache = ClusterCache(api).start()
    elector: LeaderElector | None = None
    controller = Controller(api, cache, policy, config, namespace=namespace, identity=identity,
                            batch_window=options.batch_window, max_delay=options.max_delay,
                            resync_period=options.resync_period, lease_duration=options.lease_duration,
                            leading=lambda: elector.leading if elector is not None else True,
                            shutdown_grace=options.shutdown_grace)
    controller.observers = [_observer(metrics, controller)]
    controller.writer.on_writes = metrics.count_writes  # the background writer's, beside the cycles'
    parts: list[Callable[[], None]] = [lambda: cache.stop(timeout=0.5)]  # stopped in reverse order
    if config.decision_log is not None:  # every cycle recorded (docs/decision-log.md), after its summary
        from ..decisionlog.observer import CycleRecorder
        recorder = CycleRecorder(config.decision_log, policy=policy, config=config,
                                 on_error=metrics.decision_log_failed)
        controller.observers.append(recorder)
        controller.before_release.append(recorder.flush)
        controller.keep_documents = True
        parts.append(recorder.close)
    try:
        options = _with_webhook_choice(options, api)
        webhook, rotate, created = _start_webhook(options, api, config, namespace, cache, metrics)
        if webhook is not None:
            parts.append(webhook.stop)
        if webhook is not None and options.webhook_url and created:
            # what this run created goes with it: left, it would refuse every queued Pod
            from ..webhook.configuration import unregister_configurations
            url, names = options.webhook_url, list(created)
            parts.append(lambda: log.info("removed webhook configurations %s", ", ".join(
                unregister_configurations(api, url, names)) or "(none left calling this address)"))
        host, port = _bind(options.metrics_bind, "--metrics-bind-address")
        try:
            health = HealthServer(host, port, metrics, ready=controller.ready, healthy=controller.healthy).start()
        except OSError as e:
            raise AdapterError(f"cannot serve /metrics on {options.metrics_bind}: {e.strerror or e}; name another "
                               "address with --metrics-bind-address (port 0 takes a free one)") from None
        parts.append(health.stop)
        if options.dashboard_bind:  # its pages show the last cycle's snapshot and plan, re-read nothing
            parts.append(_start_dashboard(options.dashboard_bind, controller, config).stop)
        if options.visibility_bind:  # answers from the cycles' plans (docs/visibility.md)
            from ..visibility.server import start_visibility
            parts.append(start_visibility(api, controller, _bind(options.visibility_bind, "--visibility-bind-address"),
                                          namespace=namespace, service=options.visibility_service).stop)
        # MultiKueue's controllers (docs/multikueue.md): idle until MultiKueueClusters exist.
        workers = MultiKueue(api, namespace, config.multikueue, metrics=metrics,
                             leading=lambda: elector.leading if elector is not None else True,
                             workloads=lambda: [d.body for d in cache.documents("Workload")]).start()
        parts.append(workers.stop)
        # What each worker has free, for the engine's dispatch (docs/dispatch.md): a cache per active
        # worker; a change there wakes the loop as a change in the manager does.
        reader = WorkerReader(on_change=lambda name: cache.note_change(f"worker {name}"))
        workers.registry.listeners.append(reader.track)
        parts.append(reader.stop)
        controller.workers = lambda read: reader.views(workers.registry.clients(), read)
        if options.leader_elect:
            def started() -> None:
                controller.wake()

            def stopped() -> None:
                metrics.set_leader(False)
                controller.wake()
            elector = LeaderElector(api, namespace, identity=identity, duration=options.lease_duration,
                                    on_start=started, on_stop=stopped).start()
            parts.append(elector.stop)
        log.info("controller %s started: namespace %s, leader election %s, webhook %s", identity, namespace,
                 "on" if elector else "off", "on" if webhook else "off")
        return _serve(controller, stop, rotate)
    finally:
        for part in reversed(parts):
            try:
                part()
            except Exception:  # noqa: BLE001 - shutting down: what fails to stop is logged, not raised
                log.exception("stopping a part of the controller failed")
        log.info("controller %s stopped", identity)


def _serve(controller: Controller, stop: threading.Event, rotate: Callable[[], Any] | None) -> int:
    """Run the loop in its thread until ``stop`` (set by SIGTERM/SIGINT) or the loop dies."""
    loop = threading.Thread(target=controller.run, name="decision-loop", daemon=True)
    loop.start()
    next_rotation = time.monotonic() + _ROTATE_CHECK_S
    while not stop.wait(0.5) and loop.is_alive():
        if rotate is not None and time.monotonic() >= next_rotation:
            next_rotation = time.monotonic() + _ROTATE_CHECK_S
            try:
                rotate()
            except Exception as e:  # noqa: BLE001 - retried at the next check; the old certificate serves meanwhile
                log.warning("renewing the webhook certificate failed: %s", e)
    log.info("stopping: no new cycle and no further workload; the workloads being written are finished")
    controller.stop()
    loop.join(controller.shutdown_grace + 10.0)  # a cycle past its grace writes nothing more: safe to leave
    return 1 if not controller.healthy() else 0


def _observer(metrics: Metrics, controller: Controller) -> Callable[[CycleResult], None]:
    """Record each cycle in the metrics and log its summary line."""
    def observe(result: CycleResult) -> None:
        metrics.set_leader(controller.lease is not None)
        counted = metrics.record_cycle(result)
        message, fields = cycle_summary(result, counted)
        log.log(logging.WARNING if result.failed else logging.INFO, message, extra={"cycle": fields})
    return observe


def _start_dashboard(address: str, controller: Controller, config: Config) -> Any:
    """The dashboard (adapters/dashboard/), fed by the controller's own cycles."""
    from ..dashboard.server import DashboardServer, LatestCycle
    latest = LatestCycle()
    controller.observers.append(latest)
    host, port = _bind(address, "--dashboard-bind-address")
    log_path = config.decision_log.path if config.decision_log is not None else None
    try:
        return DashboardServer(host, port, latest.current, log_path).start()
    except OSError as e:
        raise AdapterError(f"cannot serve the dashboard on {address}: {e.strerror or e}") from None


def _bind(address: str, option: str) -> tuple[str, int]:
    try:
        return parse_bind(address)
    except ValueError as e:
        raise AdapterError(f"{option}: {e}") from None


def _ensure_namespace(api: Any, namespace: str) -> None:
    """The leases' namespace must exist: created when missing (so that ``--kubeconfig`` alone
    runs against any cluster), else one clear message now rather than one per cycle."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    from ..kube.retry import call
    core = client.CoreV1Api(api)
    try:
        with api_errors(api, f"reading namespace {namespace}"):
            core.read_namespace(namespace)
        return
    except AdapterError as e:
        cause = e.__cause__
        if isinstance(cause, ApiException) and cause.status == 403:
            return  # may not read namespaces one by one: taking the lease will say what is missing
        if not (isinstance(cause, ApiException) and cause.status == 404):
            raise
    # Saved as its last-applied configuration, as `kubectl create --save-config` does, so that a
    # later `kubectl apply -k deploy/` merges into it without a warning about the annotation.
    body = {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace, "labels": {"app.kubernetes.io/name": "clueue"}}}
    saved = {"kubectl.kubernetes.io/last-applied-configuration": json.dumps(body, separators=(",", ":"))}
    try:
        call(lambda: core.create_namespace({**body, "metadata": {**body["metadata"], "annotations": saved}}))
        log.info("created namespace %s: the controller keeps its leases there", namespace)
    except ApiException as e:
        if e.status == 409:
            return  # created meanwhile (another replica)
        if e.status == 403:
            raise AdapterError(f"namespace {namespace} does not exist and the controller may not create it "
                               "(it keeps its leases there): grant create on namespaces, create it "
                               f"(kubectl create namespace {namespace}, or kubectl apply -k deploy/) "
                               "or name another with --namespace") from None
        raise AdapterError(f"creating namespace {namespace}: HTTP {e.status} {e.reason}") from e


_LOCAL_WEBHOOK = "127.0.0.1:9443"  # outside a cluster: where a webhook of its own listens, and is called


def _with_webhook_choice(options: ControllerOptions, api: Any) -> ControllerOptions:
    """``options`` with the Pod webhook decided. Asked (``--webhook``/``--no-webhook``): as asked.
    Else in a cluster: no (the deploy manifests ask). Else, outside a cluster, queued Pods must
    still be gated before clueue admits them, or they would start at once and be counted over
    the quota: with clueue's configurations registered (deploy/, or another controller), those
    gate, and a URL one is named in a warning (left by a run that did not clean up, it refuses
    every queued Pod while nothing answers there). With none, against an API server on this
    machine (a local control plane: it can call back on loopback), the controller serves the
    webhook on loopback and registers it by URL, removing it when it stops; against another
    machine's, which could not call loopback, it refuses to start and names the command that
    gates.

    Raises:
        AdapterError: outside a cluster, no webhook asked for, none registered, and a remote API server.
    """
    from ..webhook.configuration import registered_addresses
    bind = options.webhook_bind or (":9443" if options.in_cluster else _LOCAL_WEBHOOK)
    registered = registered_addresses(api) if not options.in_cluster else {}
    for name, where in sorted(registered.items()):
        if not where.startswith("service ") and where.rstrip("/").rsplit("/", 1)[0] != \
                (options.webhook_url or "").rstrip("/"):
            log.warning("webhook configuration %s calls %s, registered by a controller run outside the cluster: "
                        "queued Pods are refused while nothing answers there%s", name, where,
                        "; this run replaces it" if options.webhook and options.webhook_url else
                        f"; if that controller is gone: kubectl delete {'mutating' if 'mutating' in name else 'validating'}"
                        f"webhookconfiguration {name}")
    if options.webhook is not None:
        return replace(options, webhook_bind=bind)
    if options.in_cluster or registered:
        return replace(options, webhook=False, webhook_bind=bind)
    if _is_loopback(urlparse(api.configuration.host).hostname):
        host, port = _bind(bind, "--webhook-bind-address")
        url = f"https://{host if host not in ('', '0.0.0.0') else '127.0.0.1'}:{port}"
        log.info("no webhook configuration of clueue's is registered: serving the Pod webhook at %s, "
                 "registered by URL until this run stops (--no-webhook: none)", url)
        return replace(options, webhook=True, webhook_bind=bind, webhook_url=options.webhook_url or url)
    raise AdapterError(
        "no webhook gates queued Pods in this cluster (no MutatingWebhookConfiguration clueue-pod-mutating): they "
        "would start before clueue admits them, over the quota. Serve it from this process, at an address the API "
        "server reaches: clueue controller --kubeconfig "
        f"{options.kubeconfig or '~/.kube/config'} --webhook --webhook-url https://HOST:9443 "
        "--webhook-bind-address :9443 (HOST: this machine's address as the API server sees it); or apply deploy/; "
        "or run without gating: --no-webhook")


def _is_loopback(host: str | None) -> bool:
    """Whether ``host`` (an API server's) is this machine's loopback, which it could call back on."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def _start_webhook(options: ControllerOptions, api: Any, config: Config, namespace: str, cache: ClusterCache,
                   metrics: Metrics) -> tuple[Any, Callable[[], Any] | None, list[str]]:
    """The webhook server (None when off), the certificate renewal to run now and then, and the
    webhook configurations it created (with ``--webhook-url``)."""
    if not options.webhook:
        return None, None, []
    from ..webhook.certs import CertManager, cert_files
    from ..webhook.server import WebhookServer, namespace_label_reader
    rotate: Callable[[], Any] | None = None
    ca_bundle = b""
    url_host = urlparse(options.webhook_url).hostname if options.webhook_url else None
    from ..webhook.configuration import register_configurations, update_configurations, webhook_configurations
    if options.cert_dir:
        cert_file, key_file = cert_files(Path(options.cert_dir))
        ca = Path(options.cert_dir) / "ca.crt"
        ca_bundle = ca.read_bytes() if ca.is_file() else b""
    else:
        directory = Path(tempfile.mkdtemp(prefix="clueue-webhook-"))
        # Its caBundle patches set the selectors from the Configuration too (at start and on
        # renewal); with --webhook-url the configurations are registered below instead.
        manager = CertManager(api, namespace, options.webhook_service, directory=directory,
                              extra_sans=(url_host,) if url_host else (), config=config)
        cert_file, key_file = manager.ensure(patch=not options.webhook_url)
        ca_bundle, rotate = manager.ca_bundle, manager.rotate_if_due
    read_labels = namespace_label_reader(api)

    def namespace_labels(name: str) -> Mapping[str, str]:
        doc = cache.get("Namespace", name)  # one the watch has not brought yet is read from the API
        return dict((doc.body.get("metadata") or {}).get("labels") or {}) if doc is not None else read_labels(name)

    host, port = _bind(options.webhook_bind or ":9443", "--webhook-bind-address")
    try:
        server = WebhookServer(config, cert_file, key_file, host, port, namespace_labels=namespace_labels,
                               on_gated=metrics.pod_gated).start()
    except OSError as e:
        raise AdapterError(f"cannot serve the webhook on {options.webhook_bind}: {e.strerror or e}") from None
    # Registered only once it answers: a failurePolicy Fail configuration calling an address
    # nothing listens on yet would refuse the queued Pods created meanwhile.
    created: list[str] = []
    try:
        if options.webhook_url:
            created = register_configurations(api, webhook_configurations(namespace, url=options.webhook_url,
                                                                          ca_bundle=ca_bundle, config=config))
        elif options.cert_dir:  # the deploy manifests' configurations: their selectors must be the Configuration's
            update_configurations(api, ca_bundle=ca_bundle or None, config=config)
    except BaseException:
        server.stop()
        raise
    return server, rotate, created
