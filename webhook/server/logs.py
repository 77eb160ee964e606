"""JSON log lines, one object per line, for the webhook and gunicorn alike, so a log
pipeline can filter on fields (uid, endpoint, result) instead of parsing text."""

from __future__ import annotations

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


class GunicornJsonLogger(glogging.Logger):
    """gunicorn's own logger (the arbiter's lines and the worker's) with JSON formatting.
    The worker writes no access log: formatting one line costs more than the admission
    decision itself, and decisions that matter (denials, faults) are logged anyway."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for logger in (self.error_log, self.access_log):
            for handler in logger.handlers:
                handler.setFormatter(JsonFormatter())
