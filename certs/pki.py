"""Certificate primitives: a CA, leaf certificates it signs, and their PEM encodings.

The one place that builds X.509 certificates: the webhook's serving certificate
(:mod:`certs.generate`) and the test control plane's certificates (``support/harness/pki.py``)
are both made here. Keys are ECDSA P-256: small, fast to create (tests make many) and
cheap in the TLS handshake, which matters for an endpoint on the admission path.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterable

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["build_ca", "cert_pem", "issue_certificate", "key_pem"]

# Certificates are back-dated a little so a node whose clock runs slightly behind
# does not reject a certificate made a moment ago.
_CLOCK_SKEW = dt.timedelta(minutes=5)


def _general_name(name: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_usage(*, signs_certificates: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True, content_commitment=False, key_encipherment=False,
        data_encipherment=False, key_agreement=False, key_cert_sign=signs_certificates,
        crl_sign=signs_certificates, encipher_only=False, decipher_only=False,
    )


def build_ca(
    *, common_name: str, lifetime: dt.timedelta, now: dt.datetime | None = None
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A self-signed CA that may sign only leaf certificates (path length 0)."""
    now = now or dt.datetime.now(dt.UTC)
    key = _new_key()
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        .not_valid_after(now + lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signs_certificates=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue_certificate(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    *,
    common_name: str,
    organizations: Iterable[str] = (),
    sans: Iterable[str] = (),
    server: bool = False,
    client: bool = False,
    lifetime: dt.timedelta = dt.timedelta(days=365),
    now: dt.datetime | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A leaf certificate signed by ``ca_cert``/``ca_key`` and its new key.

    The subject is ``organizations`` (O, in order) and ``common_name`` (CN): for a
    Kubernetes client certificate, its groups and user name. ``sans`` are DNS names or
    IP addresses; ``server``/``client`` set the extended key usage (at least one).
    """
    usages = [
        oid for oid, wanted in ((ExtendedKeyUsageOID.SERVER_AUTH, server),
                                (ExtendedKeyUsageOID.CLIENT_AUTH, client)) if wanted
    ]
    if not usages:
        raise ValueError("issue_certificate: ask for server=True, client=True or both")
    now = now or dt.datetime.now(dt.UTC)
    key = _new_key()
    subject = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    subject.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    ca_ski = ca_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name(subject))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _CLOCK_SKEW)
        # A leaf must not outlive the CA that vouches for it.
        .not_valid_after(min(now + lifetime, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signs_certificates=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
    )
    names = [_general_name(n) for n in sans]
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    cert = (
        builder
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: PrivateKeyTypes) -> bytes:
    """A private key (any type: the test control plane also writes an RSA one) as
    unencrypted PKCS#8 PEM."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
