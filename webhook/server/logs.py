"""JSON log lines, one object per line, for the webhook and gunicorn alike, so a log
pipeline can filter on fields (uid, endpoint, result) instead of parsing text."""

from __future__ import annotations

import logging
from typing import Any

from gunicorn import glogging

# One formatter for both processes, so one log query works across the webhook and the
# reconciler: ts, level, logger, msg, every extra= field, and error for a traceback
# (re-exported by name: tests/unit/webhook/test_logs.py checks it is the one).
from kubekit.logs import JsonFormatter as JsonFormatter
from kubekit.logs import setup


def configure(*, level: str = "INFO") -> None:
    """Send the application's loggers to stderr as JSON (inherited by forked workers)."""
    setup(level)


class _QuietTimeouts(logging.Filter):
    """gunicorn logs a socket timeout (a client that stalled in the TLS handshake or
    while sending its request; see ``webhook.server.gunicorn_conf.BoundedSSLSocket``) as an
    error with a traceback. It is the client's doing and can be provoked at will, so it
    becomes one short info line."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, TimeoutError):
            record.msg, record.args = "closed a connection that stalled: %s", (exc,)
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


class GunicornJsonLogger(glogging.Logger):
    """gunicorn's own logger with JSON formatting. The access log stays off unless
    gunicorn's ``accesslog`` is set: formatting it costs more than the admission
    decision itself, and decisions that matter (denials, faults) are logged anyway."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        if not any(isinstance(f, _QuietTimeouts) for f in self.error_log.filters):
            self.error_log.addFilter(_QuietTimeouts())
        for logger in (self.error_log, self.access_log):
            for handler in logger.handlers:
                handler.setFormatter(JsonFormatter())
