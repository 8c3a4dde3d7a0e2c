"""The webhook's TLS certificates: self-managed in a Secret, or provided in a directory.

Self-managed (the default): :class:`CertManager` keeps a CA and a serving certificate in the
Secret ``clueue-webhook-tls`` of the controller's namespace, shared by every replica, writes the
pair the server reads to a local directory, and patches the CA into the ``caBundle`` of clueue's
own webhook configurations (only those names). The serving certificate lasts a year and is
renewed 30 days before it expires (:meth:`CertManager.rotate_if_due`); the server reloads the
files without a restart. External (``--cert-dir``, e.g. cert-manager): :func:`cert_files`.
"""

from __future__ import annotations

import base64
import ipaddress
import logging
import os
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from clueue.adapters.kube.errors import describe_with_grant
from clueue.adapters.kube.retry import call, missing_is_none
from clueue.engine import AdapterError
from clueue.engine.config import Config

from .configuration import MUTATING_NAME, VALIDATING_NAME, update_configurations

__all__ = ["CertManager", "cert_files", "CERT_FILE", "KEY_FILE", "CA_VALIDITY", "SERVING_VALIDITY"]

log = logging.getLogger(__name__)

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
CA_VALIDITY = timedelta(days=3650)
SERVING_VALIDITY = timedelta(days=365)
#: Certificates start a little in the past: a peer whose clock lags must still accept them.
_BACKDATE = timedelta(minutes=5)
_KEYS = ("tls.crt", "tls.key", "ca.crt", "ca.key")


def cert_files(directory: Path) -> tuple[Path, Path]:
    """The serving certificate and key provided in ``directory`` (external mode, ``--cert-dir``).

    Raises:
        AdapterError: ``tls.crt`` or ``tls.key`` is missing there.
    """
    cert, key = Path(directory) / CERT_FILE, Path(directory) / KEY_FILE
    missing = [p.name for p in (cert, key) if not p.is_file()]
    if missing:
        raise AdapterError(f"--cert-dir {directory}: {' and '.join(missing)} not found; the directory must hold the "
                           "webhook's serving certificate and key as tls.crt and tls.key (a kubernetes.io/tls Secret "
                           "mounted there, e.g. from cert-manager), or leave --cert-dir out to let clueue manage them")
    return cert, key


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _expires(cert: x509.Certificate) -> datetime:
    return cert.not_valid_after_utc


def _new_ca(component: str = "webhook") -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key, now = _key(), _now()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"clueue-{component}-ca-{now:%Y%m%d%H%M%S}")])
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - _BACKDATE)
            .not_valid_after(now + CA_VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return cert, key


def _san(names: Sequence[str]) -> list[x509.GeneralName]:
    sans: list[x509.GeneralName] = []
    for n in names:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(n)))
        except ValueError:
            sans.append(x509.DNSName(n))
    return sans


def _new_serving(names: Sequence[str], ca: x509.Certificate,
                 ca_key: ec.EllipticCurvePrivateKey) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key, now = _key(), _now()
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - _BACKDATE).not_valid_after(min(now + SERVING_VALIDITY, _expires(ca)))
            .add_extension(x509.SubjectAlternativeName(_san(names)), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert, key


def _covers(cert: x509.Certificate, names: Sequence[str]) -> bool:
    try:
        present = set(cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value)
    except x509.ExtensionNotFound:
        return False
    return all(s in present for s in _san(names))


def _write(path: Path, data: bytes, mode: int) -> bool:
    """Write ``data`` to ``path`` atomically (the server may reload at any moment); False when
    it already holds them."""
    if path.is_file() and path.read_bytes() == data:
        return False
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return True


class CertManager:
    """The webhook's CA and serving certificate, kept in a Secret shared by the replicas.

    Parameters:
        api: a kubernetes ApiClient allowed to get/create/update Secrets in ``namespace`` and to
            get/update the named webhook configurations.
        namespace: the controller's namespace.
        service: the webhook's Service; the certificate names ``service``, ``service.ns``,
            ``service.ns.svc`` and ``service.ns.svc.cluster.local``.
        secret: the Secret holding ``tls.crt``, ``tls.key``, ``ca.crt`` and ``ca.key``.
        webhooks: names of the Mutating/ValidatingWebhookConfigurations whose ``caBundle`` is
            patched (only these).
        directory: where ``tls.crt`` and ``tls.key`` are written for the server.
        extra_sans: more DNS names or IP addresses for the certificate (e.g. ``127.0.0.1`` when
            the webhook is reached on loopback).
        config: when given, the webhook configurations' namespace and object selectors are
            set from it along with the caBundle (they must queue the Pods the engine queues).
        publish: called with the CA bundle instead of patching webhook configurations: another
            server's certificates (the visibility API's, whose APIServices carry the caBundle).
        component: the ``app.kubernetes.io/component`` label of the Secret, and the CA's name.
    """

    def __init__(self, api: client.ApiClient, namespace: str, service: str, secret: str = "clueue-webhook-tls",
                 webhooks: Sequence[str] = (MUTATING_NAME, VALIDATING_NAME), *, directory: Path,
                 extra_sans: Sequence[str] = (), config: Config | None = None,
                 publish: Callable[[bytes], None] | None = None, component: str = "webhook") -> None:
        self.api, self.namespace, self.service, self.secret = api, namespace, service, secret
        self.config, self.publish, self.component = config, publish, component
        self.webhooks = tuple(webhooks)
        self.directory = Path(directory)
        self.names = (f"{service}.{namespace}.svc", service, f"{service}.{namespace}",
                      f"{service}.{namespace}.svc.cluster.local", *extra_sans)
        self._core = client.CoreV1Api(api)
        self._admission = client.AdmissionregistrationV1Api(api)
        #: PEM of the CA (or CAs, during a CA rotation) that clients must trust.
        self.ca_bundle = b""

    @property
    def cert_file(self) -> Path:
        return self.directory / CERT_FILE

    @property
    def key_file(self) -> Path:
        return self.directory / KEY_FILE

    # -- public -----------------------------------------------------------------------------
    def ensure(self, *, patch: bool = True) -> tuple[Path, Path]:
        """Load the certificates from the Secret, or create them (and the Secret); write them to
        the directory and (``patch``) patch the caBundle of the webhook configurations; without
        ``patch`` the caller registers them with :attr:`ca_bundle` itself.

        Returns:
            the paths of ``tls.crt`` and ``tls.key``.

        Raises:
            AdapterError: the namespace does not exist, or a permission is missing.
        """
        data = self._read()
        if data is None:
            data = self._create(self._generate(None))
        elif not self._usable(data, timedelta(0)):
            data = self._replace(data, self._generate(data))
        self._use(data, patch=patch)
        return self.cert_file, self.key_file

    def rotate_if_due(self, before: timedelta = timedelta(days=30)) -> bool:
        """Renew the serving certificate if it expires within ``before`` (the CA too, if it is
        due), or take up a renewal another replica made. Returns whether the files changed."""
        data = self._read()
        if data is None:  # deleted under us: start again
            data = self._create(self._generate(None))
        elif not self._usable(data, before):
            data = self._replace(data, self._generate(data, before))
        return self._use(data)

    # -- the Secret -------------------------------------------------------------------------
    def _where(self) -> str:
        return f"Secret {self.namespace}/{self.secret}"

    def _refused(self, e: ApiException, doing: str) -> AdapterError:
        if e.status == 404:
            return AdapterError(f"{doing} {self._where()}: namespace {self.namespace} does not exist; create it "
                                "(kubectl apply -k deploy/) or start the controller with --namespace naming "
                                "the one it runs in")
        return describe_with_grant(e, f"{doing} {self._where()}", self.api, "the controller's ServiceAccount needs "
                                   f"get, create and update on secrets in namespace {self.namespace} to manage the "
                                   f"{self.component}'s certificates" + (" (or run it with --cert-dir)"
                                                                         if self.component == "webhook" else ""))

    def _read(self) -> dict[str, bytes] | None:
        try:
            secret = missing_is_none(lambda: self._core.read_namespaced_secret(self.secret, self.namespace))
        except ApiException as e:
            raise self._refused(e, "reading") from e
        if secret is None:
            return None
        data = {k: base64.b64decode(v) for k, v in (secret.data or {}).items()}
        data["resourceVersion"] = (secret.metadata.resource_version or "").encode()
        return data

    def _body(self, data: dict[str, bytes], resource_version: str | None = None) -> client.V1Secret:
        return client.V1Secret(
            metadata=client.V1ObjectMeta(name=self.secret, namespace=self.namespace, resource_version=resource_version,
                                         labels={"app.kubernetes.io/name": "clueue",
                                                 "app.kubernetes.io/component": self.component}),
            type="kubernetes.io/tls", data={k: base64.b64encode(data[k]).decode() for k in _KEYS})

    def _create(self, data: dict[str, bytes]) -> dict[str, bytes]:
        try:
            call(lambda: self._core.create_namespaced_secret(self.namespace, self._body(data)))
            log.info("created %s with a new %s CA and serving certificate", self._where(), self.component)
            return data
        except ApiException as e:
            if e.status != 409:
                raise self._refused(e, "creating") from e
        # Another replica created it first: use theirs, so that every replica serves one CA.
        theirs = self._read()
        if theirs is None:
            raise AdapterError(f"{self._where()}: created by another replica and deleted at once; restart the controller")
        return theirs

    def _replace(self, old: dict[str, bytes], data: dict[str, bytes]) -> dict[str, bytes]:
        version = old["resourceVersion"].decode()
        try:
            call(lambda: self._core.replace_namespaced_secret(self.secret, self.namespace, self._body(data, version)))
            log.info("renewed the %s's serving certificate in %s", self.component, self._where())
            return data
        except ApiException as e:
            if e.status not in (409, 404):
                raise self._refused(e, "updating") from e
        theirs = self._read()  # another replica renewed it first: use theirs
        return theirs if theirs is not None else self._create(data)

    # -- certificates -----------------------------------------------------------------------
    def _usable(self, data: dict[str, bytes], before: timedelta) -> bool:
        try:
            if any(k not in data for k in _KEYS):
                return False
            serving = x509.load_pem_x509_certificate(data["tls.crt"])
            serialization.load_pem_private_key(data["tls.key"], None)
            x509.load_pem_x509_certificates(data["ca.crt"])
        except ValueError:
            return False
        return _expires(serving) - _now() > before and _covers(serving, self.names)

    def _generate(self, old: dict[str, bytes] | None, before: timedelta = timedelta(0)) -> dict[str, bytes]:
        """A new serving certificate, signed by the old CA while it outlives ``before`` plus a
        serving certificate's life, else by a new CA (the old one stays in the bundle while valid)."""
        ca = ca_key = None
        kept: list[x509.Certificate] = []
        if old is not None:
            try:
                cas = x509.load_pem_x509_certificates(old["ca.crt"])
                key = serialization.load_pem_private_key(old["ca.key"], None)
                if isinstance(key, ec.EllipticCurvePrivateKey) and _expires(cas[0]) - _now() > before + SERVING_VALIDITY:
                    ca, ca_key = cas[0], key
                else:
                    kept = [c for c in cas if _expires(c) > _now()]
            except (KeyError, ValueError, IndexError):
                pass  # unreadable: start with a new CA
        if ca is None or ca_key is None:
            ca, ca_key = _new_ca(self.component)
            bundle = b"".join(_cert_pem(c) for c in [ca, *kept[:1]])
        else:
            bundle = old["ca.crt"] if old is not None else _cert_pem(ca)
        cert, key = _new_serving(self.names, ca, ca_key)
        return {"tls.crt": _cert_pem(cert), "tls.key": _key_pem(key), "ca.crt": bundle, "ca.key": _key_pem(ca_key)}

    # -- files and caBundle -----------------------------------------------------------------
    def _use(self, data: dict[str, bytes], *, patch: bool = True) -> bool:
        self.directory.mkdir(parents=True, exist_ok=True)
        # The key first: until the certificate follows, the pair does not match and the server
        # keeps serving the old one.
        changed = _write(self.key_file, data["tls.key"], 0o600)
        changed = _write(self.cert_file, data["tls.crt"], 0o644) or changed
        self.ca_bundle = data["ca.crt"]
        if patch:
            self._patch_ca_bundles(self.ca_bundle)
        return changed

    def _patch_ca_bundles(self, bundle: bytes) -> None:
        if self.publish is not None:
            self.publish(bundle)
            return
        update_configurations(self.api, ca_bundle=bundle, config=self.config, names=self.webhooks)
