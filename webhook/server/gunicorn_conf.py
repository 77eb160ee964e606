"""gunicorn settings and hooks for the webhook: :class:`webhook.server.worker.WebhookWorker`
(gthread whose event loop reads each request whole before a thread serves it), TLS
1.2+ with AEAD suites only and certificate reload, JSON logs, prometheus multiprocess
clean-up.

``python -m webhook`` builds its settings from :func:`settings`; the hooks are module
functions so gunicorn can also load this file with ``-c`` if someone runs it by hand.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from typing import Any

from webhook.server.logs import GunicornJsonLogger
from webhook.server.tls import ReloadingContext
from webhook.server.worker import Limits, WebhookWorker

# The API server keeps connections to webhooks alive (Go's default idle timeout is
# 90 s); closing idle ones sooner makes it re-handshake TLS on the admission path, and a
# server-side close racing a new request is a failed call. 75 s keeps most reuse.
KEEPALIVE_SECONDS = 75

# A thread writes the answer on a socket with this timeout, so a client that stops
# reading cannot keep it. (Reading never blocks a thread: see webhook.server.worker.)
IO_TIMEOUT_SECONDS = 5.0

_contexts: dict[tuple[str, str], ReloadingContext] = {}


class BoundedSSLSocket(ssl.SSLSocket):
    """A server-side TLS socket that never blocks without a timeout.

    gunicorn switches a connection between non-blocking (while the event loop holds it)
    and blocking (while a thread serves it) with ``setblocking``; here "blocking" means
    a timeout of :data:`IO_TIMEOUT_SECONDS`.
    """

    def setblocking(self, flag: bool) -> None:
        if flag:
            self.settimeout(IO_TIMEOUT_SECONDS)
        else:
            super().setblocking(False)


def _bounded(factory: Callable[[], ssl.SSLContext]) -> Callable[[], ssl.SSLContext]:
    def build() -> ssl.SSLContext:
        context = factory()
        context.sslsocket_class = BoundedSSLSocket
        return context

    return build


def ssl_context(conf: Any, default_ssl_context_factory: Callable[[], ssl.SSLContext]
                ) -> ssl.SSLContext:
    """gunicorn hook, called per connection: the cached context, rebuilt on change."""
    key = (conf.certfile, conf.keyfile)
    factory = _bounded(default_ssl_context_factory)
    holder = _contexts.get(key)
    if holder is None:
        holder = _contexts.setdefault(
            key, ReloadingContext(certfile=conf.certfile, keyfile=conf.keyfile,
                                  factory=factory, on_load=_record_certificate))
    return holder.get(factory)


def _record_certificate(certfile: str) -> None:
    # Imported here: prometheus-client must not be imported before python -m webhook
    # has set PROMETHEUS_MULTIPROC_DIR (webhook/__init__.py).
    from webhook import metrics

    metrics.record_certificate(certfile)


def post_worker_init(worker: Any) -> None:
    """The certificate's notAfter on /metrics from a worker's start, before its first
    connection loads the TLS context."""
    _record_certificate(worker.cfg.certfile)


def child_exit(server: Any, worker: Any) -> None:
    """Drop a dead worker's live-gauge files so /metrics does not count it."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def settings(*, bind: str, certfile: str, keyfile: str, workers: int = 2, threads: int = 4,
             log_level: str = "info", limits: Limits | None = None) -> dict[str, Any]:
    """The gunicorn settings for one webhook server."""
    limits = limits or Limits()
    return {
        "bind": [bind],
        "worker_class": WebhookWorker.with_limits(limits),
        # The worker's event loop does the handshake, without blocking.
        "do_handshake_on_connect": False,
        "workers": workers,
        "threads": threads,
        "keepalive": KEEPALIVE_SECONDS,
        # The worker caps the connections it holds itself (closing the oldest idle ones);
        # gunicorn's own cap, which stops accepting altogether, is only a backstop for
        # connections queued for a thread.
        "worker_connections": 2 * limits.max_connections + threads,
        "certfile": certfile,
        "keyfile": keyfile,
        "ssl_context": ssl_context,
        "child_exit": child_exit,
        "post_worker_init": post_worker_init,
        "logger_class": GunicornJsonLogger,
        "loglevel": log_level,
        "accesslog": None,
        # gunicorn's runtime control socket would be created under $HOME (read-only in
        # the Deployment) and shared by every server on a machine; nothing uses it.
        "control_socket_disable": True,
        # The webhook timeout on the API server side is 5 s; a worker stuck far longer
        # than that is hung, not busy.
        "timeout": 30,
        "graceful_timeout": 10,
        "proc_name": "rollgate-webhook",
        # The body limit is enforced by the worker (413) and Flask; these bound the
        # header parser.
        "limit_request_line": 8190,
        "limit_request_fields": 100,
    }
