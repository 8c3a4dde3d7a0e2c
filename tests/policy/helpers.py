"""Shared bits of the policy-tool tests: writing policy and test files, running the CLI."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner, Result

from clueue.adapters.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "policies"
CLUSTER = ROOT / "examples" / "cluster"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def write_yaml(path: Path, data: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


# -- objects ----------------------------------------------------------------------------------------
KUEUE = "kueue.x-k8s.io/v1beta1"


def queue_setup(cpu: int = 4, *, strategy: str = "BestEffortFIFO", namespaces: tuple[str, ...] = ("a",)) -> list[dict[str, Any]]:
    """Namespaces, one flavor, ClusterQueue ``cq`` of ``cpu`` CPUs and a LocalQueue ``main`` per namespace."""
    objs: list[dict[str, Any]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces]
    objs += [
        {"apiVersion": KUEUE, "kind": "ResourceFlavor", "metadata": {"name": "default"}},
        {"apiVersion": KUEUE, "kind": "ClusterQueue", "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "queueingStrategy": strategy, "resourceGroups": [
             {"coveredResources": ["cpu"], "flavors": [{"name": "default", "resources": [{"name": "cpu", "nominalQuota": cpu}]}]}]}},
    ]
    objs += [{"apiVersion": KUEUE, "kind": "LocalQueue", "metadata": {"name": "main", "namespace": ns},
              "spec": {"clusterQueue": "cq"}} for ns in namespaces]
    return objs


def pod(name: str, cpu: int = 1, *, ns: str = "a", minute: int = 0) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "creationTimestamp": f"2026-11-21T08:{minute:02d}:00Z",
                         "labels": {"kueue.x-k8s.io/queue-name": "main"}},
            "spec": {"schedulingGates": [{"name": "kueue.x-k8s.io/admission"}],
                     "containers": [{"name": "main", "image": "app", "resources": {"requests": {"cpu": str(cpu)}}}]}}
