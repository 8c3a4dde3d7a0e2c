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
    try:
        if in_cluster:
            configuration = client.Configuration()
            config.load_incluster_config(client_configuration=configuration)
            return client.ApiClient(configuration)
        return config.new_client_from_config(config_file=kubeconfig, context=context)
    except (config.ConfigException, OSError, TypeError, ValueError) as e:
        where = "in-cluster configuration" if in_cluster else (kubeconfig or "the default kubeconfig")
        raise AdapterError(f"{where}: cannot connect: {e}") from None
