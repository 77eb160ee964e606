"""Kargo v0 ``spec.subscriptions`` -> Kargo v1 ``spec.requestedFreight`` (for
``python -m schemas migrate``), and the refusal of ``spec.promotionMechanisms``.

- ``subscriptions: {warehouse: w}`` -> ``[{origin: {kind: Warehouse, name: w},
  sources: {direct: true}}]``;
- ``subscriptions: {upstreamStages: [{name: a}, ...]}`` -> ``[{origin: {kind:
  Warehouse, name: w}, sources: {stages: [a, ...]}}]``, where ``w`` is the Warehouse the
  upstream Stages get their Freight from, found among the Stages of the files given
  (followed through their own subscriptions or requestedFreight); upstream Stages fed by
  different Warehouses give one entry per Warehouse. An upstream Stage not among the
  files is refused, naming it (Kargo v1 needs the origin; migrate does not guess it).
- ``promotionMechanisms`` is refused with a message naming
  ``spec.promotionTemplate.spec.steps``: the steps cannot be derived from it faithfully.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from schemas.constants import KIND_STAGE
from schemas.crdschema.replaced import PROMOTION_MECHANISMS, SUBSCRIPTIONS
from schemas.dispatch import owned_kind
from schemas.findings import Finding
from schemas.objects import meta_of
from schemas.translate import quote

WAREHOUSE = "Warehouse"


class StageIndex:
    """The Stages among the files given, by (namespace, name): where upstream Stages'
    Freight comes from."""

    def __init__(self, stages: Iterable[Any]) -> None:
        self._specs: dict[tuple[str, str], dict[str, Any]] = {}
        for stage in stages:
            if owned_kind(stage) != KIND_STAGE or not isinstance(stage.get("spec"), dict):
                continue
            name = meta_of(stage).get("name")
            if isinstance(name, str):
                self._specs[(_namespace(stage), name)] = stage["spec"]

    def warehouses(self, namespace: str, name: str, seen: frozenset[str] = frozenset()
                   ) -> set[str] | None:
        """The Warehouses Stage ``name`` gets Freight from, or None when unknown."""
        spec = self._specs.get((namespace, name))
        if spec is None or name in seen:
            return None
        subscriptions = spec.get("subscriptions")
        if isinstance(subscriptions, dict):
            if isinstance(subscriptions.get("warehouse"), str):
                return {subscriptions["warehouse"]}
            found: set[str] = set()
            for upstream in _upstream_names(subscriptions):
                more = self.warehouses(namespace, upstream, seen | {name})
                if more is None:
                    return None
                found |= more
            return found or None
        requested = spec.get("requestedFreight")
        origins = {r["origin"].get("name") for r in requested or []
                   if isinstance(r, dict) and isinstance(r.get("origin"), dict)
                   and r["origin"].get("kind") == WAREHOUSE}
        return {o for o in origins if isinstance(o, str)} or None


def _namespace(stage: dict[str, Any]) -> str:
    namespace = meta_of(stage).get("namespace")
    return namespace if isinstance(namespace, str) else ""


def _upstream_names(subscriptions: dict[str, Any]) -> list[str]:
    return [u["name"] for u in subscriptions.get("upstreamStages") or []
            if isinstance(u, dict) and isinstance(u.get("name"), str)]


def _refused(message: str) -> tuple[None, list[Finding]]:
    return None, [Finding(path=SUBSCRIPTIONS, message=f"cannot be migrated: {message}")]


def _from_upstream(stage: dict[str, Any], upstream: list[str], index: StageIndex
                   ) -> tuple[list[dict[str, Any]] | None, list[Finding]]:
    by_warehouse: dict[str, list[str]] = {}
    for name in upstream:
        warehouses = index.warehouses(_namespace(stage), name)
        if warehouses is None:
            return _refused(
                f"the Warehouse upstream Stage {quote(name)} gets its Freight from is not "
                "known: give migrate that Stage's file too, or write spec.requestedFreight "
                "by hand ([{origin: {kind: Warehouse, name: <warehouse>}, sources: "
                f"{{stages: [{name}]}}}}])")
        for warehouse in sorted(warehouses):
            by_warehouse.setdefault(warehouse, []).append(name)
    return [{"origin": {"kind": WAREHOUSE, "name": warehouse}, "sources": {"stages": names}}
            for warehouse, names in by_warehouse.items()], []


def requested_freight(stage: dict[str, Any], index: StageIndex
                      ) -> tuple[list[dict[str, Any]] | None, list[Finding]]:
    """``spec.requestedFreight`` for a Stage's (non-null) ``spec.subscriptions``, or the
    reasons it cannot be written."""
    spec = stage["spec"]
    subscriptions = spec["subscriptions"]
    if spec.get("requestedFreight") is not None:
        return _refused("the Stage also has spec.requestedFreight; keep one of the two")
    if not isinstance(subscriptions, dict):
        return _refused("it is not a mapping with warehouse or upstreamStages")
    warehouse = subscriptions.get("warehouse")
    upstream = _upstream_names(subscriptions)
    unknown = sorted(set(subscriptions) - {"warehouse", "upstreamStages"})
    if unknown or (warehouse is not None) == bool(upstream) or \
            len(upstream) != len(subscriptions.get("upstreamStages") or []):
        return _refused("Kargo v0 subscriptions have exactly one of warehouse (a name) and "
                        "upstreamStages (a list of {name}); fix it first")
    if warehouse is not None:
        if not isinstance(warehouse, str) or not warehouse:
            return _refused("subscriptions.warehouse must be a Warehouse name")
        return [{"origin": {"kind": WAREHOUSE, "name": warehouse},
                 "sources": {"direct": True}}], []
    return _from_upstream(stage, upstream, index)


def mechanisms_refusal() -> Finding:
    """Why a Stage with ``spec.promotionMechanisms`` is not migrated."""
    return Finding(path=PROMOTION_MECHANISMS, message=(
        "cannot be migrated: Kargo v1 replaced it with spec.promotionTemplate.spec.steps "
        "(promotion steps such as git-clone, git-update, argocd-update); write the steps "
        "by hand, remove spec.promotionMechanisms, and migrate again"))
