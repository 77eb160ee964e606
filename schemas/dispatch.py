"""``check``: one entry point for any object, dispatching on its kind.

Callers (webhook, CLI) hand over whatever they received; kinds rollgate does not own get
``[]`` so that a mixed manifest file or a mis-registered webhook never denies them.
"""

from __future__ import annotations

from typing import Any

from schemas.constants import KIND_ROLLOUT_MANAGER, KIND_STAGE
from schemas.findings import Finding
from schemas.kinds import KINDS
from schemas.lookups import RolloutManagerLookup, TemplateLookup
from schemas.plugins import check_rollout_manager
from schemas.stage import check_stage
from schemas.verdicts import Verdicts

# The kinds rollgate checks; one from another API group is someone else's resource.
_OWNED = frozenset({KIND_STAGE, KIND_ROLLOUT_MANAGER})


def _ours(obj: dict[str, Any], kind: str) -> bool:
    api_version = obj.get("apiVersion")
    if not isinstance(api_version, str) or "/" not in api_version:
        return True  # no group given (a bare test object): judge it by kind alone
    return api_version.split("/", 1)[0] == KINDS[kind].group


def owned_kind(obj: Any) -> str | None:
    """The kind of ``obj`` when it is one rollgate checks (a Stage or RolloutManager of
    the right API group), else None."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if isinstance(kind, str) and kind in _OWNED and _ours(obj, kind):
        return kind
    return None


def check(
    obj: Any,
    *,
    template_lookup: TemplateLookup | None = None,
    rollout_managers: RolloutManagerLookup | None = None,
    allow_http_plugins: bool = False,
    served: bool = False,
    verdicts: Verdicts | None = None,
) -> list[Finding]:
    """Every finding for ``obj`` (errors and warnings), or ``[]`` for other kinds.

    ``served``: the API server accepted ``obj`` (admission and the reconciler; not the
    offline CLI): see ``schemas.skew``. ``verdicts``: a Stage's findings kept from
    earlier calls (``schemas.verdicts``)."""
    kind = owned_kind(obj)
    if kind == KIND_STAGE:
        return check_stage(obj, template_lookup=template_lookup, served=served,
                           verdicts=verdicts)
    if kind == KIND_ROLLOUT_MANAGER:
        return check_rollout_manager(
            obj, allow_http_plugins=allow_http_plugins, rollout_managers=rollout_managers,
            served=served)
    return []
