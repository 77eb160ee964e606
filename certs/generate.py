"""CA and serving-certificate files for the webhook.

The API server reaches the webhook by its Service DNS name, tests and ``make dev``
reach it on loopback; one serving certificate carries all of those names so the same
files work everywhere. The certificates themselves are built by :mod:`certs.pki`.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from certs.lifetimes import CA_LIFETIME, SERVING_LIFETIME
from certs.pki import build_ca, cert_pem, issue_certificate, key_pem

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
TLS_CERT = "tls.crt"
TLS_KEY = "tls.key"


@dataclass(frozen=True, slots=True)
class CertPaths:
    """Where :func:`generate` wrote the PEM files."""

    out_dir: Path
    ca_cert: Path
    ca_key: Path
    tls_cert: Path
    tls_key: Path


def service_sans(*, service: str, namespace: str, extra_sans: Iterable[str] = ()) -> list[str]:
    """The subject alternative names of the serving certificate, in a stable order."""
    names = [
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        "localhost",
        "127.0.0.1",
        *extra_sans,
    ]
    return list(dict.fromkeys(n for n in names if n))


def ca_common_name(*, service: str, namespace: str) -> str:
    return f"rollgate-ca@{service}.{namespace}"


def build_serving_cert(
    *,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    sans: list[str],
    lifetime: dt.timedelta,
    now: dt.datetime | None = None,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A server-auth leaf for ``sans``; the first SAN is also the common name."""
    return issue_certificate(
        ca_cert, ca_key, common_name=sans[0], sans=sans, server=True, lifetime=lifetime,
        now=now
    )


def write_atomic(path: Path, data: bytes, *, mode: int) -> None:
    """Write via a temporary file and rename, so a server re-reading the file on
    change never sees half of it; the mode is set before any byte is written."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _load_ca(out: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey] | None:
    cert_file, key_file = out / CA_CERT, out / CA_KEY
    if not (cert_file.is_file() and key_file.is_file()):
        return None
    cert = x509.load_pem_x509_certificate(cert_file.read_bytes())
    key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError(f"{key_file}: expected an EC private key")
    return cert, key


def generate(
    out_dir: str | os.PathLike[str],
    *,
    service: str = "rollgate-webhook",
    namespace: str = "rollgate-system",
    extra_sans: Iterable[str] = (),
    lifetime: dt.timedelta = SERVING_LIFETIME,
    ca_lifetime: dt.timedelta = CA_LIFETIME,
    reuse_ca: bool = False,
) -> CertPaths:
    """Write ``ca.crt ca.key tls.crt tls.key`` into ``out_dir`` and return their paths.

    With ``reuse_ca`` an existing ``ca.crt``/``ca.key`` in ``out_dir`` signs the new
    serving certificate, so rotating the leaf does not change the caBundle that the
    webhook configurations carry. The leaf key is written before the certificate:
    a server that reloads on the certificate's change then finds the matching key.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = CertPaths(out, out / CA_CERT, out / CA_KEY, out / TLS_CERT, out / TLS_KEY)
    ca = _load_ca(out) if reuse_ca else None
    if ca is None:
        ca = build_ca(common_name=ca_common_name(service=service, namespace=namespace),
                      lifetime=ca_lifetime)
        write_atomic(paths.ca_key, key_pem(ca[1]), mode=0o600)
        write_atomic(paths.ca_cert, cert_pem(ca[0]), mode=0o644)
    sans = service_sans(service=service, namespace=namespace, extra_sans=extra_sans)
    cert, key = build_serving_cert(ca_cert=ca[0], ca_key=ca[1], sans=sans,
                                    lifetime=lifetime)
    write_atomic(paths.tls_key, key_pem(key), mode=0o600)
    write_atomic(paths.tls_cert, cert_pem(cert), mode=0o644)
    return paths
