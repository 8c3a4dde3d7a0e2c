"""A fresh API server throttles (429) while every watch opens at start (issue 34): the cache and
MultiKueue retry quietly, say so once, in one line each."""

from __future__ import annotations

import logging

from kubernetes.client.exceptions import ApiException

from clueue.adapters.kube.cache import THROTTLED_WARN, WatchFailures
from clueue.adapters.multikueue.runner import _one_line


def test_throttled_watches_are_one_line_for_the_whole_cache_and_a_warning_only_if_it_lasts(caplog):
    failures = WatchFailures()
    caplog.set_level(logging.INFO, logger="clueue.adapters.kube.cache")
    for kind in ("Pod", "Workload", "Node", "ClusterQueue", "LocalQueue"):
        failures.log(kind, 1, 429, "Too Many Requests")
    assert [r.getMessage() for r in caplog.records] == [
        "the API server throttles the watches (429 Too Many Requests); retrying them quietly"]
    failures.log("Pod", THROTTLED_WARN, 429, "Too Many Requests")
    assert caplog.records[-1].levelno == logging.WARNING and "watching Pod failed" in caplog.records[-1].getMessage()


def test_a_multikueue_failure_is_one_line():
    error = ApiException(status=429, reason="Too Many Requests")
    error.body, error.headers = '{"kind":"Status",\n"code":429}', {"Retry-After": "1"}
    assert "\n" in str(error) and _one_line(error) == "HTTP 429 Too Many Requests"
    assert _one_line(ValueError("first\nsecond")) == "ValueError: first"
