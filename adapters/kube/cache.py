"""A cache of every object clueue reads, kept current by watches.

One thread per kind lists the kind, then watches from the list's resourceVersion. When the
watch expires (410 Gone) or fails, the kind is listed again, so the cache converges on the
cluster's state whatever it missed. ``changed`` is set whenever an object changes, so a
controller can run a cycle on events instead of on a timer; :meth:`ClusterCache.wait_changed`
and :meth:`ClusterCache.take_changes` say which kinds changed.

**Expectations.** A controller must never decide from a cache older than its own writes (it
would admit into quota it has just given away). After an apply it records what it wrote
(:meth:`ClusterCache.expect`, the resourceVersions the API returned), and before the next
cycle waits until the cache holds each of those objects at that version or newer, or has seen
it deleted (:meth:`ClusterCache.wait_for_expectations`); if the watch does not deliver them in
time, the kinds concerned are listed again. An event that only brings one of our own writes
(its exact expected version) does not count as a change: the cycle that wrote it knew it.

**One named object.** Of a kind with ``Kind.only`` (Kueue's ConfigMap) the cache lists and
watches that one object, by a field selector; it may be absent, and its namespace too (the list
is then empty, and the watch brings it when it is created). When RBAC forbids reading it, the
kind counts as listed, with nothing, a snapshot says why in a notice, the log says it once, and
the cache asks again every :data:`FORBIDDEN_RETRY` seconds.

**Freed quota.** A Workload turning ``Finished``, an admitted one deleted, a Pod that
succeeded or failed: each gives quota back, so a controller decides at once rather than after
its batch window (:meth:`ClusterCache.take_urgent`).

**Writes in the background.** A controller's paced writes (a pending Workload's conditions,
written off the cycle's path) are announced with :meth:`ClusterCache.hold` before they are sent
and ended with :meth:`ClusterCache.release` and the versions they returned: the events that
bring exactly those versions back are no change, as with :meth:`ClusterCache.expect`.

Watch events are decoded as plain JSON: no typed model is built for an object (a Pod's costs
more CPU than everything else the cache does with it).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace
from typing import Any, Callable, Collection, Iterable

from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from clueue.engine import Document, Snapshot, build_snapshot

from . import retry
from .errors import api_errors
from .kinds import Kind, kueue_version, served_kinds
from .read import to_document, unreadable

__all__ = ["ClusterCache", "WatchFailures", "caught_up", "newer_or_equal", "FORBIDDEN_RETRY", "THROTTLED_WARN"]

log = logging.getLogger(__name__)

#: Seconds between attempts to read a named object RBAC forbids (a Role granted later is seen).
FORBIDDEN_RETRY = 60.0
THROTTLED_WARN = 10  # 429s in a row on one kind before throttling is worth a warning


def newer_or_equal(version: str, than: str) -> bool:
    """Whether resourceVersion ``version`` is ``than`` or later. resourceVersions are opaque to
    clients, but every API server backed by etcd makes them increasing integers; anything else
    is only known to be "as new" when equal."""
    if version.isdigit() and than.isdigit():
        return int(version) >= int(than)
    return version == than


def caught_up(expected: str, held: str | None, seen: str) -> bool:
    """Whether a cache that holds an object at ``held`` (None: not at all), and whose watch of
    that kind has delivered events up to ``seen``, reflects a write that returned ``expected``
    ("" for a delete that left nothing behind)."""
    if held is None:  # absent: right for a delete, or once the watch passed the write (deleted since)
        return expected == "" or bool(seen) and newer_or_equal(seen, expected)
    return bool(expected) and newer_or_equal(held, expected)


# The kinds of which a cluster holds thousands, parsed one object at a time (kind -> Snapshot field).
_BULK = {"Pod": "pods", "Workload": "workloads"}
_EMPTY = "the snapshot holds no objects clueue reads"  # build_snapshot's notice for no objects at all


# Kinds whose status no decision reads (engine/snapshot.py): a change of status alone (the queue
# status clueue writes after each cycle, queue_status.py) is no reason for another cycle.
_STATUS_UNREAD = frozenset({"ClusterQueue", "LocalQueue", "Cohort", "ResourceFlavor"})
_VOLATILE = ("resourceVersion", "managedFields", "generation")


def _sans_status(body: Any) -> tuple[Any, Any]:
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k not in _VOLATILE}
    return meta, {k: v for k, v in body.items() if k not in ("metadata", "status")}


class _RawWatch(watch.Watch):
    """A watch whose events carry only the object's JSON (``raw_object``): the cache reads
    nothing else, and the typed model the client would build for each Pod is pure cost."""

    def get_return_type(self, func: Any) -> Any:
        return None


def _frees_quota(kind: str, event: str, before: Document | None, after: dict[str, Any]) -> bool:
    """Whether a watch event gives quota back: a Workload newly ``Finished`` or deleted while
    admitted, a Pod newly ``Succeeded`` or ``Failed``, or deleted."""
    if before is None or kind not in ("Workload", "Pod"):
        return False
    old = before.body
    if kind == "Pod":
        phase = lambda body: (body.get("status") or {}).get("phase")  # noqa: E731
        return event == "DELETED" or phase(after) in ("Succeeded", "Failed") and phase(old) != phase(after)
    if event == "DELETED":
        return bool((old.get("status") or {}).get("admission"))

    def finished(body: Any) -> bool:
        return any(c.get("type") == "Finished" and c.get("status") == "True"
                   for c in (body.get("status") or {}).get("conditions") or [] if isinstance(c, dict))
    return finished(after) and not finished(old)


def _retry_after(e: ApiException) -> float:
    """Seconds to wait before listing again: the server's Retry-After (429), else 1 s."""
    try:
        return min(10.0, max(0.1, float((e.headers or {}).get("Retry-After", 1.0))))
    except (TypeError, ValueError):
        return 1.0


def _version_of(doc: Document) -> str:
    return str((doc.body.get("metadata") or {}).get("resourceVersion", ""))


def _after(version: str, than: str) -> bool:
    """Whether ``version`` is known to be later than ``than`` (both integers)."""
    return version.isdigit() and than.isdigit() and int(version) > int(than)


class WatchFailures:
    """How a cache logs its failed lists and watches. Throttling (429: a fresh API server while
    every watch opens at start) is retried quietly: one line for the whole cache, once, and a
    warning only if it lasts (``THROTTLED_WARN`` in a row on one kind); any other failure is a
    line, a warning from the second in a row."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._throttle_told = False

    def log(self, kind: str, failures: int, status: int, reason: str) -> None:
        """Log the ``failures``-th failure in a row of ``kind`` (HTTP ``status``, ``reason``)."""
        if status == 429 and failures < THROTTLED_WARN:
            with self._lock:
                told, self._throttle_told = self._throttle_told, True
            log.log(logging.DEBUG if told else logging.INFO, "the API server throttles the watches (429 Too Many "
                    "Requests); retrying%s", f" {kind}" if told else " them quietly")
            return
        log.log(logging.WARNING if failures > 1 else logging.INFO, "watching %s failed (%s); listing again",
                kind, reason)


class ClusterCache:
    """Objects by kind and name, current as of the last watch event.

    >>> cache = ClusterCache(api).start()          # doctest: +SKIP
    >>> cache.wait_synced(30); plan = run_cycle(cache.snapshot(), policy)  # doctest: +SKIP
    """

    def __init__(self, api: client.ApiClient, *, watch_seconds: int = 300, version: str | None = None,
                 only: Collection[str] | None = None, on_change: Callable[[], None] | None = None) -> None:
        """``version``: the served version of kueue.x-k8s.io ("" if not installed); default: discovered.
        ``only``: the kinds to hold (default: every kind clueue reads). ``on_change``: called,
        under the cache's lock (it must not call back into the cache), whenever a kind changes.

        Raises:
            ClusterUnavailable, ApiRefused: discovery failed (errors.py).
        """
        self.api = api
        self.watch_seconds = watch_seconds
        self.version = (kueue_version(api) or "") if version is None else version
        self.kinds = [k for k in served_kinds(api, self.version or None) if only is None or k.kind in only]
        self.on_change = on_change
        self.heard_at: float | None = None  # epoch seconds the API server last answered (list, event, bookmark)
        self.changed = threading.Event()
        self.relists = 0  # how many times a kind was listed again after a watch ended badly
        self.generation = 0  # counts changes (not our own writes coming back): a cycle notes the one it read
        self._objects: dict[str, dict[str, Document]] = {k.kind: {} for k in self.kinds}
        self._synced = {k.kind: threading.Event() for k in self.kinds}
        self._failures = WatchFailures()
        self._listed_at = {k.kind: "" for k in self.kinds}  # a list's version: older watch events are stale
        self._seen = {k.kind: "" for k in self.kinds}  # the last version each kind's watch or list brought
        self._gone: dict[str, dict[str, str]] = {k.kind: {} for k in self.kinds}  # deleted since the last list
        self._forbidden: set[str] = set()  # kinds of one named object (Kind.only) RBAC forbids reading
        self._dirty: set[str] = set()
        self._expected: dict[tuple[str, str], str] = {}  # (kind, key) -> resourceVersion we wrote ("" deleted)
        self._recent: list[tuple[str, str, str, bool]] | None = None  # events while writing: (kind, key, version, deleted)
        self._held: dict[tuple[str, str], list[str]] = {}  # background writes in flight -> versions their events brought
        self._urgent = False  # quota was given back since take_urgent
        self._lock = threading.Condition()
        self._parse_lock = threading.Lock()
        self._parsed: dict[str, dict[str, tuple[str, tuple[tuple[str, Any], ...], tuple[Any, ...]]]] = {}
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> ClusterCache:
        for kind in self.kinds:
            thread = threading.Thread(target=self._run, args=(kind,), name=f"watch-{kind.kind}", daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Stop the watches; waits for the threads up to ``timeout`` s in all (default: a watch's length)."""
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        deadline = time.monotonic() + (self.watch_seconds + 5 if timeout is None else timeout)
        for thread in self._threads:  # a watch blocked reading ends with its stream; daemon threads need no join
            thread.join(timeout=max(0.0, deadline - time.monotonic()))

    def wait_synced(self, timeout: float) -> bool:
        """True once every kind has been listed at least once."""
        deadline = time.monotonic() + timeout
        return all(event.wait(max(0.0, deadline - time.monotonic())) for event in self._synced.values())

    def get(self, kind: str, key: str) -> Document | None:
        """The cached object of ``kind`` named ``key`` ("ns/name", or the name of a cluster-scoped one)."""
        with self._lock:
            return self._objects.get(kind, {}).get(key)

    def documents(self, kind: str) -> list[Document]:
        """Every cached object of ``kind`` (e.g. MultiKueue's pass over the Workloads)."""
        with self._lock:
            return list(self._objects.get(kind, {}).values())

    def snapshot(self, read: list[Document] | None = None) -> Snapshot:
        """The cached objects as a snapshot, as :func:`~clueue.engine.build_snapshot` (lenient)
        makes it from them. Pods and Workloads, the bulk, are parsed once per resourceVersion:
        a cycle over a large, slowly changing backlog pays for what changed. ``read``, if
        given, receives the documents the snapshot is built from (a decision log records them)."""
        with self._lock:
            objects = {kind: dict(docs) for kind, docs in self._objects.items()}
            forbidden = [unreadable(k) for k in self.kinds if k.kind in self._forbidden]
        if read is not None:
            read.extend(d for docs in objects.values() for d in docs.values())
        base = build_snapshot([d for kind, docs in objects.items() if kind not in _BULK for d in docs.values()],
                              lenient=True)  # malformed objects: left out, in .rejected
        parts: dict[str, dict[str, Any]] = {}
        rejected = list(base.rejected)
        with self._parse_lock:
            for kind, attr in _BULK.items():
                known, fresh = self._parsed.get(kind, {}), {}
                parsed: dict[str, Any] = {}
                for key, doc in objects.get(kind, {}).items():
                    version = _version_of(doc)
                    hit = known.get(key)
                    if hit is None or hit[0] != version or not version:
                        one = build_snapshot([doc], lenient=True)
                        hit = (version, tuple(getattr(one, attr).items()), one.rejected)
                    fresh[key] = hit
                    parsed.update(hit[1])
                    rejected += hit[2]
                self._parsed[kind] = fresh
                parts[attr] = dict(sorted(parsed.items()))
        notices = tuple(forbidden) + base.notices
        if any(parts.values()):
            notices = tuple(n for n in notices if n != _EMPTY)
        return replace(base, **parts, notices=notices, rejected=tuple(rejected))

    # -- what changed -------------------------------------------------------------------------
    def wait_changed(self, timeout: float | None) -> bool:
        """Wait until some kind changed since :meth:`take_changes` last ran (True), the
        timeout passed or the cache stopped (False)."""
        with self._lock:
            return self._lock.wait_for(lambda: bool(self._dirty) or self._stop.is_set(), timeout) \
                and bool(self._dirty)

    def take_changes(self) -> set[str]:
        """The kinds changed since the last call, forgotten as they are returned."""
        with self._lock:
            dirty, self._dirty = self._dirty, set()
        return dirty

    def take_urgent(self) -> bool:
        """Whether quota was given back (a Workload finished or deleted while admitted, a Pod
        ended) since the last call: the next decision should not wait for a batch window."""
        with self._lock:
            urgent, self._urgent = self._urgent, False
        return urgent

    def _mark(self, kind: str) -> None:
        """Under the lock: ``kind`` changed."""
        self._dirty.add(kind)
        self.generation += 1
        self.changed.set()
        self._lock.notify_all()
        if self.on_change is not None:
            self.on_change()

    def note_change(self, what: str) -> None:
        """Something outside the cluster changed (e.g. a MultiKueue worker, named ``what`` in
        :meth:`take_changes`): wakes :meth:`wait_changed` as a change of a kind does."""
        with self._lock:
            self._mark(what)

    # -- our own writes -----------------------------------------------------------------------
    def begin_writes(self) -> None:
        """A cycle starts writing: the events the watches bring until :meth:`expect` are held
        back, so that those of its own writes (often back before the apply ends) are not taken
        for changes."""
        with self._lock:
            self._recent = []

    def expect(self, written: Iterable[tuple[str, str, str]]) -> None:
        """Record writes (kind, key, resourceVersion or "" for deleted) the next cycle must see,
        and end :meth:`begin_writes`: the events held back since, but those of these writes,
        count as changes. Kinds the cache does not hold are ignored."""
        written = list(written)
        ours = set(written)
        with self._lock:
            recent, self._recent = self._recent or [], None
            for kind, key, version, deleted in recent:
                if (kind, key, version) not in ours and not (deleted and (kind, key, "") in ours):
                    self._mark(kind)
            # Only the last write of a key counts (a delete then a create leaves the object), and
            # a met one replaces an earlier expectation of the key: a stale "deleted" would block.
            last = {(kind, key): version for kind, key, version in written}
            for (kind, key), version in last.items():
                if kind not in self._objects:
                    continue
                if self._met(kind, key, version):
                    self._expected.pop((kind, key), None)
                else:
                    self._expected[(kind, key)] = version

    def absorb(self, kind: str, bodies: Iterable[dict[str, Any]]) -> None:
        """Objects of ``kind`` as this controller's own writes returned them: held at once if
        newer than what the cache holds (the watch brings the same version later, which is then
        no change), so that the next cycle need not wait for the watch to bring them."""
        kinds = {k.kind: k for k in self.kinds}
        if kind not in kinds:
            return
        docs = [to_document(self.api, kinds[kind], self.version, body) for body in bodies]
        with self._lock:
            for doc in docs:
                key = self._key(kinds[kind], dict(doc.body))
                held = self._objects[kind].get(key)
                if key in self._gone[kind] or held is not None and not _after(_version_of(doc), _version_of(held)):
                    continue  # deleted since, or the watch brought it (or a successor) already
                if held is None:
                    continue  # not seen yet: its watch event brings it (with whatever came before)
                self._objects[kind][key] = doc
            self._settle(kind)

    def hold(self, keys: Iterable[tuple[str, str]]) -> None:
        """Writes of these (kind, key) are about to be sent off a cycle's path: their events are
        held until :meth:`release` says which versions were ours."""
        with self._lock:
            for key in keys:
                self._held.setdefault(key, [])

    def release(self, keys: Iterable[tuple[str, str]], written: Iterable[tuple[str, str, str]]) -> None:
        """The held writes of ``keys`` are done, having returned ``written`` (kind, key,
        resourceVersion): the events held for them count as changes unless they brought one of
        those versions."""
        ours = {(kind, key, version) for kind, key, version in written}
        with self._lock:
            for kind, key in keys:
                for version in self._held.pop((kind, key), []):
                    if (kind, key, version) not in ours:
                        self._mark(kind)
                        break

    def pending_expectations(self) -> dict[tuple[str, str], str]:
        with self._lock:
            return dict(self._expected)

    def wait_for_expectations(self, timeout: float) -> bool:
        """Wait until the cache holds every expected write; True if it did within ``timeout``.
        Otherwise the kinds concerned are listed again (so the cache is newer than the writes
        all the same) and False is returned.

        Raises:
            ClusterUnavailable, ApiRefused: listing again failed.
        """
        with self._lock:
            if self._lock.wait_for(lambda: not self._expected or self._stop.is_set(), timeout) and not self._expected:
                return True
            kinds = {kind for kind, _ in self._expected}
            log.info("the watch has not brought %d of our writes after %.1f s (%s); listing again",
                     len(self._expected), timeout, ", ".join(sorted(kinds)))
        for kind in self.kinds:
            if kind.kind in kinds:
                self._relist(kind)
        with self._lock:
            for key in [k for k in self._expected if k[0] in kinds]:
                del self._expected[key]  # a list made after the writes holds them, or their successors
        return False

    def _met(self, kind: str, key: str, expected: str) -> bool:
        doc = self._objects[kind].get(key)
        return caught_up(expected, _version_of(doc) if doc is not None else None, self._seen[kind])

    def _settle(self, kind: str) -> None:
        """Under the lock: forget the expectations of ``kind`` the cache now meets."""
        met = [k for k, v in self._expected.items() if k[0] == kind and self._met(kind, k[1], v)]
        for k in met:
            del self._expected[k]
        if met and not self._expected:
            self._lock.notify_all()

    # -- listing ------------------------------------------------------------------------------
    def resync(self) -> None:
        """List every kind again now, in this thread: the cache then holds every write made
        before the call (e.g. by a previous decider).

        Raises:
            ClusterUnavailable, ApiRefused: a list failed.
        """
        for kind in self.kinds:
            self._relist(kind)

    def _relist(self, kind: Kind) -> None:
        with api_errors(self.api, f"listing {kind.plural}"):
            try:
                retry.call(lambda: self._list(kind))
            except ApiException as e:
                if not (e.status == 403 and kind.only):
                    raise
                self._forbid(kind)

    def _key(self, kind: Kind, body: dict[str, Any]) -> str:
        meta = body.get("metadata", {})
        return f"{meta.get('namespace')}/{meta.get('name')}" if kind.namespaced else str(meta.get("name"))

    def _list(self, kind: Kind) -> str:
        call, args = kind.list_call(self.api, self.version)
        response = call(**args, _preload_content=False)  # plain JSON: no typed model per object
        listed = json.loads(response.data or b"{}")
        items = listed["items"] if isinstance(listed, dict) else listed.items
        version = listed["metadata"]["resourceVersion"] if isinstance(listed, dict) else listed.metadata.resource_version
        version = str(version)
        fresh = {}
        for item in items:
            doc = to_document(self.api, kind, self.version, item)
            fresh[self._key(kind, dict(doc.body))] = doc
        with self._lock:
            # A list made outside the watch thread (resync) may be older than what the watch
            # brought meanwhile: what the watch saw after the list's version wins.
            for key, doc in self._objects[kind.kind].items():
                if _after(_version_of(doc), version):
                    fresh[key] = doc
            gone = self._gone[kind.kind]
            for key, at in list(gone.items()):
                if _after(at, version):
                    fresh.pop(key, None)
                else:
                    del gone[key]
            old = self._objects[kind.kind]
            same = old.keys() == fresh.keys() and all(_version_of(old[k]) == _version_of(d) for k, d in fresh.items())
            self._objects[kind.kind] = fresh
            self._listed_at[kind.kind] = version
            if kind.kind in self._forbidden:  # granted since: a change, if only of the notice
                self._forbidden.discard(kind.kind)
                log.info("%s %s can be read now", kind.kind, kind.only)
                same = False
            if not _after(self._seen[kind.kind], version):
                self._seen[kind.kind] = version
            self._settle(kind.kind)
            if not same or not self._synced[kind.kind].is_set():  # a list that brings nothing new is no change
                self._mark(kind.kind)
        self._synced[kind.kind].set()
        self.heard_at = time.time()
        return str(version)

    def _run(self, kind: Kind) -> None:
        version = ""
        failures = 0  # in a row: a single one (e.g. 429 while every watch opens at start) is no alarm
        while not self._stop.is_set():
            try:
                if not version:
                    version = self._list(kind)
                version = self._watch(kind, version)
                failures = 0
            except ApiException as e:
                if e.status == 403 and kind.only:  # not granted: decided without it (read.unreadable)
                    self._forbid(kind)
                    self._stop.wait(FORBIDDEN_RETRY)
                    version = ""
                    continue
                if e.status != 410:
                    failures += 1
                    self._failures.log(kind.kind, failures, e.status, str(e.reason))
                    self._stop.wait(_retry_after(e))
                version = ""
                self.relists += 1
            except Exception as e:  # network errors and the like: back off, then list again
                failures += 1
                log.log(logging.WARNING if failures > 1 else logging.INFO,
                        "watching %s failed (%s); listing again", kind.kind, e)
                self._stop.wait(1.0)
                version = ""
                self.relists += 1

    def _forbid(self, kind: Kind) -> None:
        """RBAC forbids reading the one object of ``kind``: it counts as listed, with nothing
        (what was held is dropped), and the log says so once, until it can be read again."""
        with self._lock:
            if kind.kind not in self._forbidden:
                self._forbidden.add(kind.kind)
                log.warning("%s; asking again every %.0f s", unreadable(kind), FORBIDDEN_RETRY)
                self._objects[kind.kind] = {}
                self._mark(kind.kind)
        self._synced[kind.kind].set()

    def _watch(self, kind: Kind, version: str) -> str:
        """Follow the watch until it ends; returns the last resourceVersion seen."""
        call, args = kind.list_call(self.api, self.version)
        stream = _RawWatch().stream(call, resource_version=version, timeout_seconds=self.watch_seconds,
                                      allow_watch_bookmarks=True, **args)
        for event in stream:
            if self._stop.is_set():
                break
            kind_of_event = event["type"]
            obj = event["raw_object"]
            version = obj.get("metadata", {}).get("resourceVersion", version)
            if kind_of_event == "ERROR":
                raise ApiException(status=obj.get("code", 500), reason=obj.get("message", "watch error"))
            self.heard_at = time.time()
            self._on_event(kind, kind_of_event, obj, version)
        else:  # the server ended the watch at its timeout: it answers
            self.heard_at = time.time()
        return version

    def _on_event(self, kind: Kind, kind_of_event: str, obj: dict[str, Any], version: str) -> None:
        """Bring one watch event (ADDED, MODIFIED, DELETED, BOOKMARK) of ``kind`` into the cache."""
        if kind_of_event == "BOOKMARK":  # every event up to it was delivered
            with self._lock:
                self._seen[kind.kind] = version
                self._settle(kind.kind)
            return
        doc = to_document(self.api, kind, self.version, obj)
        key = self._key(kind, dict(doc.body))
        with self._lock:
            listed = self._listed_at[kind.kind]
            if listed and newer_or_equal(listed, version):
                return  # older than a list made since (resync): the list holds it or its successor
            self._seen[kind.kind] = version
            expected = self._expected.get((kind.kind, key))  # our own write coming back, if equal
            ours = expected == version or (expected == "" and kind_of_event == "DELETED")
            before = self._objects[kind.kind].get(key)
            if before is not None and kind_of_event == "MODIFIED" and _version_of(before) == version:
                ours = True  # what the cache holds already (a write's answer it absorbed)
            if kind.kind in _STATUS_UNREAD and kind_of_event == "MODIFIED" and before is not None:
                ours = ours or _sans_status(before.body) == _sans_status(doc.body)  # e.g. queue status clueue wrote
            if not ours and _frees_quota(kind.kind, kind_of_event, before, doc.body):
                self._urgent = True
            held = self._held.get((kind.kind, key))
            if held is not None and not ours:  # a background write's own event, or another's: told at release
                held.append(version)
                ours = True
            if kind_of_event == "DELETED":
                self._objects[kind.kind].pop(key, None)
                self._gone[kind.kind][key] = version
            else:
                self._objects[kind.kind][key] = doc
                self._gone[kind.kind].pop(key, None)
            self._settle(kind.kind)
            if self._recent is not None and not ours:
                self._recent.append((kind.kind, key, version, kind_of_event == "DELETED"))
            elif not ours:
                self._mark(kind.kind)
