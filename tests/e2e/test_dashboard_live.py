"""The controller serves the dashboard (``--dashboard-bind-address``) from its own last cycle,
against a real kube-apiserver: the pages answer a plain GET with the cluster's queue, its
pending pod and, with a decision log, that pod's timeline."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from tests.e2e.controller_harness import (  # noqa: F401 - cluster and api are this module's fixtures
    api, cluster, controller_log, start_controller, stop_controller, wait_until,
)
from tests.e2e.test_adapter import create, gated_pod, queue_setup, tag
from tests.e2e.test_controller import FAST, gated, ungated


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_the_controller_serves_the_dashboard_of_its_last_cycle(cluster, api, tmp_path: Path) -> None:
    t = tag()
    ns = queue_setup(api, t, nominal=1)
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump({"apiVersion": "clueue.dev/v1", "kind": "Configuration",
                                      "decisionLog": {"path": str(tmp_path / "decisions.db")}}))
    create(api, gated_pod(ns, "first"))
    create(api, gated_pod(ns, "second"))
    proc = start_controller(cluster, *FAST, "--config", str(config), "--dashboard-bind-address", "127.0.0.1:0")
    try:
        port = int(wait_until(lambda: (m := re.search(r"serving the dashboard on http://[\d.]+:(\d+)/",
                                                      controller_log(proc))) and m.group(1),
                              30, "the dashboard's port in the log", proc=proc))
        wait_until(lambda: len(ungated(api, ns)) == 1, 60, "one of two pods ungated", proc=proc)
        (waiting,) = gated(api, ns)
        name = f"{ns}/pod-{waiting}"

        def page_shows(path: str, *texts: str) -> bool:
            status, body = _get(port, path)
            return status == 200 and all(text in body for text in texts)
        # the queue with its one cpu held, and the waiting pod in its pending list
        wait_until(lambda: page_shows("/", f"cq-{t}", "the controller&#39;s cycle"), 30, "the overview", proc=proc)
        wait_until(lambda: page_shows("/pending", name), 30, "the pending list", proc=proc)
        wait_until(lambda: page_shows(f"/workload?name={name}", "<svg", 'data-state="pending"'), 30,
                   "the waiting pod's timeline", proc=proc)
        status, _ = _get(port, "/nowhere")
        assert status == 404
    finally:
        assert stop_controller(proc) == 0, controller_log(proc)
