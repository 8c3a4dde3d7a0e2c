"""Writing an object safely against concurrent writers: read, change, write, re-read on conflict."""

from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

from kubernetes.client.exceptions import ApiException

__all__ = ["update_with_retry", "missing_is_none"]

_TRIES = 5
T = TypeVar("T")


def update_with_retry(read: Callable[[], T | None], change: Callable[[T], T | None],
                      write: Callable[[T], Any], *, tries: int = _TRIES) -> bool:
    """Read an object, change it, write it with the read resourceVersion; re-read on conflict.

    ``change`` returns None when nothing needs to change. Returns True if a write happened,
    False if the object is gone or already as wanted.

    Raises:
        ApiException: any error other than a conflict, or a conflict ``tries`` times in a row.
    """
    for attempt in range(tries):
        current = read()
        if current is None:
            return False
        changed = change(current)
        if changed is None:
            return False
        try:
            write(changed)
            return True
        except ApiException as e:
            if e.status != 409 or attempt == tries - 1:
                raise
            time.sleep(0.05 * (attempt + 1))
    return False


def missing_is_none(call: Callable[[], T]) -> T | None:
    """The result of ``call``, or None when the object it reads does not exist (HTTP 404)."""
    try:
        return call()
    except ApiException as e:
        if e.status == 404:
            return None
        raise
