"""``clueue apply`` with a fault put in, for racing and killing deciders in tests.

``python decider_hooks.py crash-after-admission apply --kubeconfig ...``: the process exits with
code 17 at its first ungate, right after recording its admissions, without releasing the
decider lease, as a decider killed there would. Its lease lasts 2 s (not 15), so that the next
decider's wait for it is short.

``python decider_hooks.py slow-read apply --kubeconfig ...``: the decider prints ``read`` on
standard error once it has read the cluster, then waits until the file ``$GO_FILE`` exists (at
most 60 s) before deciding and writing, so that a test can change the cluster, and start other
deciders, between its read and its writes.

``python decider_hooks.py announce apply --kubeconfig ...``: the decider prints ``started`` on
standard error when its Python is up and it is about to take the lease and read the cluster.
"""

import os
import sys
import time
from typing import Any

from clueue.adapters import cli, kube
from clueue.adapters.kube import apply as apply_module
from clueue.adapters.kube import decide, lease

CRASH_EXIT = 17
WAIT_S = 60.0


def crash(*args: Any, **kwargs: Any) -> None:
    sys.stdout.flush()
    os._exit(CRASH_EXIT)


def slow(read: Any) -> Any:
    def read_then_wait(*args: Any, **kwargs: Any) -> Any:
        snapshot = read(*args, **kwargs)
        print("read", file=sys.stderr, flush=True)
        deadline = time.monotonic() + WAIT_S
        while not os.path.exists(os.environ["GO_FILE"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        return snapshot
    return read_then_wait


def announce(decide_and_apply: Any) -> Any:
    def announced(*args: Any, **kwargs: Any) -> Any:
        print("started", file=sys.stderr, flush=True)
        return decide_and_apply(*args, **kwargs)
    return announced


if __name__ == "__main__":
    hook, *args = sys.argv[1:]
    if hook == "crash-after-admission":
        lease.DURATION_S = 2
        apply_module._Applier.ungate = crash  # type: ignore[method-assign]
    elif hook == "slow-read":
        # clueue apply reads through the package (its --record keeps what it read)
        kube.read_cluster = slow(kube.read_cluster)  # type: ignore[attr-defined]
    elif hook == "announce":
        decide.decide_and_apply = announce(decide.decide_and_apply)  # type: ignore[assignment]
    else:
        raise SystemExit(f"unknown hook {hook!r}")
    sys.argv = ["clueue", *args]
    cli.main()
