"""What the dashboard's tests show: the README's example cluster decided by the engine, and a
small decision log recorded by ``clueue plan --record`` as users record one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterator

import yaml
from click.testing import CliRunner

from clueue.adapters.cli import main
from clueue.adapters.dashboard.server import DashboardServer
from clueue.adapters.dashboard.views import Current
from clueue.adapters.files import load_snapshot
from clueue.engine import Config, load_policy
from clueue.engine.guard import guarded_cycle
from tests.builders import cluster_queue, flavor, local_queue, namespace, workload

EXAMPLE = str(Path(__file__).resolve().parents[2] / "examples" / "cluster")


def example_current() -> Current:
    """examples/cluster decided as ``clueue plan examples/cluster`` decides it."""
    snapshot = load_snapshot((EXAMPLE,))
    return Current(snapshot, guarded_cycle(snapshot, load_policy(()), Config(), now=int(time.time())), time.time(),
                   "plan of examples/cluster")


def record_log(directory: Path) -> str:
    """A log of three cycles: team/b waits (InsufficientQuota) while team/a holds the quota,
    then team/a is gone and team/b is admitted."""
    path = str(directory / "log.db")
    base = [namespace("team"), flavor("default"), cluster_queue("cq", {"default": {"cpu": 2}}),
            local_queue("cq", ns="team")]
    a = workload("a", ns="team", cpu="2", admitted_in=("cq", "default"))
    b = workload("b", ns="team", cpu="2", minute=1)
    snapshot = directory / "snapshot.yaml"
    for objs in ([*base, a, b], [*base, a, b], [*base, b]):
        snapshot.write_text(yaml.safe_dump_all(objs))
        result = CliRunner().invoke(main, ["plan", str(snapshot), "--record", "--db", path])
        assert result.exit_code == 0, result.output
    return path


def serve(current: Any, log_path: str | None = None) -> Iterator[str]:
    """The dashboard on a free localhost port; yields its base URL."""
    server = DashboardServer("127.0.0.1", 0, current, log_path).start()
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        server.stop()
