"""The look-up callables that cross-object checks receive, and their one exception.

``schemas`` does no I/O: the webhook (which owns the API client, its timeout and its
cache) passes these callables in. ``LookupUnavailable`` lets a look-up say "I cannot
answer right now" so that the checks drop the cross-object warnings instead of
reporting templates as missing when the API server is merely unreachable.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


class LookupUnavailable(Exception):
    """A look-up could not be answered (API unreachable, timeout, forbidden)."""


# template_lookup(kind, namespace, name) -> the template object, or None when it does
# not exist. kind is "AnalysisTemplate" or "ClusterAnalysisTemplate"; namespace is ""
# for cluster scope. The one definition: the webhook's look-ups, the reconciler's cache
# look-ups (the run builder) and the CLI's file look-ups all have this type.
TemplateLookup = Callable[[str, str, str], "Mapping[str, Any] | None"]
# rollout_managers(namespace) -> every RolloutManager in that namespace.
RolloutManagerLookup = Callable[[str], "list[dict[str, Any]]"]
