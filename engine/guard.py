"""Budgets for cycles that run a user's policy: a wall-clock limit and a memory limit.

clingo cannot interrupt grounding, so a pathological user rule (a join of large domains, an
interval of a billion numbers) could hang the controller or exhaust its memory. A cycle whose
policy includes user files therefore runs in a child process with ``RLIMIT_AS`` set and is
killed when its wall-clock limit passes. When that happens, a second child grounds the user's
statements one by one and reports each before grounding it, so the error names the rule that
was being grounded when the limit hit.

The built-in policy path stays in-process: :func:`guarded_cycle` only forks for user files.

>>> plan = guarded_cycle(snapshot, load_policy(["my-policies/"]), limits=Limits(seconds=30))  # doctest: +SKIP
"""

from __future__ import annotations

import multiprocessing
import resource
import sys
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from time import monotonic
from typing import Any, Callable

from .config import Config
from .cycle import compile_snapshot, run_cycle
from .errors import ClueueError, PolicyError
from .facts import render_facts
from .plan import Plan
from .policy import Policy
from .snapshot import Snapshot
from .solver import probe_grounding

__all__ = ["Limits", "LimitExceeded", "guarded_cycle", "run_limited"]


@dataclass(frozen=True)
class Limits:
    """Budgets of a guarded cycle.

    Parameters:
        seconds: wall-clock limit of the whole cycle; ``None``: three times the solver's time
            budget (the decide pass, its final optimization and the explain pass each get up to
            one budget) plus 10 s for grounding.
        memory_mib: address space the child may add to what it inherits; ``None``: no limit.
    """

    seconds: float | None = None
    memory_mib: int | None = 2048

    def wall_clock(self, config: Config) -> float:
        return self.seconds if self.seconds is not None else 3 * config.time_budget + 10.0


class LimitExceeded(Exception):
    """A limited run was stopped. ``kind`` is ``time``, ``memory`` or ``crash``."""

    def __init__(self, kind: str, last_progress: str | None, detail: str = "") -> None:
        self.kind = kind
        self.last_progress = last_progress
        self.detail = detail
        super().__init__(f"{kind} limit exceeded" + (f": {detail}" if detail else ""))


def _address_space() -> int:
    """Current virtual size of this process in bytes (0 if unknown)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def _child(conn: Connection, fn: Callable[..., Any], args: tuple[Any, ...], memory_mib: int | None,
           progress: bool) -> None:
    if memory_mib is not None:
        limit = _address_space() + memory_mib * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    kwargs = {"progress": lambda text: conn.send(("progress", text))} if progress else {}
    try:
        result = fn(*args, **kwargs)
        conn.send(("ok", result))
    except MemoryError:
        conn.send(("memory", ""))
    except ClueueError as e:
        try:
            conn.send(("error", e))
        except Exception:  # noqa: BLE001 - an error that does not pickle still has its text
            conn.send(("error", ClueueError(str(e))))
    except BaseException:  # noqa: BLE001 - reported to the parent, which raises
        conn.send(("crash", traceback.format_exc()))
    finally:
        conn.close()


def _context() -> Any:
    # fork: no pickling of the snapshot and no re-import; spawn where fork does not exist.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() and sys.platform != "darwin" else "spawn"
    return multiprocessing.get_context(method)


def run_limited(fn: Callable[..., Any], *args: Any, seconds: float, memory_mib: int | None,
                progress: bool = False) -> Any:
    """Run ``fn(*args)`` in a child process under a wall-clock and a memory limit.

    With ``progress``, ``fn`` gets a keyword argument ``progress`` (a callable taking a string);
    the last string it sent is reported if the limit hits.

    Raises:
        LimitExceeded: the child ran out of time or memory, or died.
        ClueueError: whatever ``fn`` raised of clueue's errors, re-raised here.
    """
    ctx = _context()
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(sender, fn, args, memory_mib, progress), daemon=True)
    proc.start()
    sender.close()
    deadline = monotonic() + seconds
    last: str | None = None
    try:
        while True:
            remaining = deadline - monotonic()
            if remaining <= 0 or not receiver.poll(remaining):
                raise LimitExceeded("time", last, f"still running after {seconds:g}s")
            try:
                kind, payload = receiver.recv()
            except EOFError:
                proc.join()
                # Killed by the kernel (most often: memory) before it could say anything.
                raise LimitExceeded("memory" if proc.exitcode in (-9, -6) else "crash", last,
                                    f"the process ended with exit code {proc.exitcode}") from None
            if kind == "progress":
                last = payload
            elif kind == "ok":
                return payload
            elif kind == "error":
                raise payload
            elif kind == "memory":
                raise LimitExceeded("memory", last, f"more than {memory_mib} MiB")
            else:
                raise LimitExceeded("crash", last, payload)
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        receiver.close()


def guarded_cycle(snapshot: Snapshot, policy: Policy, config: Config = Config(), *,
                  limits: Limits | None = Limits()) -> Plan:
    """:func:`run_cycle`, in a limited child process when the policy includes user files.

    With ``limits=None`` or a built-in-only policy, this is exactly ``run_cycle`` in-process.

    Raises:
        PolicyError: the policy is invalid, or the cycle exceeded a limit; the message names
            the user statement that was being grounded when it did, if one can be found.
        SolveError: no plan could be found.
    """
    if limits is None or not policy.user_files:
        return run_cycle(snapshot, policy, config)
    seconds = limits.wall_clock(config)
    try:
        return run_limited(run_cycle, snapshot, policy, config, seconds=seconds, memory_mib=limits.memory_mib)  # type: ignore[no-any-return]
    except LimitExceeded as e:
        what = _exceeded(e, seconds, limits.memory_mib)
        culprit = _culprit(snapshot, policy, config, seconds, limits.memory_mib)
        raise PolicyError(f"{what}; {culprit}") from None


def _exceeded(e: LimitExceeded, seconds: float, memory_mib: int | None) -> str:
    if e.kind == "time":
        return f"the cycle exceeded its time limit of {seconds:g}s"
    if e.kind == "memory":
        return f"the cycle exceeded its memory limit of {memory_mib} MiB"
    return f"the cycle's process failed: {e.detail.strip().splitlines()[-1] if e.detail.strip() else 'no detail'}"


def _culprit(snapshot: Snapshot, policy: Policy, config: Config, seconds: float, memory_mib: int | None) -> str:
    """Which user statement blows up grounding, in words."""
    compiled, _ = compile_snapshot(snapshot, config)
    facts = render_facts(compiled.lines)
    try:
        run_limited(probe_grounding, facts, policy, seconds=seconds, memory_mib=memory_mib, progress=True)
    except LimitExceeded as e:
        if e.last_progress is None or e.last_progress == "<builtin>":
            return "grounding the built-in policy alone hits the limit on this snapshot: raise the limits"
        where, _, rule = e.last_progress.partition(": ")
        return f"grounding stopped at {where}: {rule}"
    except ClueueError as e:
        return f"grounding it rule by rule fails: {e}"
    files = ", ".join(f.path for f in policy.user_files)
    return (f"each rule of the user files ({files}) grounds within the limits on its own, so solving or the "
            f"explanation pass is the likely cause")
