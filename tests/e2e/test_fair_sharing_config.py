"""Kueue's own ConfigMap switches fair sharing on for a live read (docs/fair-sharing.md)."""

from __future__ import annotations

from kubernetes import client

from clueue.adapters.kube import read_cluster

CONFIG = ("apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\n"
          "fairSharing:\n  enable: true\n  preemptionStrategies: [LessThanInitialShare]\n")


def test_a_live_read_takes_the_fair_sharing_section_of_kueues_configmap(kube):
    kube.create_namespace("kueue-system")
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kueue-manager-config", "namespace": "kueue-system"},
            "data": {"controller_manager_config.yaml": CONFIG}}
    with kube.api_client() as api:
        core = client.CoreV1Api(api)
        assert read_cluster(api).kueue_settings.fair_sharing is None
        core.create_namespaced_config_map("kueue-system", body)
        try:
            fair = read_cluster(api).kueue_settings.fair_sharing
        finally:  # other tests of the session read this cluster without fair sharing
            core.delete_namespaced_config_map("kueue-manager-config", "kueue-system")
    assert fair is not None and fair.preemption_strategies == ("LessThanInitialShare",)
