"""Fixtures for end-to-end tests against a real kube-apiserver.

Every test in ``tests/e2e`` is marked ``e2e`` (select with ``-m e2e``, exclude with
``-m "not e2e"``).  The session-scoped ``kube`` fixture starts etcd and kube-apiserver with
clueue's CRDs installed (see ``tests/testenv``).  If the binaries are not built yet it builds
them first, printing progress to the terminal while the tests wait; if that build fails, the
tests using ``kube`` fail with the go error.  They are never skipped: a green e2e run always
means a real apiserver accepted what the tests sent.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

# `tests.testenv` is imported by its package path; make the repository root importable even
# when pytest is started from elsewhere or with an import mode that does not add it.
_REPO_ROOT = Path(__file__).resolve().parents[2]
if str(_REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(_REPO_ROOT))

from tests.testenv.build import BuildError, ensure_binaries  # noqa: E402
from tests.testenv.control_plane import ControlPlane, ControlPlaneError  # noqa: E402

_E2E_DIR = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "e2e: end-to-end test against a real etcd + kube-apiserver (tests/testenv builds them)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # This hook sees every collected item of the session, not only this directory's.
    for item in items:
        if _E2E_DIR in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def kube(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A running control plane with clueue's CRDs Established; stopped after the session.

    The object has ``.kubeconfig`` (a Path), ``.api_client()`` (a new
    ``kubernetes.client.ApiClient``), ``.create_namespace(name)`` and ``.get_json(path)``.
    """
    config = request.config
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    capture = config.pluginmanager.get_plugin("capturemanager")

    def progress(message: str) -> None:
        # Output capture would hide a build of several minutes; write around it, to the terminal.
        if capture is not None:
            with capture.global_and_fixture_disabled():
                _say(reporter, message)
        else:
            _say(reporter, message)

    # pytest.fail is called outside the `except` blocks so that the report shows the go or
    # apiserver error once, without a chained traceback around it.
    failure = ""
    try:
        binaries = ensure_binaries(progress=progress)
    except BuildError as error:
        failure = f"could not build the e2e control plane:\n{error}"
    if failure:
        pytest.fail(failure, pytrace=False)

    plane = ControlPlane(binaries)
    try:
        plane.start()
    except ControlPlaneError as error:
        failure = f"could not start the e2e control plane:\n{error}"
    if failure:
        pytest.fail(failure, pytrace=False)
    try:
        yield plane
    finally:
        plane.stop()


def _say(reporter: object, message: str) -> None:
    if reporter is not None:
        reporter.write_line(message)  # type: ignore[attr-defined]
    else:
        print(message, flush=True)


@pytest.fixture
def namespace(kube: ControlPlane) -> str:
    """A fresh namespace for one test (namespaces never finish deleting here: no controllers)."""
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    kube.create_namespace(name)
    return name
