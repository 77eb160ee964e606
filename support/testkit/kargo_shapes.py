"""What Kargo v1.11.2's Stage controller writes when a promotion finishes, for engine-mode
tests and ``support/harness/dev.py --engine``, where by definition no Kargo controller runs (every
test about living next to Kargo runs the real one: support/harness/upstream/trees.py).
``tests/node/verification/test_kargo_observe.py::test_the_imitation_writes_what_the_real_kargo_writes``
checks these shapes against the real Kargo's for the same promotion.

Only the shapes rollgate reads, exactly as Kargo writes them
(pkg/controller/stages/regular_stages.go, api/v1alpha1/stage_types.go), nothing else:

- ``status.freightHistory``: newest first, at most 10, each entry
  ``{id, items: {"Warehouse/<name>": {name, origin: {kind, name}}}, verificationHistory}``
  where ``id`` is Kargo's collection id (the product's ``freight_collection_id``);
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
from collections.abc import Mapping
from typing import Any

from reconciler.verification.naming import freight_collection_id
from schemas.constants import LABEL_FREIGHT_COLLECTION, LABEL_STAGE
from schemas.kinds import GROUP_KARGO
from testkit import objects

HISTORY_LIMIT = 10


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    warehouses, names = zip(*sorted(freight.items()), strict=True)
    current = objects.freight_collection(*names, warehouses=warehouses)
    first_warehouse, first_freight = warehouses[0], names[0]
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


# ------------------------------------------------------------------ full histories
# What a Stage looks like after a long life (bench/scale.py, the cache-transform unit
# tests): Kargo keeps 10 freight collections (api/v1alpha1 FreightHistory), each with up
# to 10 verifications (VerificationInfoStack), and ``lastPromotion`` with the state of
# every step (PromotionStatus.stepExecutionMetadata, state).

VERIFICATION_LIMIT = 10
PROMOTION_STEPS = ("git-clone", "kustomize-set-image", "kustomize-build", "git-commit",
                   "git-push", "argocd-update")


def _ts(base: dt.datetime, seconds: float) -> str:
    return (base + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def history_freight_name(stage: str, k: int) -> str:
    """The Freight that was current in ``stage`` ``k`` promotions ago (0: current)."""
    return hashlib.sha1(f"{stage}/{k}".encode()).hexdigest()


def freight_reference(name: str, *, warehouse: str = "w", tag: str = "v1.0.0") -> dict[str, Any]:
    """A FreightReference as Kargo copies it into a Stage: origin, the image and the
    commit the Freight carries."""
    return {"name": name, "origin": {"kind": "Warehouse", "name": warehouse},
            "images": [{"repoURL": "ghcr.io/example/shop/web", "tag": tag,
                        "digest": "sha256:" + hashlib.sha256(name.encode()).hexdigest()}],
            "commits": [{"repoURL": "https://github.com/example/shop-config.git",
                         "id": hashlib.sha1(("c" + name).encode()).hexdigest(),
                         "branch": "main", "message": "Update web to " + tag,
                         "author": "Release Bot <release@example.com>",
                         "committer": "Release Bot <release@example.com>"}]}


def _verification(stage: str, namespace: str, cid: str, j: int,
                  at: dt.datetime) -> dict[str, Any]:
    run = f"{stage}.{hashlib.sha1(f'{cid}{j}'.encode()).hexdigest()[:26]}.{cid[:7]}"
    entry_id = hashlib.md5(run.encode()).hexdigest()
    return {"id": f"{entry_id[:8]}-{entry_id[8:12]}-{entry_id[12:16]}-{entry_id[16:20]}-"
                  f"{entry_id[20:]}",
            "actor": "admin" if j else "kargo",
            "startTime": _ts(at, -600 * j - 120), "phase": "Successful",
            "message": "", "finishTime": _ts(at, -600 * j - 60),
            "analysisRun": {"name": run, "namespace": namespace, "phase": "Successful"}}


def full_history_status(stage: str, namespace: str, *, warehouse: str = "w",
                        collections: int = HISTORY_LIMIT,
                        verifications: int = VERIFICATION_LIMIT) -> dict[str, Any]:
    """A Stage ``status`` as Kargo v1.11.2 leaves it after many promotions and reverifies:
    ``collections`` freight collections, newest first, each with ``verifications``
    finished verifications (the current one's newest first is Kargo's run), plus
    ``lastPromotion`` with its steps' state, ``health`` and ``conditions``."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    history: list[dict[str, Any]] = []
    for k in range(collections):
        name = history_freight_name(stage, k)
        cid = freight_collection_id([name])
        at = now - dt.timedelta(days=k)
        history.append({
            "id": cid,
            "items": {f"Warehouse/{warehouse}": freight_reference(
                name, warehouse=warehouse, tag=f"v1.{collections - k}.0")},
            "verificationHistory": [_verification(stage, namespace, cid, j, at)
                                    for j in range(verifications)]})
    current = history[0]
    started = now - dt.timedelta(minutes=15)
    steps = [{"alias": f"step-{s}", "startedAt": _ts(started, 20 * s),
              "finishedAt": _ts(started, 20 * s + 15), "status": "Succeeded",
              "message": f"{kind} finished"} for s, kind in enumerate(PROMOTION_STEPS)]
    state = {f"step-{s}": {"commit": hashlib.sha1(f"{stage}{s}".encode()).hexdigest(),
                           "branch": "main", "path": f"./src/{stage}",
                           "images": ["ghcr.io/example/shop/web:" + current["items"][
                               f"Warehouse/{warehouse}"]["images"][0]["tag"]]}
             for s in range(len(PROMOTION_STEPS))}
    promotion = f"{stage}.01j{hashlib.sha1(stage.encode()).hexdigest()[:23]}.{current['id'][:7]}"
    return {
        "freightHistory": history,
        "lastPromotion": {
            "name": promotion,
            "freight": current["items"][f"Warehouse/{warehouse}"],
            "status": {"phase": "Succeeded", "message": "All steps completed",
                       "lastHandledRefresh": _ts(started, 0),
                       "freight": current["items"][f"Warehouse/{warehouse}"],
                       "freightCollection": {k: v for k, v in current.items()
                                             if k != "verificationHistory"},
                       "healthChecks": [{"uses": "argocd-update", "config": {
                           "apps": [{"name": f"{stage}-web", "namespace": "argocd"}]}}],
                       "startedAt": _ts(started, 0), "finishedAt": _ts(started, 130),
                       "currentStep": len(PROMOTION_STEPS),
                       "stepExecutionMetadata": steps, "state": state},
            "finishedAt": _ts(started, 130)},
        "health": {"status": "Healthy", "output": {"argocd-update": {
            "applications": [{"name": f"{stage}-web", "namespace": "argocd",
                              "health": "Healthy", "sync": "Synced"}]}}},
        "conditions": [
            {"type": t, "status": "True" if t != "Reconciling" else "False", "reason": r,
             "message": m, "observedGeneration": 1, "lastTransitionTime": _ts(now, -300)}
            for t, r, m in (("Ready", "Verified", "Stage is ready"),
                            ("Healthy", "Healthy", "Stage is healthy"),
                            ("Verified", "Verified", "Freight has been verified"),
                            ("Reconciling", "Reconciled", "Stage is reconciled"))],
        "freightSummary": "1/1 Fulfilled",
        "lastHandledRefresh": _ts(now, -60),
        "observedGeneration": 1,
    }


def finished_analysis_run(name: str, namespace: str, *, stage: str, collection: str,
                          measurements: int = 5) -> dict[str, Any]:
    """An AnalysisRun as Argo Rollouts v1.9.1 leaves it: Successful, with its
    measurements, Kargo's labels."""
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    return objects.analysis_run(
        name, labels={LABEL_STAGE: stage, LABEL_FREIGHT_COLLECTION: collection},
        annotations={f"{GROUP_KARGO}/promotion": f"{stage}.promotion"},
        metrics=[{"name": "success-rate", "interval": "30s",
                  "count": measurements, "successCondition": "result[0] >= 0.95",
                  "provider": {"prometheus": {
                      "address": "http://prometheus.monitoring:9090",
                      "query": f'sum(rate(http_requests_total{{app="{stage}",'
                               'code!~"5.."}[2m])) / sum(rate('
                               f'http_requests_total{{app="{stage}"}}[2m]))'}}}],
        spec={"args": [{"name": "service", "value": stage}]},
        status={
            "phase": "Successful", "startedAt": _ts(now, -300), "completedAt": _ts(now, -60),
            "dryRunSummary": {}, "runSummary": {"count": 1, "successful": 1},
            "metricResults": [{"name": "success-rate", "phase": "Successful",
                               "count": measurements, "successful": measurements,
                               "measurements": [
                                   {"phase": "Successful", "value": f"[0.99{m}]",
                                    "startedAt": _ts(now, -300 + 30 * m),
                                    "finishedAt": _ts(now, -299 + 30 * m)}
                                   for m in range(measurements)]}]})
