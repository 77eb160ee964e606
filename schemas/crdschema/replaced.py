"""Kargo v0 Stage fields that Kargo v1 replaced: their unknown-field error names the
replacement, so a user with an old manifest learns what to write instead."""

from __future__ import annotations

from typing import Final

from schemas.constants import KIND_STAGE
from schemas.findings import Path

SUBSCRIPTIONS: Final = ("spec", "subscriptions")
PROMOTION_MECHANISMS: Final = ("spec", "promotionMechanisms")

_REPLACED: Final[dict[tuple[str, Path], str]] = {
    (KIND_STAGE, SUBSCRIPTIONS): (
        "Kargo v1 replaced it with spec.requestedFreight "
        "(`rollgate migrate` rewrites it)"),
    (KIND_STAGE, PROMOTION_MECHANISMS): (
        "Kargo v1 replaced it with spec.promotionTemplate.spec.steps "
        "(write the steps by hand: migrate cannot guess them)"),
}


def replacement(kind: str, path: Path) -> str | None:
    """What to write instead of the old field at ``path``, or None."""
    return _REPLACED.get((kind, path))
