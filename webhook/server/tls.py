"""A TLS server context that follows certificate rotation.

The webhook's worker (:mod:`webhook.server.worker`) asks for the SSLContext for every
new connection. Building one means parsing PEM files, so this keeps one context per
process and rebuilds it only when the certificate or key file changed (a ``stat`` of
each, a few microseconds). Kubernetes updates a mounted Secret by swapping a symlink, and
``certs.generate`` writes by rename; either way the stat changes. During a rotation
the key and certificate may briefly disagree: then the previous context stays in use
and the next connection tries again.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import ssl
import threading
from collections.abc import Callable

from cryptography import x509
from cryptography.hazmat.primitives import serialization

log = logging.getLogger("rollgate.webhook.tls")

FileStamp = tuple[int, int, int]


def _stamp(path: str) -> FileStamp:
    st = os.stat(path)  # follows symlinks: a Secret volume's ..data swap shows here
    return (st.st_ino, st.st_size, st.st_mtime_ns)


# TLS 1.2 suites: ECDHE key exchange with an AEAD cipher only (AES-GCM, ChaCha20-Poly1305),
# for ECDSA and RSA certificates alike; every suite the Go TLS client of the API server
# prefers is among them. OpenSSL's defaults would also offer two CBC suites
# (ECDHE-*-AES*-SHA256/SHA384). TLS 1.3 suites are AEAD by definition and are left as
# OpenSSL sets them (this string does not touch them).
TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL:!eNULL"


def harden(context: ssl.SSLContext) -> ssl.SSLContext:
    """TLS 1.2 minimum and AEAD-only suites (docs/components.md "TLS"); no renegotiation, no
    compression."""
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(TLS12_CIPHERS)
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    return context


def pair_problem(cert_pem: bytes, key_pem: bytes) -> str | None:
    """Why a certificate and key cannot serve together (unparsable, or the key is not
    the certificate's), else None."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
    except ValueError:
        return "the certificate file holds no PEM certificate"
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError):
        return "the key file holds no unencrypted PEM private key"
    public = serialization.PublicFormat.SubjectPublicKeyInfo
    if (key.public_key().public_bytes(serialization.Encoding.DER, public)
            != cert.public_key().public_bytes(serialization.Encoding.DER, public)):
        return ("the key is not the certificate's: they come from different "
                "generations (regenerate both, or fix the Secret)")
    return None


def expired_at(cert_pem: bytes, now: dt.datetime) -> dt.datetime | None:
    """The certificate's notAfter when it is already past at ``now``, else None."""
    not_after = x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc
    return not_after if not_after <= now else None


class ReloadingContext:
    """Returns the current SSLContext for ``certfile``/``keyfile``, rebuilt on change."""

    def __init__(self, *, certfile: str, keyfile: str,
                 factory: Callable[[], ssl.SSLContext] | None = None,
                 on_load: Callable[[str], None] | None = None) -> None:
        """``on_load`` is called with the certificate file after each (re)load that took
        (the webhook records the certificate's notAfter there)."""
        self._certfile = certfile
        self._keyfile = keyfile
        self._factory = factory or self._default_factory
        self._on_load = on_load
        self._lock = threading.Lock()
        self._stamps: tuple[FileStamp, FileStamp] | None = None
        self._context: ssl.SSLContext | None = None

    def _default_factory(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(certfile=self._certfile, keyfile=self._keyfile)
        return context

    def get(self, factory: Callable[[], ssl.SSLContext] | None = None) -> ssl.SSLContext:
        try:
            stamps = (_stamp(self._certfile), _stamp(self._keyfile))
        except OSError:
            stamps = None  # mid-swap; keep serving with what we have
        if self._context is not None and (stamps is None or stamps == self._stamps):
            return self._context
        with self._lock:
            if self._context is not None and (stamps is None or stamps == self._stamps):
                return self._context
            try:
                context = harden((factory or self._factory)())
            except (OSError, ssl.SSLError, ValueError) as exc:
                if self._context is None:
                    raise
                log.warning("certificate reload failed; keeping the previous one",
                            extra={"error": str(exc), "certfile": self._certfile})
                return self._context
            if self._context is not None:
                log.info("certificate reloaded", extra={"certfile": self._certfile})
            self._context, self._stamps = context, stamps
            if self._on_load is not None:
                self._on_load(self._certfile)
            return context
