"""Retrying API calls: transient failures with back-off and jitter, conflicts from a fresh read.

A call is retried when the API server did not do it and may well do it a moment later: HTTP 429
(throttled; its Retry-After is honoured), 500, 502, 503 and 504, and a connection refused,
reset or dropped mid-request. Waits grow exponentially with random jitter (so that many clients
do not retry in step), up to ``MAX_WAIT_S``; a call gives up after ``ATTEMPTS`` attempts or
``MAX_ELAPSED_S`` seconds, whichever comes first, and raises the last error.

A write is safe to retry: every update carries the read resourceVersion (a repeated one
conflicts), a repeated create finds the object (409 AlreadyExists) and a repeated delete
carries the pod's uid as a precondition (404 once gone).

Every retry is counted on each active :func:`counting_retries` tally, so a command can report
how many it needed.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import urllib3
from kubernetes.client.exceptions import ApiException
from tenacity import (RetryCallState, Retrying, retry_if_exception, stop_after_attempt, stop_before_delay,
                      wait_exponential, wait_random)

__all__ = ["call", "update_with_retry", "missing_is_none", "counting_retries", "Tally", "is_transient",
           "TRANSIENT_STATUS", "ATTEMPTS", "MAX_ELAPSED_S", "MAX_WAIT_S", "CONFLICT_TRIES"]

#: HTTP statuses after which the same request may succeed: throttled, or the server (or a
#: proxy in front of it) failed without doing anything that a retry could repeat wrongly.
TRANSIENT_STATUS = frozenset({429, 500, 502, 503, 504})
ATTEMPTS = 6  # the first try and five retries: 0.25 + 0.5 + 1 + 2 + 4 s of waiting, plus jitter
MAX_WAIT_S = 4.0
MAX_ELAPSED_S = 20.0  # the bound on one call's retrying, whatever Retry-After asks
CONFLICT_TRIES = 5
T = TypeVar("T")


@dataclass
class Tally:
    """How many retries happened while it was active."""

    retries: int = 0


_tallies: ContextVar[tuple[Tally, ...]] = ContextVar("clueue_retry_tallies", default=())
_inside_call: ContextVar[bool] = ContextVar("clueue_inside_retried_call", default=False)


@contextlib.contextmanager
def counting_retries() -> Iterator[Tally]:
    """Count the retries made inside the block (tallies nest: each counts its own block)."""
    tally = Tally()
    token = _tallies.set(_tallies.get() + (tally,))
    try:
        yield tally
    finally:
        _tallies.reset(token)


def _sleep(seconds: float) -> None:
    time.sleep(seconds)  # looked up at each wait, so that a test can stand in for the clock


def _count(_: RetryCallState) -> None:
    for tally in _tallies.get():
        tally.retries += 1


def is_transient(error: BaseException) -> bool:
    """Whether the request may succeed if simply sent again."""
    if isinstance(error, ApiException):
        return error.status in TRANSIENT_STATUS
    if isinstance(error, urllib3.exceptions.SSLError):
        return False  # a certificate does not get better by asking again
    return isinstance(error, (urllib3.exceptions.HTTPError, ConnectionError))


def _retry_after(error: BaseException | None) -> float | None:
    """The seconds a 429 or 503 asks to wait (Retry-After in seconds), if it asks."""
    headers = getattr(error, "headers", None) if isinstance(error, ApiException) else None
    value = headers.get("Retry-After") if headers else None
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: rare from an API server; the exponential wait applies
        return None


_backoff = wait_exponential(multiplier=0.25, max=MAX_WAIT_S) + wait_random(0, 0.25)


def _wait(state: RetryCallState) -> float:
    asked = _retry_after(state.outcome.exception() if state.outcome else None)
    return min(asked, MAX_ELAPSED_S) if asked is not None else float(_backoff(state))


def call(fn: Callable[[], T]) -> T:
    """``fn()``, retried on transient failures (see the module docstring).

    Raises:
        the last error when it is not transient, or when the attempts or the time ran out.
    """
    if _inside_call.get():
        return fn()  # the enclosing call retries: retrying here too would multiply the attempts
    retrying = Retrying(retry=retry_if_exception(is_transient), wait=_wait, before_sleep=_count, reraise=True,
                        stop=stop_after_attempt(ATTEMPTS) | stop_before_delay(MAX_ELAPSED_S), sleep=_sleep)

    def once() -> T:
        token = _inside_call.set(True)
        try:
            return fn()
        finally:
            _inside_call.reset(token)

    return retrying(once)


def _is_conflict(error: BaseException) -> bool:
    return isinstance(error, ApiException) and error.status == 409


def update_with_retry(read: Callable[[], T | None], change: Callable[[T], T | None],
                      write: Callable[[T], Any], *, tries: int = CONFLICT_TRIES) -> bool:
    """Read an object, change it, write it with the read resourceVersion; re-read on conflict.

    ``change`` returns None when nothing needs to change. Returns True if a write happened,
    False if the object is gone (before or during the write) or already as wanted. The read
    and the write are each retried on transient failures (:func:`call`); a conflict is retried
    from a fresh read, after a short jittered wait, ``tries`` times in all.

    Raises:
        ApiException: any error other than a conflict, or a conflict ``tries`` times in a row.
    """
    retrying = Retrying(retry=retry_if_exception(_is_conflict), stop=stop_after_attempt(tries), reraise=True,
                        wait=wait_exponential(multiplier=0.05, max=1.0) + wait_random(0, 0.05), before_sleep=_count,
                        sleep=_sleep)
    for attempt in retrying:
        with attempt:
            current = call(read)
            if current is None:
                return False
            changed = change(current)
            if changed is None:
                return False
            try:
                call(lambda: write(changed))
            except ApiException as e:
                if e.status == 404:
                    return False  # deleted between the read and the write
                raise
            return True
    raise AssertionError("unreachable: tenacity re-raises the last conflict")


def missing_is_none(fn: Callable[[], T]) -> T | None:
    """The result of ``fn`` (retried as by :func:`call`), or None when the object it reads does
    not exist (HTTP 404)."""
    try:
        return call(fn)
    except ApiException as e:
        if e.status == 404:
            return None
        raise
