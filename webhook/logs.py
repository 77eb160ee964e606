"""JSON log lines, one object per line, for the webhook and gunicorn alike, so a log
pipeline can filter on fields (uid, endpoint, result) instead of parsing text."""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from typing import Any

from gunicorn import glogging

# Attributes every LogRecord has; anything else was passed via ``extra=`` and is
# emitted as a field.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message", "asctime", "taskName",
}
# JSON scalars are emitted as they are; anything else as its str(), as the reconciler does.
_SCALARS = (str, int, float, bool, type(None))


class JsonFormatter(logging.Formatter):
    """The same fields, built the same way, as reconciler/runtime/logs.py's formatter,
    so one log pipeline query works for both components: ``ts`` (UTC ISO 8601 with
    milliseconds), ``level``, ``logger``, ``msg``, every ``extra=`` field (non-scalars as
    strings) and ``error`` for a traceback."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value if isinstance(value, _SCALARS) else str(value)
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def configure(*, level: str = "INFO") -> None:
    """Send the application's loggers to stderr as JSON (inherited by forked workers)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


class _QuietTimeouts(logging.Filter):
    """gunicorn logs a socket timeout (a client that stalled in the TLS handshake or
    while sending its request; see ``webhook.gunicorn_conf.BoundedSSLSocket``) as an
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
