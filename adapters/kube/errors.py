"""API failures as one line a person can act on: what failed, on which server, and what to do.

Two kinds, told apart by their exit code (docs/errors.md):

- :class:`ClusterUnavailable` (exit 3): the API server could not be reached (refused, timed
  out, TLS failed), dropped the connection, or kept answering 429/5xx after every retry.
  Nothing is wrong with the snapshot or the policy: the message says whether to check the
  kubeconfig or to run the command again later.
- :class:`ApiRefused` (exit 1): the server answered and refused this one request (forbidden,
  not found, invalid, conflicting every time). An apply records it and goes on with the other
  objects; a read stops.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import urllib3
from kubernetes.client.exceptions import ApiException

from clueue.engine import AdapterError

from .retry import is_transient

__all__ = ["ApiRefused", "ClusterUnavailable", "api_errors", "describe", "describe_with_grant", "recorded", "server_of"]


class ClusterUnavailable(AdapterError):
    """The API server could not be reached or kept failing after the retries."""

    exit_code = 3


class ApiRefused(AdapterError):
    """The API server refused one request."""

    exit_code = 1


def server_of(api: Any) -> str:
    """The API server's address, as the kubeconfig names it."""
    return str(getattr(getattr(api, "configuration", None), "host", "") or "the API server")


def _status_message(error: ApiException) -> str:
    """The message of the Status object the server sent with an error, if any."""
    try:
        message = json.loads(error.body or "").get("message", "")
    except (TypeError, ValueError, AttributeError):
        message = ""
    return str(message) if message else ""


def _connection_problem(error: BaseException) -> str:
    """What went wrong on the wire, in a few words (``connection refused``)."""
    if isinstance(error, urllib3.exceptions.MaxRetryError) and error.reason is not None:
        error = error.reason
    cause: BaseException | None = error
    while cause is not None:  # the OS error underneath says it best
        if isinstance(cause, OSError) and cause.strerror:
            return cause.strerror.lower()
        cause = cause.__cause__ or cause.__context__
    if isinstance(error, urllib3.exceptions.ProtocolError) and len(error.args) > 1:
        return f"connection dropped ({error.args[1]})"
    if isinstance(error, urllib3.exceptions.TimeoutError):
        return "timed out"
    return str(error) or type(error).__name__


_HINTS = {
    401: "the kubeconfig's credentials were not accepted; renew them (log in again) and retry",
    403: "the kubeconfig's user lacks a permission clueue needs; grant it (docs/errors.md lists what clueue "
         "reads and writes)",
    404: "check that the kueue.x-k8s.io CRDs are installed (clueue crds | kubectl apply -f -) and the "
         "object still exists",
    409: "it kept changing while clueue wrote it; run the command again",
    422: "the API server rejected the object as written",
}


def describe(error: BaseException, doing: str, server: str) -> AdapterError:
    """``error``, raised while ``doing`` (``listing clusterqueues``), as an AdapterError whose
    one-line message says what failed and what to do."""
    where = f"{doing} on {server}"
    if isinstance(error, ApiException) and error.status:
        reason = f"HTTP {error.status} {error.reason or ''}".rstrip()
        detail = _status_message(error)
        said = f"{reason}: {detail}" if detail else reason
        if is_transient(error):
            return ClusterUnavailable(f"{where}: {said}, after retrying; the API server is overloaded or failing: "
                                      "run the command again when it answers")
        hint = _HINTS.get(error.status, "see the API server's message")
        return ApiRefused(f"{where}: {said}; {hint}")
    if isinstance(error, ApiException):  # status 0: the client failed before any answer (TLS)
        last = ((error.reason or "").splitlines() or ["no answer"])[-1]
        return ClusterUnavailable(f"{where}: {last}; check the kubeconfig's server address and certificate authority")
    problem = _connection_problem(error)
    if is_transient(error):
        return ClusterUnavailable(f"{where}: {problem}, after retrying; check that the API server is running "
                                  "and reachable at that address (kubectl cluster-info), then run the command again")
    return ClusterUnavailable(f"{where}: {problem}; check the kubeconfig's server address and certificate authority")


def describe_with_grant(error: BaseException, doing: str, api: Any, grant: str) -> AdapterError:
    """As :func:`describe`, but a refusal for want of a permission (HTTP 403) is said as
    ``{doing}: forbidden; {grant}``, ``grant`` naming the permission the controller needs and
    where deploy/ gives it."""
    if isinstance(error, ApiException) and error.status == 403:
        return AdapterError(f"{doing}: forbidden; {grant}")
    return describe(error, doing, server_of(api))


@contextlib.contextmanager
def api_errors(api: Any, doing: str) -> Iterator[None]:
    """Raise an API or connection failure inside the block as :func:`describe` words it.

    Raises:
        ClusterUnavailable: the server could not be reached or kept failing.
        ApiRefused: the server refused the request.
    """
    try:
        yield
    except (ApiException, urllib3.exceptions.HTTPError, ConnectionError) as e:
        raise describe(e, doing, server_of(api)) from e


@contextlib.contextmanager
def recorded(errors: list[str], api: Any, doing: str) -> Iterator[None]:
    """Record in ``errors`` a request inside the block that the API server refused, and go on.

    Raises:
        ClusterUnavailable: the server could not be reached or kept failing: going on is futile.
    """
    try:
        with api_errors(api, doing):
            yield
    except ApiRefused as e:
        errors.append(str(e))
