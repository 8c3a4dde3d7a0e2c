"""Connecting to a cluster: a kubeconfig file (and context), or the in-cluster service account."""

from __future__ import annotations

from kubernetes import client, config

from clueue.engine import AdapterError

__all__ = ["connect"]


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
    # urllib3 would otherwise resend a failed request three times at once, unseen and uncounted:
    # retries are made by clueue's own back-off (retry.py), which reports them.
    configuration.retries = False
    return client.ApiClient(configuration)
