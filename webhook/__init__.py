"""The rollgate admission webhook: Flask app (AdmissionReview v1), cross-object
look-ups, metrics, and the gunicorn TLS server behind ``python -m webhook``.

``create_app`` is imported lazily: ``python -m webhook`` must set
``PROMETHEUS_MULTIPROC_DIR`` before prometheus-client is first imported (it picks
its value storage at import time), and importing this package comes first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from webhook.config import Lookups, WebhookConfig

if TYPE_CHECKING:
    from webhook.app import create_app

__all__ = ["Lookups", "WebhookConfig", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from webhook.app import create_app

        return create_app
    raise AttributeError(f"module 'webhook' has no attribute {name!r}")
