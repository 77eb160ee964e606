"""Certificates for the webhook: a CA and serving certificate made with
``cryptography``, the caBundle, and its injection into webhook configurations.

The kubernetes client is imported lazily by :func:`inject` so ``certs.generate`` stays
usable (and fast to import) where only files are needed, e.g. the test harness.
"""

from __future__ import annotations

from typing import Any

from certs.bundle import ca_bundle
from certs.generate import CertPaths, generate, service_sans

__all__ = ["CertPaths", "ca_bundle", "generate", "inject", "service_sans"]


def inject(api_client: Any, **kwargs: Any) -> list[str]:
    """See :func:`certs.inject.inject`."""
    from certs.inject import inject as _inject

    return _inject(api_client, **kwargs)
