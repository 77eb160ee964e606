"""Runtime settings of the webhook app, separate from how they are parsed (CLI) so
tests build the app with fakes and the server builds it from flags."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from schemas.lookups import RolloutManagerLookup, TemplateLookup

MAX_BODY_BYTES = 8 * 1024 * 1024


class MustWait(BaseException):
    """Raised by a look-up that answers from its cache only (``webhook.lookups``,
    ``cached_only``) when only the API server can answer. A BaseException, so that no
    check's ``except Exception`` takes it for a look-up that failed (which would answer
    the request without that look-up's warnings): it ends the attempt, and the request
    is answered again where the look-up may wait."""


# Not frozen: a frozen dataclass sets each field through object.__setattr__, and one is
# built for every admission request (ClusterLookups.for_request); nothing changes one.
# eq=False keeps it hashable (by identity), as WebhookConfig, which holds one, is.
@dataclass(slots=True, eq=False)
class Lookups:
    """The cross-object look-ups handed to ``schemas``; ``None`` means "not available",
    and the checks that need them are skipped (docs/comparison.md "Decisions where upstream left
    a question open": the request is answered without the cross-object warnings).

    ``per_request``, when set, is called once per admission request and its result is
    used instead: that is how every request gets its own look-up budget (one deadline
    shared by all of its look-ups, see :mod:`webhook.lookups`).
    """

    template: TemplateLookup | None = None
    rollout_managers: RolloutManagerLookup | None = None
    per_request: Callable[[], Lookups] | None = None

    def begin(self) -> Lookups:
        """The look-ups for one admission request."""
        return self.per_request() if self.per_request is not None else self


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    """Settings for :func:`webhook.create_app`.

    ``lookups`` wins over ``api_client``; with neither, no cross-object warnings are
    produced. ``api_client`` is an official-client ``ApiClient``; the app wraps it in
    :class:`webhook.lookups.ClusterLookups` with ``lookup_timeout`` and ``cache_ttl``.
    ``lookup_timeout`` is the per-request budget: all look-ups of one admission request
    together wait at most this long.
    ``bench_noop`` adds ``POST /noop`` (a constant allow) for bench/admission.py only.
    """

    allow_http_plugins: bool = False
    lookup_timeout: float = 2.0
    cache_ttl: float = 5.0
    api_client: Any = None
    lookups: Lookups | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    bench_noop: bool = False
