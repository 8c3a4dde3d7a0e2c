"""`clueue plan` and `explain` without PATH read the live cluster that kubectl would: $KUBECONFIG."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

from click.testing import CliRunner
from kubernetes import client

from clueue.adapters.cli import main
from tests.e2e.test_adapter import create, gated_pod, queue_setup
from tests.testenv.control_plane import ControlPlane


def test_plan_reads_the_cluster_of_kubeconfig_and_shows_one_namespace(kube: ControlPlane, tmp_path: Path) -> None:
    t = uuid.uuid4().hex[:6]
    with kube.api_client() as api:
        ns = queue_setup(api, t, nominal=2)
        create(api, gated_pod(ns, "fits", cpu="1"))
        pod = gated_pod(ns, "tagged", cpu="1")
        pod["metadata"]["labels"]["app"] = "e2e"
        create(api, pod)
        assert client.CoreV1Api(api).read_namespaced_pod("tagged", ns).spec.scheduling_gates  # gated before
    # ~/.kube/config does not exist; $KUBECONFIG lists a missing file first, as kubectl allows
    env = {"HOME": str(tmp_path), "KUBECONFIG": f"{tmp_path / 'missing'}{os.pathsep}{kube.kubeconfig}"}
    result = CliRunner(env=env).invoke(main, ["plan", "-n", ns, "-o", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert {w["name"]: w["state"] for w in data["workloads"]} == {f"{ns}/pod-fits": "admitted",
                                                                 f"{ns}/pod-tagged": "admitted"}
    assert data["metadata"]["filter"]["namespace"] == ns and data["metadata"]["filter"]["workloads"] >= 2
    result = CliRunner(env=env).invoke(main, ["plan", "-n", ns, "-l", "app=e2e"])
    assert result.exit_code == 0, result.output
    assert f"ADMITTED NEW {ns}/pod-tagged" in result.output and "pod-fits" not in result.output
    result = CliRunner(env=env).invoke(main, ["explain", "-n", ns, "pod-tagged"])
    assert result.exit_code == 0 and result.output.startswith(f"{ns}/pod-tagged: admitted"), result.output
    with kube.api_client() as api:  # plan and explain wrote nothing
        assert client.CoreV1Api(api).read_namespaced_pod("tagged", ns).spec.scheduling_gates
