"""gunicorn settings and hooks for the webhook: gunicorn runs the worker processes of
:class:`webhook.server.worker.WebhookWorker` (which serves TLS 1.2+ with AEAD suites
only and certificate reload itself, :mod:`webhook.server.tls`), with JSON logs and
prometheus multiprocess clean-up.

``python -m webhook`` builds its settings from :func:`settings`; the hook is a module
function so gunicorn can also load this file with ``-c`` if someone runs it by hand.
"""

from __future__ import annotations

import os
from typing import Any

from webhook.server.logs import GunicornJsonLogger
from webhook.server.worker import Limits, WebhookWorker

# The API server keeps connections to webhooks alive (Go's default idle timeout is
# 90 s); closing idle ones sooner makes it re-handshake TLS on the admission path, and a
# server-side close racing a new request is a failed call. 75 s keeps most reuse.
KEEPALIVE_SECONDS = 75


def child_exit(server: Any, worker: Any) -> None:
    """Drop a dead worker's live-gauge files so /metrics does not count it."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


def settings(*, bind: str, certfile: str, keyfile: str, workers: int = 2, threads: int = 4,
             log_level: str = "info", limits: Limits | None = None) -> dict[str, Any]:
    """The gunicorn settings for one webhook server."""
    return {
        "bind": [bind],
        "worker_class": WebhookWorker.with_limits(limits or Limits()),
        "workers": workers,
        "threads": threads,
        "keepalive": KEEPALIVE_SECONDS,
        # Read by the worker, which loads them (and reloads them when they change).
        "certfile": certfile,
        "keyfile": keyfile,
        "child_exit": child_exit,
        "logger_class": GunicornJsonLogger,
        "loglevel": log_level,
        # gunicorn's runtime control socket would be created under $HOME (read-only in
        # the Deployment) and shared by every server on a machine; nothing uses it.
        "control_socket_disable": True,
        # The webhook timeout on the API server side is 5 s; a worker stuck far longer
        # than that is hung, not busy.
        "timeout": 30,
        "graceful_timeout": 10,
        "proc_name": "rollgate-webhook",
    }
