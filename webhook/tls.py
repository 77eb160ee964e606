"""A TLS server context that follows certificate rotation.

gunicorn asks for an SSLContext for every new connection (its ``ssl_context`` hook).
Building one means parsing PEM files, so this keeps one context per process and
rebuilds it only when the certificate or key file changed (a ``stat`` of each, a few
microseconds). Kubernetes updates a mounted Secret by swapping a symlink, and
``certs.generate`` writes by rename; either way the stat changes. During a rotation
the key and certificate may briefly disagree: then the previous context stays in use
and the next connection tries again.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from collections.abc import Callable

log = logging.getLogger("rollgate.webhook.tls")

FileStamp = tuple[int, int, int]


def _stamp(path: str) -> FileStamp:
    st = os.stat(path)  # follows symlinks: a Secret volume's ..data swap shows here
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def harden(context: ssl.SSLContext) -> ssl.SSLContext:
    """TLS 1.2 minimum (DESIGN.md); no renegotiation, no compression."""
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    return context


class ReloadingContext:
    """Returns the current SSLContext for ``certfile``/``keyfile``, rebuilt on change."""

    def __init__(self, *, certfile: str, keyfile: str,
                 factory: Callable[[], ssl.SSLContext] | None = None) -> None:
        self._certfile = certfile
        self._keyfile = keyfile
        self._factory = factory or self._default_factory
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
            return context
