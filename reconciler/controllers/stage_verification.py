"""The Stage verification controller, engine mode: rollgate is the verifier.

Each pass reads the Stage, its runs and Freight from the cache, asks the pure planner
(``reconciler.verification.plan``) what to do, and carries the plan out: create the
run (by its deterministic name, so a crash or a second replica can only adopt it),
terminate superseded or aborted runs, patch Freight ``verifiedIn``, write the Stage
status once through the runtime's status helper (only what differs), then queue the
Events. Crash safety needs no memory: everything is re-derived from the objects.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from kubekit.kinds import (
    ANALYSIS_RUN,
    ANALYSIS_TEMPLATE,
    CLUSTER_ANALYSIS_TEMPLATE,
    FREIGHT,
    STAGE,
    Resource,
)
from kubekit.rest import MERGE_PATCH, is_already_exists, is_not_found, is_transient, status_of
from schemas.constants import ANNOTATION_REQUEST, KIND_ANALYSIS_TEMPLATE, LABEL_STAGE
from schemas.objects import Obj, as_dict, meta_of

from .. import verification as vf
from ..analysis import build_analysis_run, label_value, run_labels
from ..conditions import format_time
from ..runtime.status import write_status
from ..runtime.types import Cache, Context, Key, Watch
from ..runtime.watches import cached_only, enqueue_self

log = logging.getLogger("reconciler.stage-verification")

# Store index of runs by "<namespace>/<kargo.akuity.io/stage label>", the selector
# Kargo itself uses to find a Stage's runs.
RUNS_BY_STAGE = "stage"


def _stage_label_key(namespace: str, stage: str) -> str:
    return f"{namespace}/{label_value(stage)}"


def _index_run_by_stage(run: Obj) -> list[str]:
    meta = meta_of(run)
    label = as_dict(meta.get("labels")).get(LABEL_STAGE)
    return [f"{meta.get('namespace') or ''}/{label}"] if label else []


# -- watches, shared with the observe mode's controller ------------------------------


def stage_of_run(old: Obj | None, run: Obj, cache: Cache) -> list[Key]:
    """The Stage a run names (its Kargo label)."""
    stage = vf.run_stage(run)
    return [Key(meta_of(run).get("namespace") or "", stage)] if stage else []


def stages_verifying(old: Obj | None, freight: Obj, cache: Cache) -> list[Key]:
    """The Stages a Freight is verified in (``status.verifiedIn``)."""
    namespace = meta_of(freight).get("namespace") or ""
    return [Key(namespace, s) for s in as_dict(as_dict(freight.get("status")).get("verifiedIn"))]


WATCHES = (
    Watch(STAGE, enqueue_self),
    Watch(FREIGHT, stages_verifying),
    Watch(ANALYSIS_RUN, stage_of_run),
)
INDEXES = {ANALYSIS_RUN: {RUNS_BY_STAGE: _index_run_by_stage}}


def _now() -> str:
    return format_time(dt.datetime.now(dt.UTC))


def stage_runs(ctx: Context, namespace: str, stage: str) -> list[Obj]:
    """Every run labelled with the Stage (ours and another verifier's); a shortened
    label shared by two Stage names is told apart by our full-name annotation."""
    return [r for r in ctx.cache.by_index(ANALYSIS_RUN, RUNS_BY_STAGE,
                                          _stage_label_key(namespace, stage))
            if vf.run_stage(r) in (stage, label_value(stage))]


class StageVerificationController:
    name = "stage-verification"
    primary = STAGE
    # Templates are read when a run is built.
    watches = (*WATCHES, Watch(ANALYSIS_TEMPLATE, cached_only),
               Watch(CLUSTER_ANALYSIS_TEMPLATE, cached_only))
    indexes = INDEXES

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        pass

    def resync_keys(self, cache: Cache) -> Iterable[Key]:
        """Stages that no longer exist but still have verifiedIn entries or runs."""
        keys: set[Key] = set()
        for freight in cache.list(FREIGHT):
            namespace = meta_of(freight).get("namespace") or ""
            for stage in ((freight.get("status") or {}).get("verifiedIn") or {}):
                if cache.get(STAGE, namespace, stage) is None:
                    keys.add(Key(namespace, stage))
        for run in cache.list(ANALYSIS_RUN):
            stage = vf.run_stage(run)
            namespace = meta_of(run).get("namespace") or ""
            if stage and vf.is_ours(run) and cache.get(STAGE, namespace, stage) is None:
                keys.add(Key(namespace, stage))
        return keys

    # ------------------------------------------------------------------ reconcile

    def reconcile(self, key: Key, ctx: Context) -> None:
        stage = ctx.cache.get(STAGE, key.namespace, key.name)
        if stage is None or meta_of(stage).get("deletionTimestamp"):
            self._clean_up(key, ctx)
            return
        _Pass(key, stage, ctx).run()

    def _clean_up(self, key: Key, ctx: Context) -> None:
        """A deleted Stage leaves no ``verifiedIn`` entry and no run of ours behind."""
        for freight in ctx.cache.list(FREIGHT, key.namespace):
            if key.name in ((freight.get("status") or {}).get("verifiedIn") or {}):
                name = freight["metadata"]["name"]
                _patch_ignoring_missing(ctx, FREIGHT, key.namespace, name,
                                        {"status": {"verifiedIn": {key.name: None}}},
                                        subresource="status")
                log.info("removed deleted Stage from Freight verifiedIn",
                         extra={"key": str(key), "freight": name})
        # The garbage collector deletes owned runs too; doing it here makes clean-up
        # independent of it (and of a run whose owner reference was edited away).
        for run in stage_runs(ctx, key.namespace, key.name):
            if vf.is_ours(run):
                ctx.client.delete(ANALYSIS_RUN, key.namespace, run["metadata"]["name"])


class _Pass:
    """One plan-and-execute pass over one Stage."""

    def __init__(self, key: Key, stage: Obj, ctx: Context) -> None:
        self.key = key
        self.stage = stage
        self.ctx = ctx
        self.where = {"key": str(key), "controller": StageVerificationController.name}

    def run(self) -> None:
        ctx, key = self.ctx, self.key
        runs = stage_runs(ctx, key.namespace, key.name)
        world = vf.World(
            stage=self.stage,
            runs=runs,
            freight=self._freight(),
            build=self._build,
            now=_now(),
        )
        plan = vf.plan(world)
        if plan.create is not None:
            world.runs, world.blocked = self._create(plan.create, runs)
            plan = vf.plan(world)  # now with the run (or why there is none)
        if plan.conflict is not None and ctx.metrics is not None:
            ctx.metrics.verifier_conflicts.labels(key.namespace, key.name).inc()
        for terminate in plan.terminate:
            self._terminate(terminate)
        for name, body in plan.freight:
            _patch_ignoring_missing(ctx, FREIGHT, key.namespace, name, body,
                                    subresource="status")
        if plan.status is not None:
            written = write_status(ctx.client, ctx.cache, STAGE, self.stage, plan.status)
            if written is None and plan.status:
                return  # the Stage is gone; its delete event cleans up
        for event in plan.events:
            ctx.events.emit(self.stage, type=event.type, reason=event.reason,
                            message=event.message)
        for finished in plan.finished:
            self._record_finished(finished)

    # -- world -------------------------------------------------------------------
    def _freight(self) -> dict[str, Obj | None]:
        history = (self.stage.get("status") or {}).get("freightHistory") or []
        names: set[str] = set()
        if history and isinstance(history[0], dict):
            names.update(vf.freight_names(history[0]))
        return {n: self.ctx.cache.get(FREIGHT, self.key.namespace, n) for n in names}

    def _build(self, attempt: int, request: str | None) -> Obj:
        history = (self.stage.get("status") or {}).get("freightHistory") or []
        current = history[0]
        return build_analysis_run(
            self.stage, self._template, freight=vf.freight_names(current),
            collection=vf.collection_id(current), attempt=attempt, request=request,
        )

    def _template(self, kind: str, namespace: str, name: str) -> Obj | None:
        resource = ANALYSIS_TEMPLATE if kind == KIND_ANALYSIS_TEMPLATE else (
            CLUSTER_ANALYSIS_TEMPLATE)
        found = self.ctx.cache.get(resource, namespace, name)
        if found is None:
            # The cache may not have seen a template created a moment ago (a user who
            # creates it and then asks for a reverify); the API is the authority.
            found = self.ctx.client.get(resource, namespace, name)
        return found

    # -- actions -----------------------------------------------------------------
    def _create(self, run: Obj, runs: list[Obj]) -> tuple[list[Obj], dict[str, str]]:
        """Create the run, or adopt the one that holds its name; (runs, blocked names)."""
        name = run["metadata"]["name"]
        try:
            created = self.ctx.client.create(ANALYSIS_RUN, self.key.namespace, run)
        except ApiException as exc:
            if is_already_exists(exc):
                existing = self.ctx.client.get(ANALYSIS_RUN, self.key.namespace, name)
                if existing is None:
                    raise  # deleted in between: try again
                labels = meta_of(existing).get("labels") or {}
                wanted = run_labels(self.key.name, labels.get(
                    "kargo.akuity.io/freight-collection", ""), vf.run_attempt(existing))
                if all(labels.get(k) == v for k, v in wanted.items()) and vf.run_stage(
                        existing) in (self.key.name, label_value(self.key.name)):
                    self.ctx.cache.observe(ANALYSIS_RUN, existing)
                    return [*runs, existing], {}
                return runs, {name: (
                    f"AnalysisRun {name} already exists but was not created by rollgate for "
                    "this verification (its labels differ); delete or rename it, then set "
                    "annotation kargo.akuity.io/reverify on the Stage")}
            if is_transient(exc):
                raise  # retried with backoff, never recorded as final
            return runs, {name: f"the API server rejected AnalysisRun {name}: {_message(exc)}"}
        self.ctx.cache.observe(ANALYSIS_RUN, created)
        log.info("created AnalysisRun", extra={**self.where, "run": name})
        self.ctx.events.emit(self.stage, type="Normal", reason="VerificationStarted",
                             message=f"AnalysisRun {name} started")
        return [*runs, created], {}

    def _terminate(self, terminate: vf.Terminate) -> None:
        body: Obj = {"spec": {"terminate": True}}
        if terminate.request is not None:
            body["metadata"] = {"annotations": {ANNOTATION_REQUEST: terminate.request}}
        if _patch_ignoring_missing(self.ctx, ANALYSIS_RUN, self.key.namespace,
                                   terminate.run, body) is not None:
            log.info("terminated AnalysisRun", extra={**self.where, "run": terminate.run})

    # -- metrics -----------------------------------------------------------------
    def _record_finished(self, finished: vf.Finished) -> None:
        entry = finished.entry
        log.info("verification finished", extra={**self.where, "phase": entry.get("phase"),
                                                  "run": entry.get("id")})
        metrics = self.ctx.metrics
        if metrics is None:
            return
        record_finished(metrics, namespace=self.key.namespace, stage=self.stage, entry=entry)


def record_finished(metrics: Any, *, namespace: str, stage: Mapping[str, Any],
                    entry: Mapping[str, Any]) -> None:
    """Count a finished verification; its duration and, on success, the seconds from the
    promotion's end to ``Verified`` (shared by engine and observe modes)."""
    name = meta_of(stage).get("name") or ""
    phase = str(entry.get("phase"))
    metrics.verifications.labels(namespace, name, phase).inc()
    started, ended = _time(entry.get("startTime")), _time(entry.get("finishTime"))
    if started is not None and ended is not None and ended >= started:
        metrics.verification_duration.labels(phase).observe((ended - started).total_seconds())
    promoted = _time(((stage.get("status") or {}).get("lastPromotion") or {}).get("finishedAt"))
    if phase == "Successful" and promoted is not None and ended is not None and ended >= promoted:
        metrics.promotion_to_verified.observe((ended - promoted).total_seconds())


def _time(value: object) -> dt.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _patch_ignoring_missing(
    ctx: Context, resource: Resource, namespace: str, name: str, body: Mapping[str, Any], *,
    subresource: str = "",
) -> Obj | None:
    """Merge-patch; None when the object is gone. The result goes into the cache, so
    the watch's echo of this write wakes nothing (the informer skips it)."""
    try:
        updated = ctx.client.patch(resource, namespace, name, body, content_type=MERGE_PATCH,
                                   subresource=subresource)
    except ApiException as exc:
        if is_not_found(exc):
            return None
        raise
    ctx.cache.observe(resource, updated)
    return updated


def _message(exc: ApiException) -> str:
    return str(status_of(exc).get("message") or exc.reason)
