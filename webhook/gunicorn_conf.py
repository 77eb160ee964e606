"""gunicorn settings and hooks for the webhook: ``gthread`` workers with keep-alive,
TLS 1.2+ with certificate reload, JSON logs, prometheus multiprocess clean-up.

``python -m webhook`` builds its settings from :func:`settings`; the hooks are module
functions so gunicorn can also load this file with ``-c`` if someone runs it by hand.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from typing import Any

from webhook.logs import GunicornJsonLogger
from webhook.tls import ReloadingContext

# The API server keeps connections to webhooks alive (Go's default idle timeout is
# 90 s); closing idle ones sooner makes it re-handshake TLS on the admission path, and a
# server-side close racing a new request is a failed call. 75 s keeps most reuse.
KEEPALIVE_SECONDS = 75

_contexts: dict[tuple[str, str], ReloadingContext] = {}


def ssl_context(conf: Any, default_ssl_context_factory: Callable[[], ssl.SSLContext]
                ) -> ssl.SSLContext:
    """gunicorn hook, called per connection: the cached context, rebuilt on change."""
    key = (conf.certfile, conf.keyfile)
    holder = _contexts.get(key)
    if holder is None:
        holder = _contexts.setdefault(
            key, ReloadingContext(certfile=conf.certfile, keyfile=conf.keyfile,
                                  factory=default_ssl_context_factory))
    return holder.get(default_ssl_context_factory)


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
        "worker_class": "gthread",
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
