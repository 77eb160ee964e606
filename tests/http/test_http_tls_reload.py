"""Certificate rotation seen from the server's TLS context: a half-done rotation (new
key, old certificate) keeps the previous context instead of breaking new connections,
and the finished rotation is picked up."""

from __future__ import annotations

import ssl

from cryptography import x509
from cryptography.hazmat.primitives import serialization

import certs
from certs.generate import build_serving_cert, write_atomic
from certs.pki import cert_pem, key_pem
from webhook.tls import ReloadingContext


def test_half_rotated_files_keep_the_previous_context(tmp_path):
    paths = certs.generate(tmp_path)
    holder = ReloadingContext(certfile=str(paths.tls_cert), keyfile=str(paths.tls_key))
    first = holder.get()
    assert first.minimum_version == ssl.TLSVersion.TLSv1_2
    assert holder.get() is first  # unchanged files: the same context, no re-read

    ca = x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(paths.ca_key.read_bytes(), password=None)
    cert, key = build_serving_cert(ca_cert=ca, ca_key=ca_key, sans=["localhost"], days=1)
    write_atomic(paths.tls_key, key_pem(key), mode=0o600)
    assert holder.get() is first  # key and certificate disagree: keep serving

    write_atomic(paths.tls_cert, cert_pem(cert), mode=0o644)
    second = holder.get()
    assert second is not first
    assert holder.get() is second
