"""Run a real etcd + kube-apiserver on loopback for end-to-end tests.

:class:`ControlPlane` starts both processes in a private temporary directory:

- certificates are generated on the fly (a CA, a serving certificate for 127.0.0.1/localhost,
  and a client certificate for an admin in group ``system:masters``), plus a service-account
  signing key pair;
- both processes listen on free ports of 127.0.0.1 only, each in its own process group, and
  are killed with their group on :meth:`ControlPlane.stop` (also registered with ``atexit``,
  and the kernel kills them if the Python process dies first: see ``_die_with_parent``);
- a kubeconfig for the admin is written next to the certificates;
- clueue's CRDs are installed and waited for until they are ``Established``.

Several control planes run side by side (a MultiKueue manager and its workers): each has its
own directory, certificates and ports.  :meth:`ControlPlane.stop_apiserver` takes one out of
reach (etcd keeps its data) and :meth:`ControlPlane.restart_apiserver` brings it back.

With ``scheduler=True`` a kube-scheduler of the same release runs too (leader election off,
the admin's kubeconfig), started once the apiserver is ready and stopped with the plane.  Tests
then give the cluster nodes by creating Node objects as a kubelet would register them
(:meth:`ControlPlane.create_node`); the scheduler binds Pods to them.

With ``aggregation=True`` the apiserver is given a front proxy (its CA and client certificate,
the ``--requestheader-*`` and ``--proxy-client-*`` flags), so that it proxies the APIs of
aggregated API servers registered by APIServices; an APIService whose Service is of type
ExternalName (e.g. ``127.0.0.1``) reaches a server on loopback without kube-proxy.

There is no kube-controller-manager and no kubelet (and no scheduler unless asked for).  Consequences that tests must
know about: namespaces other than ``default``, ``kube-system``, ``kube-public`` and
``kube-node-lease`` have to be created explicitly (:meth:`ControlPlane.create_namespace`), they
never finish deleting, no ServiceAccount is created in them (so the ServiceAccount admission
plugin is disabled, or every Pod creation would be refused), and Pods stay ``Pending`` (bound
ones too) until a test sets their phase through the status subresource.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import datetime
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, cast

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.testenv.build import Binaries, Progress

__all__ = [
    "ADMIN_GROUP",
    "ADMIN_USER",
    "DEFAULT_CRD_DIR",
    "FRONT_PROXY_CLIENT",
    "Certificates",
    "FrontProxy",
    "ControlPlane",
    "ControlPlaneError",
    "api_error_message",
]

#: clueue's CRDs, one YAML file per kind.
DEFAULT_CRD_DIR = Path(__file__).resolve().parents[2] / "adapters" / "crds"

#: Service network handed to the apiserver; it allocates ClusterIPs from it (nothing routes it).
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"

#: Admin identity of the generated client certificate.  ``system:masters`` bypasses RBAC
#: entirely, which is what a test harness wants while RBAC stays on for everybody else.
ADMIN_USER = "clueue-e2e-admin"
ADMIN_GROUP = "system:masters"

#: How long to wait for a process to become ready or a CRD to become Established.  These bound
#: start-up on a slow, loaded machine; they are not assertions about speed.
STARTUP_TIMEOUT_S = 180.0

#: (group, version, plural) of CustomResourceDefinitions, for the generic custom-objects API.
_CRD_RESOURCE = ("apiextensions.k8s.io", "v1", "customresourcedefinitions")


class ControlPlaneError(RuntimeError):
    """etcd or kube-apiserver did not start, or the CRDs did not install."""


# --------------------------------------------------------------------------------------------
# Certificates
# --------------------------------------------------------------------------------------------


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _certificate(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Name,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    is_ca: bool,
    usages: Iterable[x509.ObjectIdentifier] = (),
    sans: Iterable[x509.GeneralName] = (),
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        # Backdate a little: etcd/apiserver and this process read the same clock, but a cert
        # that becomes valid "now" can be rejected by a verifier that rounds down.
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=7))
        .add_extension(x509.BasicConstraints(ca=is_ca, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=not is_ca,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=is_ca,
                crl_sign=is_ca,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
    )
    usages = list(usages)
    if usages:
        builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    sans = list(sans)
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _new_key() -> ec.EllipticCurvePrivateKey:
    # P-256 keys: generated in microseconds, accepted by Go's TLS stack and by OpenSSL.
    return ec.generate_private_key(ec.SECP256R1())


def _common_name(name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])


@dataclass(frozen=True)
class _Ca:
    """A self-signed certificate authority, and the certificates it issues."""

    name: x509.Name
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def new(cls, common_name: str) -> _Ca:
        key, name = _new_key(), _common_name(common_name)
        return cls(name, key, _certificate(name, key, name, key, is_ca=True))

    def issue(self, subject: x509.Name, usage: x509.ObjectIdentifier, sans: Iterable[x509.GeneralName] = ()
              ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        """A fresh key and its certificate for ``subject``, for ``usage`` (server or client auth)."""
        key = _new_key()
        return key, _certificate(subject, key, self.name, self.key, is_ca=False, usages=[usage], sans=sans)


def _write_private(directory: Path, name: str, data: bytes) -> Path:
    """``data`` written to ``directory/name``, readable by this user only."""
    path = directory / name
    path.write_bytes(data)
    path.chmod(0o600)
    return path


@dataclass(frozen=True)
class Certificates:
    """PEM files of one control plane, all under ``directory``."""

    directory: Path
    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    service_account_key: Path
    service_account_pub: Path

    @classmethod
    def generate(cls, directory: Path) -> Certificates:
        """Create a fresh CA, serving and admin certificates, and service-account keys."""
        directory.mkdir(parents=True, exist_ok=True)
        ca = _Ca.new("clueue-e2e-ca")
        first_service_ip = next(ipaddress.IPv4Network(SERVICE_CLUSTER_IP_RANGE).hosts())
        serving_key, serving = ca.issue(
            _common_name("kube-apiserver"),
            ExtendedKeyUsageOID.SERVER_AUTH,
            sans=[
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                x509.IPAddress(first_service_ip),  # the in-cluster `kubernetes` Service
                x509.DNSName("localhost"),
                x509.DNSName("kubernetes"),
                x509.DNSName("kubernetes.default"),
                x509.DNSName("kubernetes.default.svc"),
            ],
        )

        admin_key, admin = ca.issue(
            x509.Name(
                [
                    # The apiserver maps O to groups and CN to the user name.
                    x509.NameAttribute(NameOID.ORGANIZATION_NAME, ADMIN_GROUP),
                    x509.NameAttribute(NameOID.COMMON_NAME, ADMIN_USER),
                ]
            ),
            ExtendedKeyUsageOID.CLIENT_AUTH,
        )

        # Service-account tokens are signed with RSA: every Kubernetes client verifies RS256.
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)

        def write(name: str, data: bytes) -> Path:
            return _write_private(directory, name, data)

        pem = serialization.Encoding.PEM
        return cls(
            directory=directory,
            ca_cert=write("ca.crt", ca.cert.public_bytes(pem)),
            serving_cert=write("apiserver.crt", serving.public_bytes(pem)),
            serving_key=write("apiserver.key", _pem_key(serving_key)),
            admin_cert=write("admin.crt", admin.public_bytes(pem)),
            admin_key=write("admin.key", _pem_key(admin_key)),
            service_account_key=write("sa.key", _pem_key(sa_key)),
            service_account_pub=write(
                "sa.pub",
                sa_key.public_key().public_bytes(pem, serialization.PublicFormat.SubjectPublicKeyInfo),
            ),
        )


def serving_certificate_files(directory: Path, host: str = "127.0.0.1") -> bytes:
    """A fresh CA and a serving certificate for the address ``host`` that it signs, as
    cert-manager provides them: ``tls.crt``, ``tls.key`` and ``ca.crt`` in ``directory``.
    Returns the CA's PEM (a caBundle)."""
    ca = _Ca.new("clueue-e2e-serving-ca")
    key, serving = ca.issue(_common_name(host), ExtendedKeyUsageOID.SERVER_AUTH,
                            sans=[x509.IPAddress(ipaddress.ip_address(host))])
    pem = serialization.Encoding.PEM
    _write_private(directory, "tls.crt", serving.public_bytes(pem))
    _write_private(directory, "tls.key", _pem_key(key))
    return _write_private(directory, "ca.crt", ca.cert.public_bytes(pem)).read_bytes()


#: The common name of the front proxy's client certificate: the one name the API server's
#: aggregation layer presents to aggregated API servers (``--requestheader-allowed-names``).
FRONT_PROXY_CLIENT = "front-proxy-client"


@dataclass(frozen=True)
class FrontProxy:
    """PEM files of the aggregation layer's front proxy: its CA (``--requestheader-client-ca-file``)
    and the client certificate the API server proxies with (``--proxy-client-cert-file``)."""

    ca_cert: Path
    client_cert: Path
    client_key: Path

    @classmethod
    def generate(cls, directory: Path) -> FrontProxy:
        """A fresh front-proxy CA (apart from the cluster's CA, as Kubernetes recommends) and client."""
        directory.mkdir(parents=True, exist_ok=True)
        ca = _Ca.new("clueue-e2e-front-proxy-ca")
        client_key, client = ca.issue(_common_name(FRONT_PROXY_CLIENT), ExtendedKeyUsageOID.CLIENT_AUTH)
        pem = serialization.Encoding.PEM
        return cls(ca_cert=_write_private(directory, "front-proxy-ca.crt", ca.cert.public_bytes(pem)),
                   client_cert=_write_private(directory, "front-proxy-client.crt", client.public_bytes(pem)),
                   client_key=_write_private(directory, "front-proxy-client.key", _pem_key(client_key)))

    def apiserver_args(self) -> list[str]:
        """The flags that let kube-apiserver proxy to aggregated API servers, with the headers
        every Kubernetes distribution configures."""
        return [
            f"--requestheader-client-ca-file={self.ca_cert}",
            f"--requestheader-allowed-names={FRONT_PROXY_CLIENT}",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            "--requestheader-uid-headers=X-Remote-Uid",
            f"--proxy-client-cert-file={self.client_cert}",
            f"--proxy-client-key-file={self.client_key}",
        ]


# --------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------


def _free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago (start-up retries cover the small race)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` itself holds a listening TCP socket on ``port`` (Linux /proc).

    A health check alone cannot tell our etcd from another test run's etcd that took the port
    between :func:`_free_port` and our bind: the socket's inode, found among our process's file
    descriptors, can.
    """
    listening: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as handle:
            next(handle)  # header
            for line in handle:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    listening.add(f"socket:[{inode}]")
    if not listening:
        return False
    fd_dir = Path(f"/proc/{pid}/fd")
    with contextlib.suppress(OSError):
        for fd in fd_dir.iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd) in listening:
                    return True
    return False


def _die_with_parent() -> None:
    """In the child, before exec: ask Linux to SIGKILL us when the test process dies.

    ``stop()`` and ``atexit`` cover normal exits, exceptions and Ctrl-C; this covers the test
    process being killed outright, so no etcd or apiserver is ever left running.
    """
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


class _Process:
    """One child process in its own process group, with its output in a log file."""

    def __init__(self, name: str, argv: list[str], log_path: Path) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        # The child gets its own copy of the file descriptor; ours can be closed right away.
        with open(log_path, "ab") as log:
            self.popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                # Own session => own process group, so stop() can kill the group, and Ctrl-C in
                # the terminal reaches only the test process (which then stops us in order).
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace_s: float = 10.0) -> None:
        """SIGTERM the process group, wait for it, then SIGKILL it if it is still there."""
        # Signal the group only while its leader is not reaped: until then its id cannot be
        # reused, so the signal can never reach an unrelated process.  (Neither etcd nor
        # kube-apiserver starts children, so the leader is the whole group.)
        if self.popen.poll() is not None:
            return
        pgid = self.popen.pid  # session leader: its pid is the group id
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
        self.popen.wait()


def _wait_until(
    check: Callable[[], bool],
    process: _Process,
    what: str,
    timeout_s: float = STARTUP_TIMEOUT_S,
) -> None:
    """Poll ``check`` until it is true; fail early with the log if the process exits."""
    deadline = time.monotonic() + timeout_s
    delay = 0.05
    while True:
        if not process.alive():
            raise ControlPlaneError(
                f"{process.name} exited with code {process.popen.returncode} while waiting for "
                f"{what}; last log lines ({process.log_path}):\n{process.log_tail()}"
            )
        if check():
            return
        if time.monotonic() > deadline:
            raise ControlPlaneError(
                f"{process.name}: {what} not reached within {timeout_s:.0f}s; last log lines "
                f"({process.log_path}):\n{process.log_tail()}"
            )
        time.sleep(delay)
        delay = min(delay * 1.5, 0.5)


def _http_ok(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _start_on_free_port(
    name: str,
    argv_for: Callable[[int], list[str]],
    log_path: Path,
    ready_url: Callable[[int], str],
    context: ssl.SSLContext,
) -> tuple[_Process, int]:
    """Start ``argv_for(port)`` on a free port and wait until it listens there and
    ``ready_url(port)`` answers 200; pick another port (3 tries) if another process won the race."""
    for attempt in range(3):
        port = _free_port()
        process = _Process(name, argv_for(port), log_path)
        url = ready_url(port)

        def ready(process: _Process = process, port: int = port, url: str = url) -> bool:
            # The listener check fails fast when another process holds the port.
            return _listens_on(process.popen.pid, port) and _http_ok(url, context)

        try:
            _wait_until(ready, process, f"{name} listening and {url} ok")
        except ControlPlaneError:
            process.stop()
            if attempt == 2 or "address already in use" not in process.log_tail():
                raise
            continue
        return process, port
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------------------------
# The control plane
# --------------------------------------------------------------------------------------------


class ControlPlane:
    """etcd + kube-apiserver on loopback, with clueue's CRDs installed.

    Use as a context manager, or call :meth:`start` and :meth:`stop`::

        with ControlPlane(ensure_binaries()) as kube:
            core = kubernetes.client.CoreV1Api(kube.api_client())
    """

    def __init__(
        self,
        binaries: Binaries,
        *,
        crd_dir: Path | None = DEFAULT_CRD_DIR,
        workdir: Path | None = None,
        keep_workdir: bool = False,
        extra_apiserver_args: Iterable[str] = (),
        scheduler: bool = False,
        aggregation: bool = False,
        progress: Progress | None = None,
    ) -> None:
        """Prepare (but do not start) a control plane.

        ``crd_dir``: YAML files to install after start (None installs nothing).
        ``workdir``: where certificates, data and logs go (default: a new temporary directory,
        removed on stop unless ``keep_workdir``).
        ``scheduler``: also run kube-scheduler against the apiserver.
        ``aggregation``: configure the aggregation layer's front proxy (:class:`FrontProxy`,
        then :attr:`front_proxy`), so that APIServices backed by a Service are proxied to.
        """
        self.binaries = binaries
        self.crd_dir = crd_dir
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="clueue-kube-"))
        self.keep_workdir = keep_workdir
        self.extra_apiserver_args = list(extra_apiserver_args)
        self._progress = progress or (lambda message: None)
        self._etcd: _Process | None = None
        self._apiserver: _Process | None = None
        self.scheduler = scheduler
        self._scheduler: _Process | None = None
        self._certs: Certificates | None = None
        self.aggregation = aggregation
        self.front_proxy: FrontProxy | None = None
        self.server: str = ""  # https://127.0.0.1:<port> once started
        self.etcd_url: str = ""  # http://127.0.0.1:<port> once started
        self.kubeconfig: Path = self.workdir / "kubeconfig"
        self.installed_crds: list[str] = []

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        """Start etcd and kube-apiserver, write the kubeconfig and install the CRDs."""
        atexit.register(self.stop)
        try:
            self._certs = Certificates.generate(self.workdir / "pki")
            if self.aggregation:
                self.front_proxy = FrontProxy.generate(self.workdir / "pki")
            self._start_etcd()
            self._start_apiserver()
            self._write_kubeconfig()
            if self.scheduler:
                self._start_scheduler()
            if self.crd_dir is not None:
                self.install_crds(self.crd_dir)
        except ControlPlaneError as error:
            # Keep the logs of a failed start (and say where they are); stop the processes.
            logs = self._log_tails()
            self.stop(keep_workdir=True)
            raise ControlPlaneError(f"{error}\n\n{logs}\n(kept for inspection: {self.workdir})") from None
        except BaseException:
            # Includes KeyboardInterrupt: never leave half a control plane running.
            self.stop()
            raise
        return self

    def _log_tails(self, lines: int = 15) -> str:
        parts = []
        for process in (self._etcd, self._apiserver, self._scheduler):
            if process is not None:
                parts.append(f"last lines of {process.log_path}:\n{process.log_tail(lines)}")
        return "\n\n".join(parts)

    def stop(self, *, keep_workdir: bool = False) -> None:
        """Kill the process groups (scheduler, apiserver, etcd) and remove the working directory."""
        for process in (self._scheduler, self._apiserver, self._etcd):
            if process is not None:
                process.stop()
        self._scheduler = self._apiserver = self._etcd = None
        if self._own_workdir and not (self.keep_workdir or keep_workdir):
            shutil.rmtree(self.workdir, ignore_errors=True)
        atexit.unregister(self.stop)

    def stop_apiserver(self) -> None:
        """Stop kube-apiserver alone (etcd keeps the data): the cluster stops answering, as a
        worker cluster out of reach does, until :meth:`restart_apiserver`."""
        if self._apiserver is not None:
            self._apiserver.stop()
            self._apiserver = None

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver and start it again over the same etcd (the data stays), as a
        cluster's apiserver restarts; it listens on a new port, and the kubeconfig is rewritten.
        A running kube-scheduler is restarted too, as it only knows the old port.

        Call it from the main thread: the new apiserver dies with the thread that started it
        (see ``_die_with_parent``)."""
        self.stop_apiserver()
        self._start_apiserver()
        self._write_kubeconfig()
        if self._scheduler is not None:
            self._scheduler.stop()
            self._scheduler = None
            self._start_scheduler()

    def _start_etcd(self) -> None:
        for attempt in range(3):
            client_port, peer_port = _free_port(), _free_port()
            client_url = f"http://127.0.0.1:{client_port}"
            peer_url = f"http://127.0.0.1:{peer_port}"
            data_dir = self.workdir / "etcd"
            shutil.rmtree(data_dir, ignore_errors=True)
            argv = [
                str(self.binaries.etcd),
                "--name=clueue-e2e",
                f"--data-dir={data_dir}",
                f"--listen-client-urls={client_url}",
                f"--advertise-client-urls={client_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=clueue-e2e={peer_url}",
                "--initial-cluster-state=new",
                # Test data is thrown away: skipping fsync makes every write cheap.
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ]
            self._progress(f"starting etcd {self.binaries.etcd_version} on {client_url}")
            process = _Process("etcd", argv, self.workdir / "etcd.log")
            health = f"{client_url}/health"

            def etcd_ready(process: _Process = process, port: int = client_port, url: str = health) -> bool:
                return _listens_on(process.popen.pid, port) and _http_ok(url)

            try:
                _wait_until(etcd_ready, process, "etcd listening and healthy")
            except ControlPlaneError:
                process.stop()
                if attempt == 2 or "address already in use" not in process.log_tail():
                    raise
                continue  # lost the port race to another process: pick new ports
            self._etcd = process
            self.etcd_url = client_url
            return

    def _start_apiserver(self) -> None:
        assert self._certs is not None
        certs = self._certs
        context = ssl.create_default_context(cafile=str(certs.ca_cert))
        context.load_cert_chain(str(certs.admin_cert), str(certs.admin_key))

        def argv(port: int) -> list[str]:
            self._progress(f"starting kube-apiserver {self.binaries.kubernetes_version} on 127.0.0.1:{port}")
            return [
                str(self.binaries.kube_apiserver),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / 'apiserver-certs'}",
                f"--tls-cert-file={certs.serving_cert}",
                f"--tls-private-key-file={certs.serving_key}",
                f"--client-ca-file={certs.ca_cert}",
                f"--service-account-key-file={certs.service_account_pub}",
                f"--service-account-signing-key-file={certs.service_account_key}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}",
                # RBAC stays on (clueue's least-privilege RBAC can be tested); the admin is in
                # system:masters and bypasses it.  Node authorizes kubelets, of which there are
                # none, but keeps the flag set the one real clusters use.
                "--authorization-mode=Node,RBAC",
                # No controller-manager creates the `default` ServiceAccount in namespaces, and
                # the ServiceAccount admission plugin would refuse every Pod without it.
                "--disable-admission-plugins=ServiceAccount",
                # One client, no contention: flow control only adds start-up work.
                "--enable-priority-and-fairness=false",
                "--allow-privileged=true",
                "--profiling=false",
                "--v=1",
                *(self.front_proxy.apiserver_args() if self.front_proxy is not None else ()),
                *self.extra_apiserver_args,
            ]

        # Our CA already proves identity over TLS; the listener check keeps the rule of etcd.
        self._apiserver, port = _start_on_free_port(
            "kube-apiserver", argv, self.workdir / "kube-apiserver.log",
            lambda port: f"https://127.0.0.1:{port}/readyz", context)
        self.server = f"https://127.0.0.1:{port}"

    def _start_scheduler(self) -> None:
        """Start kube-scheduler with the admin's kubeconfig and wait until its /readyz is ok.

        The admin identity (system:masters) stands in for system:kube-scheduler: RBAC is not
        what these tests are about.  Its /readyz turns ok once its informers have synced.
        """
        # The scheduler serves its health endpoints over TLS with a self-signed certificate.
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE

        def argv(port: int) -> list[str]:
            self._progress(f"starting kube-scheduler {self.binaries.kubernetes_version} (health on {port})")
            return [
                str(self.binaries.kube_scheduler),
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                # One scheduler: leader election would only delay its start by a lease period.
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.workdir / 'scheduler-certs'}",
                "--profiling=false",
                "--v=1",
            ]

        self._scheduler, _ = _start_on_free_port(
            "kube-scheduler", argv, self.workdir / "kube-scheduler.log",
            lambda port: f"https://127.0.0.1:{port}/readyz", insecure)

    def _write_kubeconfig(self) -> None:
        assert self._certs is not None

        def b64(path: Path) -> str:
            return base64.b64encode(path.read_bytes()).decode()

        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "clueue-e2e",
                    "cluster": {
                        "server": self.server,
                        "certificate-authority-data": b64(self._certs.ca_cert),
                    },
                }
            ],
            "users": [
                {
                    "name": ADMIN_USER,
                    "user": {
                        "client-certificate-data": b64(self._certs.admin_cert),
                        "client-key-data": b64(self._certs.admin_key),
                    },
                }
            ],
            "contexts": [{"name": "clueue-e2e", "context": {"cluster": "clueue-e2e", "user": ADMIN_USER}}],
            "current-context": "clueue-e2e",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config, sort_keys=False))
        self.kubeconfig.chmod(0o600)

    # -- clients and helpers -----------------------------------------------------------------

    def api_client(self) -> Any:
        """A new ``kubernetes.client.ApiClient`` authenticated as the admin."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]

    def install_crds(self, crd_dir: Path) -> list[str]:
        """Create every CustomResourceDefinition in ``crd_dir``/*.yaml and wait until Established."""
        from kubernetes import client

        files = sorted(Path(crd_dir).glob("*.yaml"))
        if not files:
            raise ControlPlaneError(f"no CRD files (*.yaml) in {crd_dir}")
        names: list[str] = []
        with self.api_client() as api:
            # The generic custom-objects API sends and returns plain dicts.  It is used for CRDs
            # too (they are just objects under /apis/apiextensions.k8s.io/v1), so the manifests
            # reach the apiserver as written, not re-serialised through the client's models.
            objects = client.CustomObjectsApi(api)
            for path in files:
                for document in yaml.safe_load_all(path.read_text()):
                    if not document:
                        continue
                    if document.get("kind") != "CustomResourceDefinition":
                        raise ControlPlaneError(f"{path}: not a CustomResourceDefinition")
                    try:
                        objects.create_cluster_custom_object(*_CRD_RESOURCE, body=document)
                    except client.ApiException as error:
                        raise ControlPlaneError(
                            f"{path}: the apiserver refused the CRD: {error.status} {error.reason}\n"
                            f"{api_error_message(error)}"
                        ) from error
                    names.append(document["metadata"]["name"])
            self._progress(f"installed {len(names)} CRDs, waiting until they are Established")
            for name in names:
                self._wait_established(objects, name)
        self.installed_crds.extend(names)
        return names

    def _wait_established(self, objects: Any, name: str) -> None:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            crd = objects.get_cluster_custom_object(*_CRD_RESOURCE, name)
            # Right after the create the status may hold `conditions: null`.
            conditions = {c["type"]: c for c in (crd.get("status") or {}).get("conditions") or []}
            if conditions.get("Established", {}).get("status") == "True":
                return
            names_accepted = conditions.get("NamesAccepted", {})
            if names_accepted.get("status") == "False":
                raise ControlPlaneError(f"CRD {name}: names not accepted: {names_accepted.get('message')}")
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"CRD {name} not Established: {json.dumps(conditions)}")
            time.sleep(0.1)

    def create_namespace(self, name: str, labels: dict[str, str] | None = None) -> None:
        """Create a namespace (there is no controller-manager, so nothing else will)."""
        from kubernetes import client

        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}
        with self.api_client() as api:
            try:
                # A dict body goes through every supported client version unchanged.
                client.CoreV1Api(api).create_namespace(body=cast(Any, body))
            except client.ApiException as error:
                if error.status != 409:  # already exists: fine, tests may share namespaces
                    raise

    def create_node(
        self,
        name: str,
        allocatable: dict[str, str],
        *,
        labels: dict[str, str] | None = None,
        taints: list[dict[str, str]] | None = None,
    ) -> None:
        """Register a Node the way a kubelet would: the object, then its status (Ready, with
        ``allocatable`` as both capacity and allocatable, e.g. ``{"cpu": "32", "nvidia.com/gpu":
        "8"}``).  No kubelet runs: Pods bound to it stay Pending until a test sets their phase.

        ``labels`` come on top of ``kubernetes.io/hostname=<name>``, which the scheduler and
        clueue's placement pin pods by.
        """
        from kubernetes import client

        node_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})}
        body = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": node_labels},
        }
        now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        # The apiserver drops the status of a created Node; a kubelet writes it afterwards.
        status = {
            "status": {
                "capacity": {"pods": "110", **allocatable},
                "allocatable": {"pods": "110", **allocatable},
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "registered by the clueue test harness",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ],
                "addresses": [{"type": "Hostname", "address": name}],
            }
        }
        with self.api_client() as api:
            core = client.CoreV1Api(api)
            core.create_node(body=cast(Any, body))
            core.patch_node_status(name, body=cast(Any, status))
            # Admission (TaintNodesByCondition) taints every new Node not-ready; the node
            # lifecycle controller of kube-controller-manager, which does not run here, would
            # lift it once the Node reports Ready.  Lift it as it would (the list is replaced).
            core.patch_node(name, body=cast(Any, {"spec": {"taints": taints or []}}))

    def get_json(self, path: str, accept: str = "application/json") -> dict[str, Any]:
        """GET ``path`` as the admin with plain HTTPS and decode the JSON answer.

        For what the typed client does not cover, e.g. the Table view that ``kubectl get``
        prints (``accept="application/json;as=Table;v=v1;g=meta.k8s.io"``).
        """
        assert self._certs is not None, "control plane not started"
        context = ssl.create_default_context(cafile=str(self._certs.ca_cert))
        context.load_cert_chain(str(self._certs.admin_cert), str(self._certs.admin_key))
        request = urllib.request.Request(self.server + path, headers={"Accept": accept})
        with urllib.request.urlopen(request, timeout=30, context=context) as response:
            return dict(json.loads(response.read()))

    def scheduler_log(self) -> Path:
        """Path of the kube-scheduler log (useful in assertion messages)."""
        return self.workdir / "kube-scheduler.log"

    def apiserver_log(self) -> Path:
        """Path of the kube-apiserver log (useful in assertion messages)."""
        return self.workdir / "kube-apiserver.log"


def api_error_message(error: Any) -> str:
    """The human message inside an ApiException's Status body, or the exception text."""
    body = getattr(error, "body", None)
    if not body:
        return str(error)
    try:
        return str(json.loads(body).get("message", body))
    except (TypeError, ValueError):
        return str(body)
