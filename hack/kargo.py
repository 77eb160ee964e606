"""What Kargo v1.11.2's Stage controller writes when a promotion finishes, for engine-mode
tests and ``hack/dev.py --engine``, where by definition no Kargo controller runs (every
test about living next to Kargo runs the real one: hack/upstream.py).
``tests/e2e/test_kargo_observe.py::test_the_imitation_writes_what_the_real_kargo_writes``
checks these shapes against the real Kargo's for the same promotion.

Only the shapes rollgate reads, exactly as Kargo writes them
(pkg/controller/stages/regular_stages.go, api/v1alpha1/stage_types.go), nothing else:

- ``status.freightHistory``: newest first, at most 10, each entry
  ``{id, items: {"Warehouse/<name>": {name, origin: {kind, name}}}, verificationHistory}``
  where ``id`` is the hex SHA-1 of the sorted Freight names joined by ``,``;
- ``status.lastPromotion``: ``{name, freight: {name, origin}, status: {phase,
  freightCollection}, finishedAt}``, ``status.currentPromotion`` removed;
- ``status.health``: ``{status: Healthy}``, which Kargo writes after a promotion whose
  steps had no health checks.

Kargo writes Stage status with JSON merge patches that replace whole lists, so a
promotion patch carries the whole new ``freightHistory`` (older entries keep their
``verificationHistory``).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

HISTORY_LIMIT = 10


def collection_id(names: Sequence[str]) -> str:
    return hashlib.sha1(",".join(sorted(names)).encode()).hexdigest()


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def freight_collection(freight: Mapping[str, str]) -> dict[str, Any]:
    """``freight``: Warehouse name -> Freight name."""
    return {
        "id": collection_id(list(freight.values())),
        "items": {
            f"Warehouse/{warehouse}": {"name": name,
                                       "origin": {"kind": "Warehouse", "name": warehouse}}
            for warehouse, name in sorted(freight.items())
        },
    }


def promotion_patch(
    stage: Mapping[str, Any] | None,
    freight: Mapping[str, str],
    *,
    promotion: str,
    health: str = "Healthy",
    finished_at: str | None = None,
) -> dict[str, Any]:
    """The status merge patch of a successful promotion of ``freight`` into ``stage``
    (its current object, or None for a Stage with no status yet)."""
    status = (stage or {}).get("status") or {}
    older = [c for c in status.get("freightHistory") or [] if isinstance(c, dict)]
    current = freight_collection(freight)
    first_warehouse, first_freight = sorted(freight.items())[0]
    return {"status": {
        "freightHistory": [current, *older][:HISTORY_LIMIT],
        "currentPromotion": None,
        "lastPromotion": {
            "name": promotion,
            "freight": {"name": first_freight,
                        "origin": {"kind": "Warehouse", "name": first_warehouse}},
            "status": {"phase": "Succeeded", "freightCollection": current},
            "finishedAt": finished_at or _now(),
        },
        "health": {"status": health},
    }}


def promotion_patch_json(stage: Mapping[str, Any] | None, freight: Mapping[str, str], *,
                         promotion: str, health: str = "Healthy") -> str:
    return json.dumps(promotion_patch(stage, freight, promotion=promotion, health=health),
                      separators=(",", ":"))
