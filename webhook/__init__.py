"""The rollgate admission webhook: the admission decisions, and (``webhook.server``) the
HTTP server behind ``python -m webhook``.

Here, with no HTTP framework: ``admission`` (AdmissionReview v1 in, AdmissionReview out,
as pure functions), ``payloads`` (its types), ``lookups`` (the cross-object look-ups,
with their cache and per-request budget), ``config`` (the app's settings), ``metrics``
(Prometheus, multiprocess under gunicorn). ``webhook.server`` holds the app, the
gunicorn worker, HTTP/1.1, framing, TLS and gunicorn's settings; none of the modules
above imports it or gunicorn (an import-linter contract in ``pyproject.toml``).

``create_app`` is imported lazily: ``python -m webhook`` must set
``PROMETHEUS_MULTIPROC_DIR`` before prometheus-client is first imported (it picks
its value storage at import time), and importing this package comes first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from webhook.config import Lookups, WebhookConfig

if TYPE_CHECKING:
    from webhook.server.app import create_app

__all__ = ["Lookups", "WebhookConfig", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from webhook.server.app import create_app

        return create_app
    raise AttributeError(f"module 'webhook' has no attribute {name!r}")
