"""Certificates and kubeconfigs for the test control plane, on top of :mod:`certs.pki`.

One CA signs the API server's serving certificate and every client certificate:
the admin (group ``system:masters``) and ServiceAccount identities, whose subject
*is* the ServiceAccount (CN ``system:serviceaccount:<ns>:<name>``, O its groups).
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from certs.pki import build_ca, cert_pem, issue_certificate, key_pem

# The plane lives for one test session or one `make dev`.
VALIDITY = dt.timedelta(days=30)


@dataclass(frozen=True, slots=True)
class CA:
    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate

    @classmethod
    def create(cls, common_name: str) -> CA:
        cert, key = build_ca(common_name=common_name, lifetime=VALIDITY)
        return cls(key=key, cert=cert)

    @property
    def pem(self) -> bytes:
        return cert_pem(self.cert)

    def issue(
        self,
        *,
        common_name: str,
        organizations: Iterable[str] = (),
        sans: Iterable[str] = (),
        server: bool = False,
        client: bool = False,
    ) -> tuple[bytes, bytes]:
        """A leaf certificate (see :func:`certs.pki.issue_certificate`); returns
        (cert PEM, key PEM)."""
        cert, key = issue_certificate(
            self.cert, self.key, common_name=common_name, organizations=organizations,
            sans=sans, server=server, client=client, lifetime=VALIDITY,
        )
        return cert_pem(cert), key_pem(key)

    def issue_serviceaccount(self, namespace: str, name: str) -> tuple[bytes, bytes]:
        """A client certificate that authenticates as ServiceAccount ``namespace/name``
        with the two groups every ServiceAccount has; returns (cert PEM, key PEM)."""
        return self.issue(
            common_name=f"system:serviceaccount:{namespace}:{name}",
            organizations=["system:serviceaccounts", f"system:serviceaccounts:{namespace}"],
            client=True,
        )


def serviceaccount_signing_key() -> tuple[bytes, bytes]:
    """The key pair kube-apiserver signs and checks ServiceAccount tokens with;
    returns (private key PEM, public key PEM)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return key_pem(key), public


# --------------------------------------------------------------------------- kubeconfig


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def write_kubeconfig(
    path: Path, *, server: str, ca_pem: bytes, cert_pem: bytes, key_pem: bytes, user: str
) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "rollgate",
                "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": _b64(cert_pem),
                    "client-key-data": _b64(key_pem),
                },
            }
        ],
        "contexts": [{"name": "rollgate", "context": {"cluster": "rollgate", "user": user}}],
        "current-context": "rollgate",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path
