"""The visibility API's serving certificate, and the ``caBundle`` of its APIServices.

The certificate is made and renewed as the webhook's is (:class:`~clueue.adapters.webhook.certs.CertManager`:
a CA and a serving certificate in a Secret shared by the replicas, here ``clueue-visibility-tls``,
for the Service ``clueue-visibility``); its CA goes into the ``caBundle`` of the two APIServices
``v1beta1.visibility.kueue.x-k8s.io`` and ``v1beta2.visibility.kueue.x-k8s.io``, with which the
API server's aggregation layer verifies this server (``<service>.<namespace>.svc``).
"""

from __future__ import annotations

import base64
import logging
from pathlib import Path
from typing import Any, Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ..kube.errors import describe_with_grant
from ..kube.retry import missing_is_none, update_with_retry
from ..webhook.certs import CertManager
from .api import GROUP, VERSIONS

__all__ = ["APISERVICES", "SECRET", "visibility_certificates", "apiservice_ca_publisher"]

log = logging.getLogger(__name__)

#: The APIServices this server answers for, one per version.
APISERVICES = tuple(f"{version}.{GROUP}" for version in VERSIONS)
SECRET = "clueue-visibility-tls"


def apiservice_ca_publisher(api: client.ApiClient, names: tuple[str, ...] = APISERVICES) -> Callable[[bytes], None]:
    """A function that writes a CA bundle into the ``caBundle`` of the APIServices ``names``
    (those that differ), and warns once about one that is not registered (it is written once the
    APIService is, at the server's next upkeep).

    Raises (from the function): AdapterError when an APIService cannot be read or patched.
    """
    registration = client.ApiregistrationV1Api(api)
    told: set[str] = set()

    def publish(bundle: bytes) -> None:
        encoded = base64.b64encode(bundle).decode()

        def change(found: Any) -> Any:
            if (found.spec.ca_bundle or "") == encoded:
                return None
            found.spec.ca_bundle = encoded
            return found

        for name in names:
            try:
                read = lambda: missing_is_none(lambda: registration.read_api_service(name))  # noqa: E731
                if read() is None:
                    if name not in told:
                        told.add(name)
                        log.warning("APIService %s is not registered: the API server does not proxy %s to this "
                                    "controller (kubectl apply -k deploy/ registers it)", name, GROUP)
                    continue
                # read-modify-replace, guarded by the read resourceVersion, as every write of clueue's
                if update_with_retry(read, change, lambda found: registration.replace_api_service(name, found)):
                    log.info("APIService %s: caBundle set to the visibility API's CA", name)
            except ApiException as e:
                raise describe_with_grant(e, f"updating APIService {name}", api, "the controller's ServiceAccount "
                                          "needs get and update on apiservices (apiregistration.k8s.io) of this name "
                                          "to give it the visibility API's CA (deploy/rbac.yaml)") from None
    return publish


def visibility_certificates(api: client.ApiClient, namespace: str, service: str, directory: Path,
                            *, extra_sans: tuple[str, ...] = ()) -> CertManager:
    """The visibility API's certificate manager; ``ensure()`` makes the files (and sets the
    APIServices' caBundle), ``rotate_if_due()`` renews them."""
    return CertManager(api, namespace, service, SECRET, webhooks=(), directory=directory, extra_sans=extra_sans,
                       publish=apiservice_ca_publisher(api), component="visibility")
