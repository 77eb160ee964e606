"""Runtime settings of the webhook app, separate from how they are parsed (CLI) so
tests build the app with fakes and the server builds it from flags."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# schemas' look-up callables (see schemas.check_stage / schemas.check_rollout_manager).
TemplateLookup = Callable[[str, str, str], dict[str, Any] | None]
RolloutManagersLookup = Callable[[str], list[dict[str, Any]]]

MAX_BODY_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Lookups:
    """The cross-object look-ups handed to ``schemas``; ``None`` means "not available",
    and the checks that need them are skipped (DESIGN.md: answer without them)."""

    template: TemplateLookup | None = None
    rollout_managers: RolloutManagersLookup | None = None


@dataclass(frozen=True, slots=True)
class WebhookConfig:
    """Settings for :func:`webhook.create_app`.

    ``lookups`` wins over ``api_client``; with neither, no cross-object warnings are
    produced. ``api_client`` is an official-client ``ApiClient``; the app wraps it in
    :class:`webhook.lookups.ClusterLookups` with ``lookup_timeout`` and ``cache_ttl``.
    ``bench_noop`` adds ``POST /noop`` (a constant allow) for bench/admission.py only.
    """

    allow_http_plugins: bool = False
    lookup_timeout: float = 2.0
    cache_ttl: float = 5.0
    api_client: Any = None
    lookups: Lookups | None = None
    max_body_bytes: int = MAX_BODY_BYTES
    bench_noop: bool = False
