"""gunicorn settings and hooks for the webhook: ``gthread`` workers with keep-alive,
TLS 1.2+ with certificate reload, JSON logs, prometheus multiprocess clean-up.

Slow or silent clients must not take the webhook down (a webhook that does not answer
blocks every ``kubectl apply`` of a Stage under ``failurePolicy: Fail``). gunicorn's
gthread worker gives each new connection a thread that waits up to 5 s for its first
byte, and then runs the TLS handshake and reads the request on a socket without a
timeout: a few connections that send nothing, or stop in the middle of a ClientHello,
hold every thread. :class:`WebhookWorker` and :class:`BoundedSSLSocket` fix both.

``python -m webhook`` builds its settings from :func:`settings`; the hooks are module
functions so gunicorn can also load this file with ``-c`` if someone runs it by hand.
"""

from __future__ import annotations

import errno
import os
import selectors
import ssl
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from gunicorn.workers.gthread import TConn, ThreadWorker

from webhook.logs import GunicornJsonLogger
from webhook.tls import ReloadingContext

# The API server keeps connections to webhooks alive (Go's default idle timeout is
# 90 s); closing idle ones sooner makes it re-handshake TLS on the admission path, and a
# server-side close racing a new request is a failed call. 75 s keeps most reuse.
KEEPALIVE_SECONDS = 75

# Once a connection has a thread, each socket operation (TLS handshake, a read of the
# request, a write of the answer) may wait this long for the peer. The API server sends
# a request at once and gives up after its timeoutSeconds (5) anyway.
IO_TIMEOUT_SECONDS = 5.0

_contexts: dict[tuple[str, str], ReloadingContext] = {}


class BoundedSSLSocket(ssl.SSLSocket):
    """A server-side TLS socket that never blocks without a timeout.

    gunicorn switches a connection between non-blocking (while the poller watches it)
    and blocking (while a thread serves it) with ``setblocking``; here "blocking" means
    a timeout of :data:`IO_TIMEOUT_SECONDS`. gunicorn wraps with
    ``do_handshake_on_connect=False`` (its default, kept in :func:`settings`) and then
    calls :meth:`do_handshake`, which gets the same timeout, so a peer that stops in the
    middle of the handshake frees its thread after that long.
    """

    def setblocking(self, flag: bool) -> None:
        if flag:
            self.settimeout(IO_TIMEOUT_SECONDS)
        else:
            super().setblocking(False)

    def do_handshake(self, block: bool = False) -> None:
        if self.gettimeout() is None:
            self.settimeout(IO_TIMEOUT_SECONDS)
        super().do_handshake(block)


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
                                  factory=factory))
    return holder.get(factory)


class WebhookWorker(ThreadWorker):  # type: ignore[misc]
    """gthread, except that a new connection waits for its first byte in the poller
    (like a kept-alive one), not in a thread: a connection that sends nothing costs a
    file descriptor until the keep-alive timeout closes it, never a thread. Once bytes
    arrive, the thread serving it works on a :class:`BoundedSSLSocket`."""

    def accept(self, listener: Any) -> None:
        try:
            client_sock, client_addr = listener.accept()
        except OSError as exc:
            if exc.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        self.nr_conns += 1
        conn = TConn(self.cfg, client_sock, client_addr, listener.getsockname())  # non-blocking
        # The same expiry as gunicorn's deferred connections, so pending_conns stays
        # sorted by expiry (murder_pending relies on that).
        conn.timeout = time.monotonic() + self.cfg.keepalive
        self.pending_conns.append(conn)
        self.poller.register(client_sock, selectors.EVENT_READ,
                             partial(self.on_pending_socket_readable, conn))


def child_exit(server: Any, worker: Any) -> None:
    """Drop a dead worker's live-gauge files so /metrics does not count it."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def settings(*, bind: str, certfile: str, keyfile: str, workers: int = 2, threads: int = 4,
             log_level: str = "info") -> dict[str, Any]:
    """The gunicorn settings for one webhook server."""
    return {
        "bind": [bind],
        "worker_class": WebhookWorker,
        # gunicorn then calls do_handshake() itself, bounded by BoundedSSLSocket.
        "do_handshake_on_connect": False,
        "workers": workers,
        "threads": threads,
        "keepalive": KEEPALIVE_SECONDS,
        "certfile": certfile,
        "keyfile": keyfile,
        "ssl_context": ssl_context,
        "child_exit": child_exit,
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
        # The body limit is enforced by Flask (413); these bound the header parser.
        "limit_request_line": 8190,
        "limit_request_fields": 100,
    }
