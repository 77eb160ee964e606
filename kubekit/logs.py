"""JSON log lines, one object per line, so logs can be filtered by key or controller."""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys

# Attributes every LogRecord has; anything else came in through ``extra=``.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for k, v in vars(record).items():
            if k not in _STANDARD and not k.startswith("_"):
                out[k] = v if isinstance(v, (str, int, float, bool, type(None))) else str(v)
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        # Non-ASCII as written (readable logs); a lone surrogate, which a client can
        # send in any string it controls, escaped rather than failing the write.
        text = json.dumps(out, default=str, ensure_ascii=False)
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def setup(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # urllib3 warns about every discarded pooled connection; that is noise here.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
