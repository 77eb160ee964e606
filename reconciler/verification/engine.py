"""The Stage verification controller, engine mode: rollgate is the verifier (docs/verification.md,
"Engine mode").

Each pass reads the Stage, its runs, Freight and the templates its run reads (the cache
first, then the API for one the cache has not seen), asks the pure planner
(``reconciler.verification.plan``) once what to do, and carries the plan out: create the
run (by its deterministic name, so a crash or a second replica can only adopt it),
terminate superseded or aborted runs, patch Freight ``verifiedIn``, write the Stage
status once through the runtime's status helper (only what differs), then queue the
Events. A create that comes out other than planned (the name held by a run the cache had
not seen, or refused) ends the pass, and a second pass plans from what it found. Crash
safety needs no memory: everything is re-derived from the objects.
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
from schemas.constants import (
    ANNOTATION_REQUEST,
    KIND_ANALYSIS_TEMPLATE,
    LABEL_FREIGHT_COLLECTION,
)
from schemas.objects import Obj, as_dict, meta_of
from schemas.references import TemplateKey

from ..conditions import format_time
from ..runtime.status import write_status
from ..runtime.types import Cache, Context, Controller, Key, Watch
from ..runtime.watches import cached_only
from . import plan as planner
from . import slim
from .analysis_run import referenced_templates
from .metrics import VerificationMetrics
from .naming import label_value, run_labels
from .options import VerificationOptions
from .payloads import (
    current_freight,
    freight_history,
    freight_names,
    is_ours,
    run_attempt,
    run_stage,
    verified_in,
)
from .watches import ENGINE_INDEXES, ENGINE_WATCHES, stage_runs

log = logging.getLogger("reconciler.stage-verification")


class StageVerificationController(Controller):
    name = "stage-verification"
    primary = STAGE
    # The templates a Stage's run reads: the pass resolves them before it plans.
    watches = (*ENGINE_WATCHES, Watch(ANALYSIS_TEMPLATE, cached_only),
               Watch(CLUSTER_ANALYSIS_TEMPLATE, cached_only))
    indexes = ENGINE_INDEXES
    # What the cache keeps (docs/components.md, "What the cache keeps"): what the planner reads and
    # the status write carries whole.
    transforms = {STAGE: slim.engine_stage, FREIGHT: slim.freight, ANALYSIS_RUN: slim.engine_run,
                  ANALYSIS_TEMPLATE: slim.strip_metadata,
                  CLUSTER_ANALYSIS_TEMPLATE: slim.strip_metadata}

    def __init__(self, *, options: VerificationOptions | None = None) -> None:
        """``options``: the feature's flags, kept as every controller keeps them; engine
        mode reads none of them but the mode, which chose this class."""
        self.options = options if options is not None else VerificationOptions()
        self.metrics = VerificationMetrics()
        self.collectors = self.metrics.collectors  # served by the runtime on /metrics

    def resync_keys(self, cache: Cache) -> Iterable[Key]:
        """Stages that no longer exist but still have verifiedIn entries or runs."""
        keys: set[Key] = set()
        for freight in cache.list(FREIGHT):
            namespace = meta_of(freight).get("namespace") or ""
            for stage in verified_in(freight):
                if cache.get(STAGE, namespace, stage) is None:
                    keys.add(Key(namespace, stage))
        for run in cache.list(ANALYSIS_RUN):
            owner = run_stage(run)
            namespace = meta_of(run).get("namespace") or ""
            if owner and is_ours(run) and cache.get(STAGE, namespace, owner) is None:
                keys.add(Key(namespace, owner))
        return keys

    # ------------------------------------------------------------------ reconcile

    def reconcile(self, key: Key, ctx: Context) -> None:
        stage = ctx.cache.get(STAGE, key.namespace, key.name)
        if stage is None or meta_of(stage).get("deletionTimestamp"):
            self._clean_up(key, ctx)
            return
        blocked: Mapping[str, str] = {}
        # A second pass only after a create that came out other than planned; its own
        # create cannot: the run it adopts is in the cache now, a blocked name is not
        # created again.
        for _ in range(2):
            unplanned = _Pass(key, stage, ctx, self.metrics, blocked=blocked).run()
            if unplanned is None:
                return
            blocked = unplanned

    def _clean_up(self, key: Key, ctx: Context) -> None:
        """A deleted Stage leaves no ``verifiedIn`` entry and no run of ours behind."""
        for freight in ctx.cache.list(FREIGHT, key.namespace):
            if key.name in verified_in(freight):
                name = freight["metadata"]["name"]
                _patch_ignoring_missing(ctx, FREIGHT, key.namespace, name,
                                        {"status": {"verifiedIn": {key.name: None}}},
                                        subresource="status")
                log.info("removed deleted Stage from Freight verifiedIn",
                         extra={"key": str(key), "freight": name})
        # The garbage collector deletes owned runs too; doing it here makes clean-up
        # independent of it (and of a run whose owner reference was edited away).
        for run in stage_runs(ctx.cache, key.namespace, key.name):
            if is_ours(run):
                ctx.client.delete(ANALYSIS_RUN, key.namespace, run["metadata"]["name"])


class _Pass:
    """One pass over one Stage: read the world, plan once, carry the plan out."""

    def __init__(self, key: Key, stage: Obj, ctx: Context, metrics: VerificationMetrics, *,
                 blocked: Mapping[str, str]) -> None:
        self.key = key
        self.stage = stage
        self.ctx = ctx
        self.metrics = metrics
        self.blocked = blocked  # what a create of the pass before found (see _create)
        self.where = {"key": str(key), "controller": StageVerificationController.name}

    def run(self) -> dict[str, str] | None:
        """None once the plan is carried out; when its create came out other than
        planned, what the next pass must know instead (see ``_create``)."""
        ctx, key = self.ctx, self.key
        world = planner.World(
            stage=self.stage,
            runs=stage_runs(ctx.cache, key.namespace, key.name),
            freight=self._freight(),
            templates=self._templates(),
            now=format_time(dt.datetime.now(dt.UTC)),
            blocked=self.blocked,
        )
        plan = planner.plan(world)
        if plan.create is not None:
            unplanned = self._create(plan.create)
            if unplanned is not None:
                return unplanned
        self._carry_out(plan)
        return None

    def _carry_out(self, plan: planner.Plan) -> None:
        """The plan's writes after the create, then its Events and metrics."""
        ctx, key = self.ctx, self.key
        if plan.conflict is not None:
            self.metrics.conflict(key.namespace, key.name)
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
        """The Freight of every collection in the history, not only the current one: a
        run of older freight that succeeded on its own marks that older Freight
        too, and the planner can only mark a Freight it is given."""
        names = {n for c in freight_history(self.stage) for n in freight_names(c)}
        return {n: self.ctx.cache.get(FREIGHT, self.key.namespace, n) for n in sorted(names)}

    def _templates(self) -> dict[TemplateKey, Mapping[str, Any]]:
        """The templates the run of the Stage's current freight reads (none without
        one: the planner builds only for the current freight)."""
        if current_freight(self.stage) is None:
            return {}
        return referenced_templates(self.stage, self._template)

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
    def _create(self, run: Obj) -> dict[str, str] | None:
        """Create the run as planned (None), or find why not: ``{}`` when a run of ours
        for this verification holds the name (adopted: the cache has it now), else the
        name and why it is blocked (a foreign object holds it, the API refused it)."""
        name = run["metadata"]["name"]
        try:
            created = self.ctx.client.create(ANALYSIS_RUN, self.key.namespace, run)
        except ApiException as exc:
            if is_already_exists(exc):
                existing = self.ctx.client.get(ANALYSIS_RUN, self.key.namespace, name)
                if existing is None:
                    raise  # deleted in between: try again
                labels = as_dict(meta_of(existing).get("labels"))
                wanted = run_labels(self.key.name, labels.get(LABEL_FREIGHT_COLLECTION, ""),
                                    run_attempt(existing))
                if all(labels.get(k) == v for k, v in wanted.items()) and run_stage(
                        existing) in (self.key.name, label_value(self.key.name)):
                    self.ctx.cache.observe(ANALYSIS_RUN, existing)
                    return {}
                return {name: (
                    f"AnalysisRun {name} already exists but was not created by rollgate for "
                    "this verification (its labels differ); delete or rename it, then set "
                    "annotation kargo.akuity.io/reverify on the Stage")}
            if is_transient(exc):
                raise  # retried with backoff, never recorded as final
            return {name: f"the API server rejected AnalysisRun {name}: {_message(exc)}"}
        self.ctx.cache.observe(ANALYSIS_RUN, created)
        log.info("created AnalysisRun", extra={**self.where, "run": name})
        self.ctx.events.emit(self.stage, type="Normal", reason="VerificationStarted",
                             message=f"AnalysisRun {name} started")
        return None

    def _terminate(self, terminate: planner.Terminate) -> None:
        body: Obj = {"spec": {"terminate": True}}
        if terminate.request is not None:
            body["metadata"] = {"annotations": {ANNOTATION_REQUEST: terminate.request}}
        if _patch_ignoring_missing(self.ctx, ANALYSIS_RUN, self.key.namespace,
                                   terminate.run, body) is not None:
            log.info("terminated AnalysisRun", extra={**self.where, "run": terminate.run})

    # -- metrics -----------------------------------------------------------------
    def _record_finished(self, finished: planner.Finished) -> None:
        entry = finished.entry
        log.info("verification finished", extra={**self.where, "phase": entry.get("phase"),
                                                  "run": entry.get("id")})
        self.metrics.record_finished(namespace=self.key.namespace, stage=self.stage, entry=entry)


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
