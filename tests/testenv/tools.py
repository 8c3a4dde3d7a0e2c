"""Build Kueue's released command-line tools from the Go module proxy, once per machine.

The e2e tests run Kueue's own ``kueuectl`` against clueue, as a Kueue user would. It is built
like the control plane (build.py): from the Go module proxy, with the same ``go`` environment
(static, ``-mod=mod``, no VCS stamping), under the same kind of lock, published atomically
into the testenv cache. Unlike ``k8s.io/kubernetes``, Kueue's go.mod replaces no module, so
``go install MODULE/PACKAGE@VERSION`` builds it as released, with its own go.sum, and no
wrapper module is needed.

Layout::

    $CLUEUE_TESTENV_CACHE/tools/<name>-<version>/bin/<name>
    $CLUEUE_TESTENV_CACHE/tools/<name>-<version>/build.log
    $CLUEUE_TESTENV_CACHE/tools/<name>-<version>.lock

``python -m tests.testenv.build`` builds them along with the control plane (CI does, up front);
a test calls :func:`ensure_tool`, which builds a missing tool first.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from tests.testenv.build import BuildError, Progress, _build_lock, _find_go, _go_env, cache_root

__all__ = ["Tool", "TOOLS", "KUEUECTL", "ensure_tool", "tool_path"]


@dataclass(frozen=True)
class Tool:
    """A Go command to build: its package, the module version, and linker flags to stamp it."""

    name: str
    package: str
    version: str
    version_variable: str = ""  # a string variable set to ``version`` at link time (its `version` command)


#: Kueue's kubectl plugin, the release the issue reproduced against (Kueue v0.19.2).
KUEUECTL = Tool("kueuectl", "sigs.k8s.io/kueue/cmd/kueuectl", os.environ.get("CLUEUE_TESTENV_KUEUE_VERSION", "v0.19.2"),
                "sigs.k8s.io/kueue/pkg/version.GitVersion")

TOOLS: dict[str, Tool] = {KUEUECTL.name: KUEUECTL}


def _tool_dir(tool: Tool) -> Path:
    return cache_root() / "tools" / f"{tool.name}-{tool.version}"


def tool_path(tool: Tool) -> Path:
    """Where the built ``tool`` is (whether or not it is built yet)."""
    return _tool_dir(tool) / "bin" / tool.name


def _build(tool: Tool, progress: Progress) -> None:
    """``go install PACKAGE@VERSION`` into a temporary directory, then one rename into bin/."""
    directory = _tool_dir(tool)
    directory.mkdir(parents=True, exist_ok=True)
    for left in directory.glob("bin-*"):  # of a build that was killed (we hold the lock: none runs)
        shutil.rmtree(left, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix="bin-", dir=directory))
    staging.chmod(0o755)
    log_path = directory / "build.log"
    flags = ["-s", "-w"] + ([f"-X {tool.version_variable}={tool.version}"] if tool.version_variable else [])
    cmd = [_find_go(), "install", "-trimpath", f"-ldflags={' '.join(flags)}", f"{tool.package}@{tool.version}"]
    progress(f"clueue testenv: building {tool.package}@{tool.version} into {tool_path(tool)} "
             "(a first build takes a few minutes on 2 cores)")
    started = time.monotonic()
    try:
        with open(log_path, "w") as log:
            log.write("$ " + " ".join(cmd) + "\n")
            log.flush()
            # -mod=mod does not apply to `go install pkg@version` (it refuses any -mod); GOBIN
            # places the binary. The work directory is the staging one: no go.mod around it.
            env = _go_env({"GOFLAGS": "-buildvcs=false", "GOBIN": str(staging)})
            code = subprocess.run(cmd, cwd=staging, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  check=False).returncode
        if code != 0:
            tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-40:])
            raise BuildError(f"go install {tool.package}@{tool.version} failed with exit code {code} "
                             f"(full log: {log_path}):\n{tail}")
        produced = staging / tool.name
        if not produced.is_file():
            raise BuildError(f"go install succeeded but produced no {tool.name} in {staging}")
        final = tool_path(tool)
        final.parent.mkdir(exist_ok=True)
        os.replace(produced, final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    minutes, seconds = divmod(int(time.monotonic() - started), 60)
    progress(f"  built {tool.name} {tool.version} in {minutes}m{seconds:02d}s")


def ensure_tool(tool: Tool = KUEUECTL, progress: Progress = print) -> Path:
    """The path of the built ``tool``, building it first when it is missing (under a lock, so
    concurrent test processes build it once).

    Raises:
        BuildError: the go tool failed; the message carries its output.
    """
    path = tool_path(tool)
    if path.is_file():
        return path
    path.parent.parent.parent.mkdir(parents=True, exist_ok=True)  # tools/: where its lock file goes
    with _build_lock(f"tools/{tool.name}-{tool.version}", progress):
        if not path.is_file():  # another process may have built it meanwhile
            _build(tool, progress)
    return path
