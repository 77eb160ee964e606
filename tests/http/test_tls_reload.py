"""Certificate rotation seen from the server's TLS context: a half-done rotation (new
key, old certificate) keeps the previous context instead of breaking new connections,
and the finished rotation is picked up."""

from __future__ import annotations

import datetime as dt
import socket
import ssl
import threading
import warnings

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

import certs
from certs.generate import build_serving_cert, write_atomic
from certs.pki import cert_pem, key_pem
from webhook.server.tls import ReloadingContext, harden


def test_half_rotated_files_keep_the_previous_context(tmp_path):
    paths = certs.generate(tmp_path)
    holder = ReloadingContext(certfile=str(paths.tls_cert), keyfile=str(paths.tls_key))
    first = holder.get()
    assert first.minimum_version == ssl.TLSVersion.TLSv1_2
    assert holder.get() is first  # unchanged files: the same context, no re-read

    ca = x509.load_pem_x509_certificate(paths.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(paths.ca_key.read_bytes(), password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)  # certs.generate makes EC keys
    cert, key = build_serving_cert(ca_cert=ca, ca_key=ca_key, sans=["localhost"],
                                   lifetime=dt.timedelta(days=1))
    write_atomic(paths.tls_key, key_pem(key), mode=0o600)
    assert holder.get() is first  # key and certificate disagree: keep serving

    write_atomic(paths.tls_cert, cert_pem(cert), mode=0o644)
    second = holder.get()
    assert second is not first
    assert holder.get() is second


def _weak_context(paths: certs.CertPaths) -> ssl.SSLContext:
    """A server context that would accept TLS 1.0, compression and renegotiation: what
    harden() must undo (Python's defaults are already TLS 1.2+, so start below them)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = ssl.TLSVersion.TLSv1
    context.options &= ~(ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION)
    context.set_ciphers("DEFAULT:@SECLEVEL=0")
    context.load_cert_chain(str(paths.tls_cert), str(paths.tls_key))
    return context


def test_harden_raises_a_weak_context_to_tls_1_2(tmp_path):
    paths = certs.generate(tmp_path / "certs")
    context = harden(_weak_context(paths))
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.options & ssl.OP_NO_COMPRESSION
    assert context.options & ssl.OP_NO_RENEGOTIATION


def test_reloading_context_hardens_what_the_factory_builds(tmp_path):
    """gunicorn's factory decides the base context; whatever it allows, the context the
    webhook serves with refuses TLS 1.1 (a real handshake on loopback)."""
    paths = certs.generate(tmp_path / "certs")
    holder = ReloadingContext(certfile=str(paths.tls_cert), keyfile=str(paths.tls_key),
                              factory=lambda: _weak_context(paths))
    served = holder.get()
    assert served.minimum_version == ssl.TLSVersion.TLSv1_2

    client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client.check_hostname = False
    client.verify_mode = ssl.CERT_NONE
    client.set_ciphers("DEFAULT:@SECLEVEL=0")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        client.minimum_version = ssl.TLSVersion.TLSv1
        client.maximum_version = ssl.TLSVersion.TLSv1_1

    def handshake(server_context: ssl.SSLContext) -> None:
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        failures: list[BaseException] = []

        def serve() -> None:
            conn, _ = listener.accept()
            try:
                with server_context.wrap_socket(conn, server_side=True):
                    pass
            except (ssl.SSLError, OSError) as exc:
                failures.append(exc)
            finally:
                conn.close()

        thread = threading.Thread(target=serve)
        thread.start()
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as raw, \
                    client.wrap_socket(raw):
                pass
        finally:
            thread.join(10)
            listener.close()

    # The weak context itself accepts the TLS 1.1 client: the check below can fail.
    try:
        handshake(_weak_context(paths))
    except ssl.SSLError:
        pytest.skip("this OpenSSL build cannot speak TLS 1.1 at all")
    with pytest.raises(ssl.SSLError):
        handshake(served)
