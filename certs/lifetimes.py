"""How long certificates live and when they are renewed (pure).

Lifetimes are written as Go durations (``8760h``, ``90m``), as cert-manager's
``duration`` and ``renewBefore`` are, so the chart's values read the same for every
certificate source. A certificate is due for renewal once two thirds of its lifetime
have passed (cert-manager's default as well): a year-long serving certificate is
re-issued with four months left, a renewal that fails keeps being retried long before
anything expires, and the expiry alerts (14 and 2 days) never fire while renewal works.
"""

from __future__ import annotations

import datetime as dt
import re

from cryptography import x509

SERVING_LIFETIME = dt.timedelta(hours=8760)
# The CA outlives several serving certificates, and is rotated (docs/install.md "Certificates")
# at two thirds of its own lifetime, long before a leaf it signed would be cut short.
CA_LIFETIME = dt.timedelta(hours=43800)

_DURATION = re.compile(r"(\d+)(h|m|s)")
_UNIT = {"h": "hours", "m": "minutes", "s": "seconds"}


def parse_duration(text: str) -> dt.timedelta:
    """``8760h``, ``1h30m``, ``90s``: a positive Go-style duration in h, m and s."""
    parts = _DURATION.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"{text!r} is not a duration like 8760h, 90m or 1h30m")
    total = dt.timedelta(0)
    for number, unit in parts:
        total += dt.timedelta(**{_UNIT[unit]: int(number)})
    if total <= dt.timedelta(0):
        raise ValueError(f"{text!r}: a lifetime must be longer than 0")
    return total


def renewal_due(cert: x509.Certificate, *, now: dt.datetime) -> bool:
    """Two thirds of ``cert``'s lifetime have passed (or it is not yet/no longer valid)."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    if not start <= now < end:
        return True
    return now >= start + (end - start) * 2 / 3
