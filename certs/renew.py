"""``rollgate certs renew``: observe, take the next step of :mod:`certs.renewal`, observe
again, until a step has to wait for the cluster.

What it reads and writes (and nothing else; docs/install.md "Certificate renewal" lists the
RBAC): the CA Secret and the serving Secret (get, update), the named validating and
mutating webhook configurations (get, patch), the Service's EndpointSlices (list), and
a TLS handshake to each ready webhook endpoint while an old CA is still trusted.
Secrets are replaced with the resourceVersion they were read at, so a concurrent writer
makes this run fail (and the next one start over) instead of being overwritten.
"""

from __future__ import annotations

import base64
import datetime as dt
import socket
import ssl
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from kubernetes import client as k8s

from certs.generate import CA_CERT, CA_KEY, TLS_CERT, TLS_KEY, build_serving_cert, ca_common_name
from certs.inject import ca_bundle_patch
from certs.pki import build_ca, cert_pem, key_pem
from certs.renewal import (
    CA,
    Issue,
    NewCA,
    Observed,
    Serving,
    SetBundle,
    Step,
    Wait,
    issued_by,
    next_step,
)

HANDSHAKE_TIMEOUT_SECONDS = 5.0
# At most: a new CA, its bundle; or a certificate, then the check of the endpoints.
MAX_STEPS = 4


@dataclass(frozen=True, slots=True)
class Target:
    """Where the certificates live and what they are for."""

    namespace: str
    secret: str
    ca_secret: str
    service: str
    sans: tuple[str, ...]
    validating: tuple[str, ...]
    mutating: tuple[str, ...]
    lifetime: dt.timedelta
    ca_lifetime: dt.timedelta


def _data(secret: k8s.V1Secret, key: str) -> bytes:
    value = (secret.data or {}).get(key)
    return base64.b64decode(value) if value else b""


def _read_ca(secret: k8s.V1Secret) -> CA | None:
    try:
        cert = x509.load_pem_x509_certificate(_data(secret, CA_CERT))
        key = serialization.load_pem_private_key(_data(secret, CA_KEY), password=None)
    except ValueError:
        return None
    return CA(cert, key)


def _spki(public_key: Any) -> bytes:
    return bytes(public_key.public_bytes(serialization.Encoding.DER,
                                         serialization.PublicFormat.SubjectPublicKeyInfo))


def _read_serving(secret: k8s.V1Secret) -> Serving | None:
    try:
        cert = x509.load_pem_x509_certificate(_data(secret, TLS_CERT))
    except ValueError:
        return None
    try:
        ca: x509.Certificate | None = x509.load_pem_x509_certificate(_data(secret, CA_CERT))
    except ValueError:
        ca = None
    signer = ca if ca is not None and issued_by(cert, ca) else None
    try:
        key = serialization.load_pem_private_key(_data(secret, TLS_KEY), password=None)
    except ValueError:
        return Serving(cert, key_matches=False, ca=signer)
    return Serving(cert, key_matches=_spki(key.public_key()) == _spki(cert.public_key()),
                   ca=signer)


def _parse_bundle(encoded: str | None) -> tuple[x509.Certificate, ...]:
    if not encoded:
        return ()
    try:
        return tuple(x509.load_pem_x509_certificates(base64.b64decode(encoded)))
    except ValueError:
        return ()


class Cluster:
    """The reads and writes of one run, through the official client."""

    def __init__(self, api_client: k8s.ApiClient, target: Target) -> None:
        self.target = target
        self.core = k8s.CoreV1Api(api_client)
        self.admission = k8s.AdmissionregistrationV1Api(api_client)
        self.discovery = k8s.DiscoveryV1Api(api_client)

    def configurations(self) -> Iterator[tuple[Any, Callable[..., Any], str]]:
        """Each named configuration with the function that patches it and its name."""
        a = self.admission
        for name in self.target.validating:
            yield (a.read_validating_webhook_configuration(name),
                   a.patch_validating_webhook_configuration, name)
        for name in self.target.mutating:
            yield (a.read_mutating_webhook_configuration(name),
                   a.patch_mutating_webhook_configuration, name)

    def observe(self) -> tuple[Observed, k8s.V1Secret, k8s.V1Secret]:
        t = self.target
        ca_secret = self.core.read_namespaced_secret(t.ca_secret, t.namespace)
        serving_secret = self.core.read_namespaced_secret(t.secret, t.namespace)
        bundles = tuple(_parse_bundle(w.client_config.ca_bundle)
                        for config, _, _ in self.configurations()
                        for w in config.webhooks or [])
        presented = self.presented() if any(len(b) > 1 for b in bundles) else ()
        observed = Observed(now=dt.datetime.now(dt.UTC), ca=_read_ca(ca_secret),
                            serving=_read_serving(serving_secret), bundles=bundles,
                            presented=presented, sans=t.sans)
        return observed, ca_secret, serving_secret

    def presented(self) -> tuple[bytes | None, ...]:
        """The leaf each ready endpoint of the Service presents in a TLS handshake."""
        slices = self.discovery.list_namespaced_endpoint_slice(
            self.target.namespace,
            label_selector=f"kubernetes.io/service-name={self.target.service}")
        seen: list[bytes | None] = []
        for item in slices.items:
            port = next((p.port for p in item.ports or [] if p.port), None)
            for endpoint in item.endpoints or []:
                conditions = endpoint.conditions
                if port is None or not (conditions and conditions.ready) or conditions.terminating:
                    continue
                seen += [_handshake(address, port, self.target.sans[0])
                         for address in endpoint.addresses]
        return tuple(seen)

    def new_ca(self, secret: k8s.V1Secret) -> None:
        t = self.target
        cert, key = build_ca(common_name=ca_common_name(service=t.service, namespace=t.namespace),
                             lifetime=t.ca_lifetime)
        self._replace(t.ca_secret, secret, {CA_CERT: cert_pem(cert), CA_KEY: key_pem(key)})

    def issue(self, secret: k8s.V1Secret, ca: CA) -> None:
        cert, key = build_serving_cert(ca_cert=ca.cert, ca_key=ca.key,  # type: ignore[arg-type]
                                       sans=list(self.target.sans), lifetime=self.target.lifetime)
        # ca.crt, as cert-manager writes it: the CA of this certificate.
        self._replace(self.target.secret, secret, {TLS_CERT: cert_pem(cert), TLS_KEY: key_pem(key),
                               CA_CERT: cert_pem(ca.cert)})

    def set_bundle(self, certs: tuple[x509.Certificate, ...]) -> list[str]:
        """Patch the configurations whose entries differ from ``certs``; the names."""
        encoded = base64.b64encode(b"".join(cert_pem(c) for c in certs)).decode()
        patched = []
        for config, patch, name in self.configurations():
            webhooks = config.webhooks or []
            if all(w.client_config.ca_bundle == encoded for w in webhooks):
                continue
            patch(name, ca_bundle_patch([w.name for w in webhooks], encoded))
            patched.append(f"{config.kind or type(config).__name__}/{name}")
        return patched

    def _replace(self, name: str, secret: k8s.V1Secret, files: dict[str, bytes]) -> None:
        data = dict(secret.data or {})
        data.update({key: base64.b64encode(value).decode() for key, value in files.items()})
        secret.data = data
        # Replaced at the resourceVersion read: a concurrent writer fails this run.
        self.core.replace_namespaced_secret(name, self.target.namespace, secret)


def _handshake(address: str, port: int, server_name: str) -> bytes | None:
    context = ssl.create_default_context()
    # Only the presented certificate is compared (to the serving Secret's); trust is
    # the API server's business, with the caBundle.
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with socket.create_connection((address, port), timeout=HANDSHAKE_TIMEOUT_SECONDS) as raw, \
                context.wrap_socket(raw, server_hostname=server_name) as tls:
            return tls.getpeercert(binary_form=True)
    except OSError:
        return None


def _describe(step: Step) -> str:
    kind = {NewCA: "new CA", SetBundle: "caBundle", Issue: "serving certificate",
            Wait: "waiting"}[type(step)]
    return f"{kind}: {step.why}"


def renew(api_client: k8s.ApiClient, target: Target) -> list[str]:
    """Run the steps that can be taken now; one line per step taken or waited on."""
    cluster = Cluster(api_client, target)
    lines: list[str] = []
    for _ in range(MAX_STEPS):
        observed, ca_secret, serving_secret = cluster.observe()
        step = next_step(observed)
        if step is None:
            lines.append("nothing to do: the CA, the caBundles and the served certificate agree")
            break
        lines.append(_describe(step))
        if isinstance(step, Wait):
            break
        if isinstance(step, NewCA):
            cluster.new_ca(ca_secret)
        elif isinstance(step, Issue):
            assert observed.ca is not None  # next_step issues only with a CA
            cluster.issue(serving_secret, observed.ca)
        else:
            lines += [f"  {name}: caBundle set" for name in cluster.set_bundle(step.certs)]
            if step.adds:
                lines.append("stopping: the next run continues once the API server has the "
                             "new caBundle")
                break
    return lines
