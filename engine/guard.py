"""Budgets for decision cycles: a wall-clock limit and a memory limit, and Ctrl-C that works.

clingo cannot interrupt grounding, and while it grounds it holds the main thread, so neither a
timer nor Python's SIGINT handler can stop it in-process. A guarded cycle therefore runs in a
child process with ``RLIMIT_AS`` set, whatever its policy (built-in rules blow up too, on a
large or unkind snapshot); the parent only waits on a pipe, so it kills the child when the
wall-clock limit passes, and on Ctrl-C (``KeyboardInterrupt`` is raised in the parent as usual,
after the child is gone). When a limit hits, a second child compiles the snapshot and grounds
the policy statement by statement, reporting each before grounding it, so the error names the
phase or the rule (built-in or not) that was being worked on when the limit hit.

The child is forked: the snapshot and the parsed policy are not copied or parsed again. On the
baseline snapshot (15,000 workloads) this adds 0.1-0.3 s to a cycle of about 1.4 s, mostly
sending the plan back (1.4 MB pickled).

A :class:`~clueue.engine.cycle.Session` is not guarded: it keeps what it derived across cycles
in its process, which a child per cycle would lose. Its cycles are bounded by the solver's time
budget and by what the snapshot's objects may hold (quantities within Kubernetes' limits); a
controller that runs one runs a policy that has run guarded first (``clueue plan``, ``clueue
policy test``), and relies on its pod's own memory limit.

>>> plan = guarded_cycle(snapshot, load_policy(["my-policies/"]), limits=Limits(seconds=30))  # doctest: +SKIP
"""

from __future__ import annotations

import functools
import gc
import math
import multiprocessing
import resource
import signal
import sys
import traceback
from multiprocessing.connection import Connection
from time import monotonic
from typing import Any, Callable

from .config import Config, Limits
from .cycle import compile_snapshot, run_cycle
from .errors import ClueueError, PolicyError
from .facts import render_facts
from .plan import Plan
from .policy import Policy
from .snapshot import Snapshot
from .solver import PolicyOutline, outline_policy, parse_policy, probe_grounding

__all__ = ["Limits", "LimitExceeded", "ChildFailed", "guarded_cycle", "guarded_outline", "run_limited", "CHECK_SECONDS"]


class LimitExceeded(Exception):
    """A limited run was stopped. ``kind`` is ``time``, ``memory`` or ``crash`` (the process
    died of a signal)."""

    def __init__(self, kind: str, last_progress: str | None, detail: str = "") -> None:
        self.kind = kind
        self.last_progress = last_progress
        self.detail = detail
        super().__init__(f"{kind} limit exceeded" + (f": {detail}" if detail else ""))


class ChildFailed(RuntimeError):
    """A limited run raised an exception other than clueue's errors: a bug, shown as one (the
    message holds the child's traceback)."""


def _address_space() -> int:
    """Current virtual size of this process in bytes (0 if unknown)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * resource.getpagesize()
    except (OSError, ValueError, IndexError):
        return 0


def _lower(kind: int, soft: int, hard: int) -> None:
    """Set a resource limit of this process, never above the limit it already has."""
    _, current = resource.getrlimit(kind)
    if current != resource.RLIM_INFINITY:
        soft, hard = min(soft, current), min(hard, current)
    resource.setrlimit(kind, (soft, hard))


def _child(conn: Connection, fn: Callable[..., Any], args: tuple[Any, ...], seconds: float,
           memory_mib: int | None, progress: bool) -> None:
    # Ctrl-C reaches the whole process group: the parent handles it (and kills this process).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    kwargs = {"progress": lambda text: conn.send(("progress", text))} if progress else {}
    try:
        # Should the parent die without killing this process (SIGKILL, a closed terminal), the
        # kernel still ends it: its CPU time cannot exceed the wall-clock limit by much.
        cpu = math.ceil(seconds) + 5
        _lower(resource.RLIMIT_CPU, cpu, cpu + 5)
        if memory_mib is not None:
            limit = _address_space() + memory_mib * 2**20
            _lower(resource.RLIMIT_AS, limit, limit)
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
        conn.send(("failed", traceback.format_exc()))
    finally:
        conn.close()


def _context() -> Any:
    # fork: no pickling of the snapshot and no re-import; spawn where fork does not exist.
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() and sys.platform != "darwin" else "spawn"
    return multiprocessing.get_context(method)


#: How a child the kernel ended died: by signal number (negative exit code).
_KILLED = {-signal.SIGKILL: "memory", -signal.SIGABRT: "memory", -signal.SIGXCPU: "time"}


def run_limited(fn: Callable[..., Any], *args: Any, seconds: float, memory_mib: int | None,
                progress: bool = False) -> Any:
    """Run ``fn(*args)`` in a child process under a wall-clock and a memory limit.

    With ``progress``, ``fn`` gets a keyword argument ``progress`` (a callable taking a string);
    the last string it sent is reported if the limit hits. The child is killed whenever this
    returns or raises, ``KeyboardInterrupt`` (Ctrl-C) included.

    Raises:
        LimitExceeded: the child ran out of time or memory, or died.
        ClueueError: whatever ``fn`` raised of clueue's errors, re-raised here.
        ChildFailed: ``fn`` raised another exception.
    """
    ctx = _context()
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(sender, fn, args, seconds, memory_mib, progress), daemon=True)
    # The forked child shares the parent's memory until it writes to it. A garbage collection
    # writes to every object it tracks, which would copy the whole heap (the snapshot) page by
    # page: the objects there before the fork stay out of the child's collections.
    gc.freeze()
    try:
        proc.start()
    finally:
        gc.unfreeze()
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
                # Ended by the kernel (most often: memory) before it could say anything.
                raise LimitExceeded(_KILLED.get(proc.exitcode or 0, "crash"), last,
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
                raise ChildFailed(f"the limited process failed:\n{payload}")
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        receiver.close()


class Configured:
    """The default of :func:`guarded_cycle`'s ``limits``: those of its configuration."""


CONFIGURED = Configured()


def guarded_cycle(snapshot: Snapshot, policy: Policy, config: Config = Config(), *,
                  limits: Limits | None | Configured = CONFIGURED, now: int | None = None) -> Plan:
    """:func:`run_cycle` (at time ``now``) in a child process under ``limits`` (by default the configuration's,
    ``config.limits``); Ctrl-C stops it at once.

    With ``limits=None``, this is exactly ``run_cycle`` in-process (unlimited, and deaf to
    Ctrl-C while clingo grounds).

    Raises:
        PolicyError: the policy is invalid, or the cycle exceeded a limit; the message names
            what was being compiled or grounded when it did, if that can be found.
        SolveError: no plan could be found.
        ChildFailed: the cycle raised another exception (a bug); the message holds its traceback.
        KeyboardInterrupt: Ctrl-C; the child is gone.
    """
    if isinstance(limits, Configured):
        limits = config.limits
    if limits is None:
        return run_cycle(snapshot, policy, config, now=now)
    parse_policy(policy)  # here, so that a syntax error needs no child and the next cycle's child inherits the parse
    seconds = limits.wall_clock(config)
    try:
        return run_limited(functools.partial(run_cycle, now=now), snapshot, policy, config,  # type: ignore[no-any-return]
                           seconds=seconds, memory_mib=limits.memory_mib)
    except LimitExceeded as e:
        what = _exceeded(e, seconds, limits.memory_mib)
        culprit = _culprit(snapshot, policy, config, seconds, limits.memory_mib)
        raise PolicyError(f"{what}; {culprit}") from None


def _exceeded(e: LimitExceeded, seconds: float, memory_mib: int | None, what: str = "the cycle") -> str:
    if e.kind == "time":
        return f"{what} exceeded its time limit of {seconds:g}s"
    if e.kind == "memory":
        return f"{what} exceeded its memory limit of {memory_mib} MiB"
    return f"{what} failed: {e.detail}"


_COMPILING = "compiling"


def _probe(snapshot: Snapshot, policy: Policy, config: Config, *, progress: Callable[[str], None]) -> None:
    """Compile the snapshot, then ground the policy statement by statement, announcing each."""
    progress(_COMPILING)
    compiled, _ = compile_snapshot(snapshot, config)
    probe_grounding(render_facts(compiled.lines), policy, progress=progress)


def _culprit(snapshot: Snapshot, policy: Policy, config: Config, seconds: float, memory_mib: int | None) -> str:
    """What hits the limit, in words: compiling the snapshot, or grounding some statement."""
    try:
        run_limited(_probe, snapshot, policy, config, seconds=seconds, memory_mib=memory_mib, progress=True)
    except LimitExceeded as e:
        return _stopped_at(e.last_progress)
    except ClueueError as e:
        return f"grounding it rule by rule fails: {e}"
    return ("each rule grounds within the limits on its own, so solving or the explanation pass is the "
            "likely cause: raise the limits or lower the time budget")


def _stopped_at(last_progress: str | None) -> str:
    """Where :func:`_probe` stood when a limit stopped it."""
    if last_progress is None or last_progress == _COMPILING:
        return "it stopped while compiling the snapshot into facts, before grounding"
    where, _, rule = last_progress.partition(": ")
    return f"grounding stopped at {where}: {rule}"


#: Wall-clock limit of ``clueue policy check`` by default: grounding a policy without facts is
#: quick (the built-in one takes some 3.5 CPU-seconds), unless a rule never ends (``p(X+1) :-
#: p(X).``). The margin is for a busy machine, where those seconds of CPU take many more of the
#: wall clock: a check must not report a sound policy as one that never ends because others ran.
CHECK_SECONDS = 60.0


def guarded_outline(policy: Policy, limits: Limits | None = Limits()) -> PolicyOutline:
    """:func:`outline_policy` in a child process under ``limits`` (``seconds`` by default
    :data:`CHECK_SECONDS`): even without facts, a rule may ground forever.

    When a limit hits, the outline is made again without grounding, and its messages hold one
    ``GroundingLimit`` error, located at the statement a second, statement-by-statement
    grounding was at when the limit hit again.

    Raises:
        KeyboardInterrupt: Ctrl-C; the child is gone.
    """
    if limits is None:
        return outline_policy(policy)
    seconds = limits.seconds if limits.seconds is not None else CHECK_SECONDS
    try:
        return run_limited(outline_policy, policy, seconds=seconds, memory_mib=limits.memory_mib)  # type: ignore[no-any-return]
    except LimitExceeded as e:
        what = _exceeded(e, seconds, limits.memory_mib, "grounding the policy without facts")
    try:
        run_limited(probe_grounding, "", policy, seconds=seconds, memory_mib=limits.memory_mib, progress=True)
        where = None
    except LimitExceeded as e:
        where = e.last_progress
    except ClueueError:
        where = None
    outline = outline_policy(policy, ground=False)
    if where is None:
        text = f"error: {what}"
    else:
        at, _, rule = where.partition(": ")
        text = f"{at}: error: {what} at this statement, which may never end: {rule}"
    return PolicyOutline(outline.files, (("GroundingLimit", text),), outline.grounded)
