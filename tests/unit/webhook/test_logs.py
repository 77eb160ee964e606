"""The webhook logs with the reconciler's JSON formatter, so one log query (on ``ts``,
``error``, an ``extra=`` field) works across both components."""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from kubekit import logs as kubekit_logs
from webhook.server import logs as webhook_logs


def _record(**extra: Any) -> logging.LogRecord:
    try:
        raise RuntimeError("simulated")
    except RuntimeError:
        exc_info = sys.exc_info()
    record = logging.LogRecord("rollgate.webhook", logging.ERROR, __file__, 1,
                               "internal fault for %s", ("u-1",), exc_info)
    record.created = 1_700_000_000.5  # a fixed instant: both format the same time
    record.msecs = 500.0
    for key, value in extra.items():
        setattr(record, key, value)
    return record


def test_webhook_log_line_matches_the_reconciler_format():
    record = _record(uid="u-1", endpoint="/validate/stages", attempt=2,
                     details={"a": [1, 2]}, missing=None)
    assert webhook_logs.JsonFormatter is kubekit_logs.JsonFormatter
    ours = json.loads(webhook_logs.JsonFormatter().format(record))
    assert "exc" not in ours and "RuntimeError: simulated" in ours["error"]
    assert ours["ts"] == "2023-11-14T22:13:20.500+00:00"
    assert ours["details"] == "{'a': [1, 2]}"  # a non-scalar becomes its str()
    assert ours["attempt"] == 2 and ours["missing"] is None  # scalars stay as they are
    assert ours["msg"] == "internal fault for u-1" and ours["level"] == "error"


def test_log_lines_show_non_ascii_as_written_and_escape_lone_surrogates():
    import logging

    from kubekit.logs import JsonFormatter

    record = logging.LogRecord("t", logging.INFO, "p", 1, "template %s: %s",
                               ("succès-rate", "\ud800"), None)
    line = JsonFormatter().format(record)
    assert '"msg": "template succès-rate: \\ud800"' in line
    line.encode("utf-8")  # writable to a UTF-8 stream


def test_api_errors_are_one_line_without_headers():
    from kubernetes.client.exceptions import ApiException

    from kubekit.rest import brief

    exc = ApiException(status=403, reason="Forbidden")
    exc.headers = {"Audit-Id": "x"}
    exc.body = '{"kind":"Status","message":"stages is forbidden: User cannot list"}'
    assert brief(exc) == "HTTP 403 Forbidden: stages is forbidden: User cannot list"
    assert brief(ApiException(status=0, reason="ConnectionError: refused")) == (
        "ConnectionError: refused")
