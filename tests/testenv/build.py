"""Build kube-apiserver, kube-scheduler and etcd from the Go module proxy, once per machine.

Why a wrapper module: ``k8s.io/kubernetes`` cannot be ``go install``-ed, because its go.mod
replaces every staging module (``k8s.io/api``, ``k8s.io/apiserver``, ...) with a local path
(``./staging/src/k8s.io/...``) that only exists in a git checkout.  So we write a small wrapper
module into the cache directory (never into the clueue checkout: the product contains no Go
code) that requires ``k8s.io/kubernetes`` at the pinned version and replaces each staging module
with its published ``v0.<minor>.<patch>`` release.  The list of staging modules is read from
that release's own go.mod, never typed by hand, so it stays right when the version changes.

etcd is built from the same wrapper: ``go.etcd.io/etcd/server/v3`` has a ``main`` package at its
module root, and the version is the one the Kubernetes release requires in its go.mod, which is
the etcd its own integration tests run against.  kube-scheduler comes from the same
``k8s.io/kubernetes`` release, so the scheduler and the apiserver always match.

Only missing binaries are built: a cache that already holds kube-apiserver and etcd gains
kube-scheduler by building just that one (most of its packages are in Go's build cache then).

Layout (keyed by version, built once, published atomically)::

    $CLUEUE_TESTENV_CACHE                  (default: ${XDG_CACHE_HOME:-~/.cache}/clueue/testenv)
      <k8s version>/bin/kube-apiserver
      <k8s version>/bin/etcd
      <k8s version>/bin/kube-scheduler
      <k8s version>/bin/versions.json      {"kubernetes", "etcd", "binaries": {name: version}}
      <k8s version>/src/go.mod             the generated wrapper module (kept for debugging)
      <k8s version>/build.log              full output of the last build
      <k8s version>.lock                   flock held while building

Run ``python -m tests.testenv.build`` (or ``python tests/testenv/build.py``) to build ahead of
time; the e2e fixture calls :func:`ensure_binaries` itself when the binaries are missing. The
command also builds Kueue's ``kueuectl`` (tools.py), which the e2e tests run against clueue.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Binaries",
    "BuildError",
    "DEFAULT_KUBERNETES_VERSION",
    "KUBERNETES_VERSION",
    "bin_dir",
    "build",
    "cache_root",
    "ensure_binaries",
    "main",
    "missing_binaries",
]

#: The Kubernetes release the e2e tests run against.  v1.36.4 is the newest 1.36 patch that the
#: Go module proxy serves *and* the checksum database verifies (v1.36.5 is on the proxy, but
#: sum.golang.org has no record of it, so `go` refuses it without disabling verification).
#: Override with $CLUEUE_TESTENV_K8S_VERSION to try another release.
DEFAULT_KUBERNETES_VERSION = "v1.36.4"
KUBERNETES_VERSION = os.environ.get("CLUEUE_TESTENV_K8S_VERSION", DEFAULT_KUBERNETES_VERSION)

KUBERNETES_MODULE = "k8s.io/kubernetes"
ETCD_SERVER_MODULE = "go.etcd.io/etcd/server/v3"
APISERVER_PACKAGE = "k8s.io/kubernetes/cmd/kube-apiserver"
SCHEDULER_PACKAGE = "k8s.io/kubernetes/cmd/kube-scheduler"

#: Binaries this module produces, by file name -> Go package to build.
PACKAGES: dict[str, str] = {
    "kube-apiserver": APISERVER_PACKAGE,
    "etcd": ETCD_SERVER_MODULE,  # the module root is etcd's `package main`
    "kube-scheduler": SCHEDULER_PACKAGE,
}

Progress = Callable[[str], None]


class BuildError(RuntimeError):
    """The binaries could not be built; the message carries the go tool's own error output."""


@dataclass(frozen=True)
class Binaries:
    """Paths of a built control plane, and the versions they were built from."""

    kubernetes_version: str
    etcd_version: str
    kube_apiserver: Path
    etcd: Path
    kube_scheduler: Path


@dataclass(frozen=True)
class ReleaseInfo:
    """What the wrapper module needs to know about one Kubernetes release, read from its go.mod."""

    kubernetes_version: str
    go_directive: str
    godebug: tuple[str, ...]
    staging_modules: tuple[str, ...]
    etcd_version: str
    commit_time: str


def cache_root() -> Path:
    """The directory holding all cached builds ($CLUEUE_TESTENV_CACHE, else the XDG cache)."""
    explicit = os.environ.get("CLUEUE_TESTENV_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "clueue" / "testenv"


def version_dir(version: str = KUBERNETES_VERSION) -> Path:
    """The cache directory of one Kubernetes version."""
    return cache_root() / version


def bin_dir(version: str = KUBERNETES_VERSION) -> Path:
    """Where the finished binaries of ``version`` live."""
    return version_dir(version) / "bin"


def staging_version(kubernetes_version: str) -> str:
    """Map ``v1.<minor>.<patch>[-pre]`` to the staging modules' ``v0.<minor>.<patch>[-pre]``.

    Kubernetes publishes every staging repository with the same minor/patch as the release,
    under major version 0 (k8s.io/api v0.36.4 belongs to Kubernetes v1.36.4).
    """
    match = re.fullmatch(r"v1\.(\d+\.\d+(?:-[0-9A-Za-z.-]+)?)", kubernetes_version)
    if not match:
        raise BuildError(f"not a Kubernetes v1.x.y release version: {kubernetes_version!r}")
    return f"v0.{match.group(1)}"


def _read_stamp(version: str) -> dict[str, object]:
    """The versions.json of ``version``'s bin directory ({} when there is none yet)."""
    stamp = bin_dir(version) / "versions.json"
    return json.loads(stamp.read_text()) if stamp.is_file() else {}


def missing_binaries(version: str = KUBERNETES_VERSION) -> list[str]:
    """Names of the binaries (keys of PACKAGES) that ``version``'s cache does not hold yet.

    A binary counts only once versions.json records it: the stamp is written after the files,
    so a binary left behind by an interrupted build is built again.
    """
    recorded = _read_stamp(version).get("binaries")
    if not isinstance(recorded, dict):
        # Stamps written before kube-scheduler was added list no binaries: they cover these two.
        recorded = {"kube-apiserver": 1, "etcd": 1} if _read_stamp(version) else {}
    directory = bin_dir(version)
    return [name for name in PACKAGES if name not in recorded or not (directory / name).is_file()]


def _existing_binaries(version: str) -> Binaries | None:
    """The cached binaries of ``version`` if previous builds published every one of them."""
    if missing_binaries(version):
        return None
    directory = bin_dir(version)
    versions = _read_stamp(version)
    return Binaries(
        kubernetes_version=str(versions["kubernetes"]),
        etcd_version=str(versions["etcd"]),
        kube_apiserver=directory / "kube-apiserver",
        etcd=directory / "etcd",
        kube_scheduler=directory / "kube-scheduler",
    )


def _go_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for every go invocation: static, reproducible, independent of the caller."""
    env = dict(os.environ)
    cpus = str(os.cpu_count() or 1)
    env.update(
        {
            # -mod=mod lets `go build` complete go.mod/go.sum of the wrapper itself.
            # -buildvcs=false: the cache may sit inside some git checkout; its state is irrelevant.
            "GOFLAGS": "-mod=mod -buildvcs=false",
            # Static binaries: no C toolchain needed, and they run on any Linux of this arch.
            "CGO_ENABLED": "0",
            # An outer go.work (e.g. in $HOME) must not pull other modules into this build.
            "GOWORK": "off",
        }
    )
    # The compiler parallelises over GOMAXPROCS; use every core unless the caller capped it.
    env.setdefault("GOMAXPROCS", cpus)
    if extra:
        env.update(extra)
    return env


def _find_go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "the Go toolchain (`go`) is not on PATH; it is needed once to build kube-apiserver "
            "and etcd for the e2e tests (Go >= 1.26, see the go directive of k8s.io/kubernetes)"
        )
    return go


def _run_go(args: list[str], cwd: Path, what: str) -> str:
    """Run a short go command, returning stdout; raise BuildError with its stderr on failure."""
    proc = subprocess.run(
        [_find_go(), *args],
        cwd=cwd,
        env=_go_env({"GOFLAGS": "-buildvcs=false"}),
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        # `go mod download -json` reports its error inside the JSON on stdout, not on stderr.
        details = proc.stderr.strip()
        with contextlib.suppress(ValueError):
            details = "\n".join(filter(None, [details, json.loads(proc.stdout).get("Error", "")]))
        details = details or proc.stdout.strip()
        raise BuildError(f"{what} failed (go {' '.join(args)}):\n{details}")
    return proc.stdout


def read_release(version: str, workdir: Path) -> ReleaseInfo:
    """Download ``k8s.io/kubernetes@version`` and read what the wrapper needs from its go.mod."""
    out = _run_go(
        ["mod", "download", "-json", f"{KUBERNETES_MODULE}@{version}"],
        cwd=workdir,
        what=f"downloading {KUBERNETES_MODULE}@{version}",
    )
    info = json.loads(out)
    if info.get("Error"):
        raise BuildError(f"downloading {KUBERNETES_MODULE}@{version} failed: {info['Error']}")
    gomod = Path(info["GoMod"]).read_text()
    commit_time = ""
    if info.get("Info"):
        commit_time = json.loads(Path(info["Info"]).read_text()).get("Time", "")
    return parse_release_gomod(version, gomod, commit_time)


def parse_release_gomod(version: str, gomod: str, commit_time: str = "") -> ReleaseInfo:
    """Extract staging replacements, the etcd version and toolchain settings from a go.mod."""
    go_match = re.search(r"^go\s+(\S+)\s*$", gomod, re.M)
    if not go_match:
        raise BuildError(f"{KUBERNETES_MODULE}@{version}: go.mod has no go directive")
    godebug = tuple(re.findall(r"^godebug\s+(\S+)\s*$", gomod, re.M))

    # Replace directives appear both as `replace a => b` and inside `replace ( ... )` blocks.
    replace_lines: list[str] = re.findall(r"^replace\s+([^(\s].*)$", gomod, re.M)
    for block in re.findall(r"^replace\s*\(\s*\n(.*?)^\)", gomod, re.M | re.S):
        replace_lines.extend(block.splitlines())
    staging: list[str] = []
    for line in replace_lines:
        line = line.split("//", 1)[0].strip()
        parts = re.fullmatch(r"(\S+)(?:\s+\S+)?\s*=>\s*(\S+)(?:\s+\S+)?", line)
        if parts and parts.group(2).startswith("./staging/"):
            staging.append(parts.group(1))
    if not staging:
        raise BuildError(
            f"{KUBERNETES_MODULE}@{version}: found no `=> ./staging/...` replace directives in "
            "its go.mod; the wrapper module would not build"
        )

    etcd_match = re.search(rf"^\s*(?:require\s+)?{re.escape(ETCD_SERVER_MODULE)}\s+(v\S+)", gomod, re.M)
    if not etcd_match:
        raise BuildError(f"{KUBERNETES_MODULE}@{version}: go.mod does not require {ETCD_SERVER_MODULE}")

    return ReleaseInfo(
        kubernetes_version=version,
        go_directive=go_match.group(1),
        godebug=godebug,
        staging_modules=tuple(sorted(set(staging))),
        etcd_version=etcd_match.group(1),
        commit_time=commit_time,
    )


def wrapper_gomod(release: ReleaseInfo) -> str:
    """The go.mod of the wrapper module that builds both binaries."""
    staging = staging_version(release.kubernetes_version)
    lines = [
        "// Generated by clueue's tests/testenv/build.py; safe to delete (it is rebuilt).",
        "module clueue.invalid/testenv",
        "",
        f"go {release.go_directive}",
        "",
    ]
    # Kubernetes' runtime behaviour depends on its godebug settings, which only apply when they
    # are in the *main* module's go.mod; carry them over so the binary behaves as released.
    lines += [f"godebug {setting}" for setting in release.godebug]
    lines += [
        "",
        "require (",
        f"\t{KUBERNETES_MODULE} {release.kubernetes_version}",
        f"\t{ETCD_SERVER_MODULE} {release.etcd_version}",
        ")",
        "",
        "replace (",
    ]
    lines += [f"\t{module} => {module} {staging}" for module in release.staging_modules]
    lines += [")", ""]
    return "\n".join(lines)


def _ldflags(release: ReleaseInfo) -> str:
    """Linker flags: strip symbols, and stamp the version the way Kubernetes' own build does.

    Without the stamp, /version reports v0.0.0-master; with it, clients (and clueue's adapters)
    see the real release.
    """
    major, minor = release.kubernetes_version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {pkg}.gitVersion={release.kubernetes_version}",
            f"-X {pkg}.gitMajor={major}",
            f"-X {pkg}.gitMinor={minor}",
            f"-X {pkg}.gitTreeState=clean",
        ]
        if release.commit_time:
            flags.append(f"-X {pkg}.buildDate={release.commit_time}")
    return " ".join(flags)


def _go_output_name(package: str) -> str:
    """The file name `go build -o DIR/ PKG` gives a package (a /vN suffix is dropped)."""
    parts = package.split("/")
    if len(parts) > 1 and re.fullmatch(r"v\d+", parts[-1]):
        return parts[-2]
    return parts[-1]


@contextlib.contextmanager
def _build_lock(version: str, progress: Progress) -> Iterator[None]:
    """Hold an exclusive lock so concurrent test runs on this machine build only once."""
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    lock_path = root / f"{version}.lock"
    with open(lock_path, "w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"clueue testenv: another process is building {version} ({lock_path}); waiting for it")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _compile(
    release: ReleaseInfo,
    packages: list[str],
    srcdir: Path,
    outdir: Path,
    log_path: Path,
    progress: Progress,
) -> None:
    """Run one `go build` for ``packages`` (shared packages compile once), reporting progress."""
    cmd = [
        _find_go(),
        "build",
        "-v",  # one line per compiled package on stderr: our progress signal
        "-trimpath",
        f"-ldflags={_ldflags(release)}",
        "-o",
        str(outdir) + os.sep,
        *packages,
    ]
    started = time.monotonic()
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(
            cmd,
            cwd=srcdir,
            env=_go_env(),
            stdout=log,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert proc.stderr is not None
        lines = 0
        done = threading.Event()

        def heartbeat() -> None:
            # A first build takes minutes (about 5 on 2 cores); say something every 30 s so that
            # a waiting test session (or a person) can see it is alive.
            while not done.wait(30):
                minutes, seconds = divmod(int(time.monotonic() - started), 60)
                progress(f"  ... still building: {lines} packages compiled ({minutes}m{seconds:02d}s)")

        ticker = threading.Thread(target=heartbeat, daemon=True)
        ticker.start()
        try:
            for line in proc.stderr:
                log.write(line)
                if line.startswith("go: downloading"):
                    progress("  " + line.rstrip())
                else:
                    lines += 1
            code = proc.wait()
        finally:
            done.set()
            ticker.join()
    if code != 0:
        tail = log_path.read_text().splitlines()[-60:]
        # Keep the error itself (go prints it last), not the list of compiled packages.
        errors = [line for line in tail if not re.fullmatch(r"[\w.\-/]+", line.strip())]
        raise BuildError(f"go build failed with exit code {code} (full log: {log_path}):\n" + "\n".join(errors or tail))
    minutes, seconds = divmod(int(time.monotonic() - started), 60)
    compiled = f"compiled {lines} packages" if lines else "linked (all packages were in Go's build cache)"
    progress(f"  {compiled} in {minutes}m{seconds:02d}s")


def build(
    version: str = KUBERNETES_VERSION,
    progress: Progress = print,
    names: list[str] | None = None,
) -> Binaries:
    """Build ``names`` (default: every binary) for ``version`` (under the lock) and publish them.

    Each binary is moved into bin/ in one rename and versions.json is rewritten last, so a
    reader never sees a half-written binary, nor a stamp naming a binary that is not there.
    """
    names = list(PACKAGES) if names is None else names
    unknown = sorted(set(names) - set(PACKAGES))
    if unknown:
        raise BuildError(f"unknown testenv binaries {unknown}; known: {sorted(PACKAGES)}")
    vdir = version_dir(version)
    vdir.mkdir(parents=True, exist_ok=True)
    srcdir = vdir / "src"
    srcdir.mkdir(exist_ok=True)

    progress(f"clueue testenv: reading {KUBERNETES_MODULE}@{version} from the Go module proxy")
    release = read_release(version, srcdir)
    progress(
        f"clueue testenv: building {', '.join(names)} ({version}, etcd {release.etcd_version}; "
        f"{len(release.staging_modules)} staging modules at {staging_version(version)}) "
        f"into {bin_dir(version)}; a first build of all three takes about 6-10 minutes on 2 cores"
    )
    # Start from a fresh go.mod/go.sum each time: -mod=mod fills in the rest deterministically.
    (srcdir / "go.mod").write_text(wrapper_gomod(release))
    (srcdir / "go.sum").unlink(missing_ok=True)

    # Build into a temporary directory next to bin/ (same filesystem), so the renames into bin/
    # are atomic.
    staging_dir = Path(tempfile.mkdtemp(prefix="bin-", dir=vdir))
    staging_dir.chmod(0o755)  # mkdtemp makes it private; the binaries are for every user
    try:
        _compile(release, [PACKAGES[name] for name in names], srcdir, staging_dir, vdir / "build.log", progress)
        final = bin_dir(version)
        final.mkdir(exist_ok=True)
        final.chmod(0o755)
        for name in names:
            produced = staging_dir / _go_output_name(PACKAGES[name])
            if not produced.is_file():
                raise BuildError(f"go build succeeded but produced no {name} binary in {staging_dir}")
            # os.replace keeps running copies of an older binary intact (they hold the old inode).
            os.replace(produced, final / name)
        stamp = _read_stamp(version) if set(names) != set(PACKAGES) else {}
        recorded = stamp.get("binaries")
        binaries = dict(recorded) if isinstance(recorded, dict) else {}
        if stamp and not binaries:
            binaries = {"kube-apiserver": version, "etcd": str(stamp.get("etcd", ""))}
        binaries.update({name: release.etcd_version if name == "etcd" else version for name in names})
        (staging_dir / "versions.json").write_text(
            json.dumps({"kubernetes": version, "etcd": release.etcd_version, "binaries": binaries}, indent=2) + "\n"
        )
        os.replace(staging_dir / "versions.json", final / "versions.json")
    finally:
        shutil.rmtree(staging_dir, ignore_errors=True)

    result = _existing_binaries(version)
    if result is None:
        raise BuildError(f"{bin_dir(version)} still lacks {missing_binaries(version)} after the build")
    return result


def ensure_binaries(version: str = KUBERNETES_VERSION, progress: Progress = print) -> Binaries:
    """Return the cached binaries of ``version``, building first the ones that are missing.

    Safe to call from concurrent processes: the first one builds while the others wait on the
    lock and then find the finished binaries.
    """
    existing = _existing_binaries(version)
    if existing is not None:
        return existing
    with _build_lock(version, progress):
        missing = missing_binaries(version)  # another process may have built some meanwhile
        if not missing:
            result = _existing_binaries(version)
            assert result is not None
            return result
        return build(version, progress, missing)


def main(argv: list[str] | None = None) -> int:
    """Command line: build what is missing (or everything with --force) and print the paths."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--version", default=KUBERNETES_VERSION, help="Kubernetes release (default: %(default)s)")
    parser.add_argument("--force", action="store_true", help="rebuild even if the binaries exist")
    args = parser.parse_args(argv)

    def say(message: str) -> None:
        print(message, flush=True)

    started = time.monotonic()
    try:
        if args.force:
            with _build_lock(args.version, say):
                binaries = build(args.version, say)
        else:
            binaries = ensure_binaries(args.version, say)
    except BuildError as error:
        print(f"clueue testenv: build failed: {error}", file=sys.stderr, flush=True)
        return 1
    # Kueue's released tools (tools.py), which the e2e tests run against clueue: built here too,
    # so that CI builds everything up front rather than inside a test.
    if not __package__:  # run as a script: the repository root makes tests.testenv importable
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.testenv.tools import TOOLS, ensure_tool

    try:
        tools = [f"{name} {tool.version} at {ensure_tool(tool, say)}" for name, tool in TOOLS.items()]
    except BuildError as error:
        print(f"clueue testenv: build failed: {error}", file=sys.stderr, flush=True)
        return 1
    say(
        f"clueue testenv: ready in {time.monotonic() - started:.0f}s: "
        f"kube-apiserver {binaries.kubernetes_version} at {binaries.kube_apiserver}, "
        f"kube-scheduler at {binaries.kube_scheduler}, "
        f"etcd {binaries.etcd_version} at {binaries.etcd}; " + ", ".join(tools)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
