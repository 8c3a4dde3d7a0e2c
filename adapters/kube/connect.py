"""Connecting to a cluster: a kubeconfig file (and context), or the in-cluster service account."""

from __future__ import annotations

from typing import Any

from kubernetes import client, config

from clueue.engine import AdapterError

__all__ = ["connect", "client_for", "CONNECT_TIMEOUT_S", "READ_TIMEOUT_S", "CONNECTIONS"]

CONNECT_TIMEOUT_S = 10.0
CONNECTIONS = 64
READ_TIMEOUT_S = 60.0  # between two reads of an answer, not for the whole of it: a large list streams


def connect(kubeconfig: str | None = None, context: str | None = None, *, in_cluster: bool = False) -> client.ApiClient:
    """An API client for the cluster.

    Raises:
        AdapterError: the kubeconfig cannot be read or has no such context.
    """
    configuration = client.Configuration()
    try:
        if in_cluster:
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(config_file=kubeconfig, context=context, client_configuration=configuration)
    except (config.ConfigException, OSError, TypeError, ValueError) as e:
        where = "in-cluster configuration" if in_cluster else (kubeconfig or "the default kubeconfig")
        raise AdapterError(f"{where}: cannot connect: {e}") from None
    return client_for(configuration)


def client_for(configuration: client.Configuration, *, timeout: tuple[float, float] = (CONNECT_TIMEOUT_S, READ_TIMEOUT_S)
               ) -> client.ApiClient:
    """An API client for a loaded ``configuration``: no hidden retries, a pool as large as the
    writers, and ``timeout`` (connect, read seconds) on every request but a watch."""
    # urllib3 would otherwise resend a failed request three times at once, unseen and uncounted:
    # retries are made by clueue's own back-off (retry.py), which reports them.
    configuration.retries = False
    # One connection per thread that writes at once (apply's workers, apply.WORKERS) and per
    # watch of a controller's cache, and some: beyond the pool, urllib3 opens and drops one per request.
    configuration.connection_pool_maxsize = CONNECTIONS
    api = client.ApiClient(configuration)
    _give_up_on_silence(api.rest_client, timeout)
    return api


def _give_up_on_silence(rest: Any, timeout: tuple[float, float]) -> None:
    """Give every request but a watch a connect and a read timeout.

    The client waits forever by default: a server that accepts a connection and never answers
    (or an address that drops packets) would hang a command, or a controller nobody watches. A
    timeout is a transient failure, retried like a dropped connection (retry.py). A watch waits
    for events by design and keeps its own server-side timeout.
    """
    send = rest.request

    def request(method: str, url: str, *args: Any, _request_timeout: Any = None, **kwargs: Any) -> Any:
        query = kwargs.get("query_params") or []  # client versions before 35 pass the query apart
        watching = "watch=true" in url.lower() or any(k == "watch" and v for k, v in query)
        if _request_timeout is None and not watching:
            _request_timeout = timeout
        return send(method, url, *args, _request_timeout=_request_timeout, **kwargs)

    rest.request = request
