"""``clueue controller``: run clueue as a controller. Parses options and calls
:func:`clueue.adapters.controller.run.run_controller`, nothing more."""

from __future__ import annotations

import sys

import click

from .options import budget_option, cluster_options, config_option, find_cluster, guard, policy_option

__all__ = ["controller"]


@click.command(short_help="Run as a controller: decide and apply whenever the cluster changes.")
@cluster_options
@policy_option
@config_option
@budget_option
@click.option("--namespace", metavar="NS", help="The controller's namespace, where its leases (and the webhook's "
              "Secret) live, created if missing; its Pods are never queued (default: the configuration's "
              "controllerNamespace, clueue-system).")
@click.option("--batch-window", type=click.FloatRange(min=0), default=0.2, show_default=True, metavar="SECONDS",
              help="Run a cycle once nothing changed for this long...")
@click.option("--max-delay", type=click.FloatRange(min=0), default=2.0, show_default=True, metavar="SECONDS",
              help="...or this long after the first change, whichever comes first.")
@click.option("--resync-period", type=click.FloatRange(min=1), default=300, show_default=True, metavar="SECONDS",
              help="List everything again and run a cycle this often, whatever changed.")
@click.option("--leader-elect", is_flag=True, help="Compete for the Lease clueue-controller: only the leader "
              "decides (for several replicas; the deploy manifests turn it on).")
@click.option("--lease-duration", type=click.IntRange(min=3), default=15, show_default=True, metavar="SECONDS",
              help="Duration of the leader and decider leases: how long a crashed leader blocks the others.")
@click.option("--webhook/--no-webhook", default=None, help="Serve the Pod webhook (HTTPS) in this process, or not. "
              "Default: not in a cluster (the deploy manifests ask); outside one, not if clueue's webhook "
              "configurations are registered already, else serve it on loopback for an API server on this "
              "machine and refuse to start for another's (queued Pods would not be gated).")
@click.option("--webhook-bind-address", "webhook_bind", default=None, metavar="HOST:PORT",
              help="Where the webhook listens. Default: :9443 (every address) in a cluster, 127.0.0.1:9443 outside.")
@click.option("--cert-dir", metavar="DIR", help="The webhook's serving certificate (tls.crt, tls.key) provided "
              "there, e.g. by cert-manager; default: clueue makes and renews its own, kept in a Secret.")
@click.option("--webhook-service", default="clueue-webhook", show_default=True, metavar="NAME",
              help="The webhook's Service, named in the certificate clueue makes.")
@click.option("--webhook-url", metavar="URL", help="Register webhook configurations that call this address "
              "(e.g. https://127.0.0.1:9443 when running outside the cluster); default: the deploy manifests' own.")
@click.option("--metrics-bind-address", "metrics_bind", default="127.0.0.1:8080", show_default=True,
              metavar="HOST:PORT", help="Where /metrics, /healthz and /readyz are served (:8080: every address; "
              "port 0: a free one, logged).")
@click.option("--dashboard-bind-address", "dashboard_bind", default="", metavar="HOST:PORT",
              help="Serve the read-only dashboard there (e.g. 127.0.0.1:8090; port 0: a free one, logged), showing "
              "the last cycle's plan and, with a decisionLog, timelines. Default: not served.")
@click.option("--visibility-bind-address", "visibility_bind", default="", metavar="HOST:PORT",
              help="Serve Kueue's visibility API (visibility.kueue.x-k8s.io: pending workloads with their positions) "
              "there over HTTPS, for the API server's aggregation layer (e.g. :8082, as Kueue; the deploy manifests "
              "turn it on; docs/visibility.md). Default: not served.")
@click.option("--visibility-service", default="clueue-visibility", show_default=True, metavar="NAME",
              help="The visibility API's Service, named in the certificate clueue makes for it.")
@click.option("--log-format", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text for people, json for log collectors (one object per line).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True, help="The least severe records written.")
@click.option("--shutdown-grace", type=click.FloatRange(min=0), default=5.0, show_default=True, metavar="SECONDS",
              help="On SIGTERM, how long the cycle in flight may go on writing before it stops.")
@guard
def controller(kubeconfig: str | None, context: str | None, in_cluster: bool, policies: tuple[str, ...],
               config_path: str | None, time_budget: float | None, **options: object) -> None:
    """Run clueue as a controller until SIGTERM: decide and apply whenever the cluster changes.

    Keeps every object clueue reads in a watch-fed cache and runs a cycle (as apply does, the
    same code) when something changed, debounced, one at a time, holding the Lease
    clueue-decider in --namespace while it decides. With no other option it runs against the
    kubeconfig's cluster from outside it: no leader election, /metrics on 127.0.0.1:8080, and no
    webhook of its own, which it refuses unless clueue's webhook configurations are registered
    (--webhook --webhook-url URL serves and registers them; --no-webhook runs without). Exits 0
    after SIGTERM or Ctrl-C (see docs/controller.md).
    """
    from ..controller.run import ControllerOptions, run_controller
    kubeconfig, context, in_cluster = find_cluster(kubeconfig, context, in_cluster)
    sys.exit(run_controller(ControllerOptions(
        kubeconfig=kubeconfig, context=context, in_cluster=in_cluster, policies=policies, config_path=config_path,
        time_budget=time_budget, **options)))  # type: ignore[arg-type]
