"""The Stage verification controller: gate, run, record (DESIGN.md "Verification behaviour").

Crash safety comes from two things, not from remembering anything in memory: the
run's name is a pure function of (Stage, freight collection, attempt), so creating it
again after a crash hits AlreadyExists and adopts the existing run; and every side
effect (Freight ``verifiedIn``, annotation removal) is re-derived from the status on
each reconcile, so an interrupted reconcile is finished by the next one.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

import schemas
from schemas.constants import (
    ANNOTATION_ABORT,
    ANNOTATION_REVERIFY,
    KIND_ANALYSIS_TEMPLATE,
    LABEL_ATTEMPT,
    LABEL_FREIGHT_COLLECTION,
    LABEL_MANAGED_BY,
    LABEL_STAGE,
    MANAGED_BY,
)
from schemas.pointer import to_pointer

from .. import verification as vf
from ..analysis import (
    AnalysisBuildError,
    build_analysis_run,
    freight_collection_id,
    label_value,
    run_labels,
    run_name,
)
from ..conditions import format_time
from ..runtime.rest import (
    JSON_PATCH,
    MERGE_PATCH,
    Rest,
    is_already_exists,
    is_conflict,
    is_not_found,
    is_transient,
)
from ..runtime.types import (
    ANALYSIS_RUN,
    ANALYSIS_TEMPLATE,
    APPLICATION,
    CLUSTER_ANALYSIS_TEMPLATE,
    FREIGHT,
    STAGE,
    Context,
    Key,
    Obj,
    Requeue,
    Resource,
)

log = logging.getLogger("reconciler.stage-verification")

MAX_CONFLICT_RETRIES = 5
# An Application outside the watched namespaces is read from the API, not watched, so
# no event will wake a Stage that waits on it: poll at this period instead.
UNWATCHED_APP_POLL_SECONDS = 10.0


class _Conflict(Exception):
    """Our view of the Stage is stale: re-read it and decide again."""


def _now() -> str:
    return format_time(dt.datetime.now(dt.UTC))


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def owning_stage(run: Mapping[str, Any]) -> str | None:
    """Name of the Stage that owns a run rollgate made (owner reference, else labels)."""
    meta = _meta(run)
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "Stage" and ref.get("controller"):
            return ref.get("name")
    labels = meta.get("labels") or {}
    if labels.get(LABEL_MANAGED_BY) == MANAGED_BY and labels.get(LABEL_STAGE):
        # A shortened label carries its full value in the annotation of the same key.
        return (meta.get("annotations") or {}).get(LABEL_STAGE) or labels[LABEL_STAGE]
    return None


class StageVerificationController:
    name = "stage-verification"
    primary = STAGE
    watches = (STAGE, FREIGHT, ANALYSIS_RUN, ANALYSIS_TEMPLATE, CLUSTER_ANALYSIS_TEMPLATE,
               APPLICATION)

    def __init__(self) -> None:
        # Application (namespace, name) -> Stages gated on it; built from Stage events
        # because an Application (usually in "argocd") does not point back at Stages.
        self._lock = threading.Lock()
        self._app_index: dict[tuple[str, str], set[Key]] = {}
        self._stage_apps: dict[Key, set[tuple[str, str]]] = {}

    # ------------------------------------------------------------------ mapping

    def map_event(self, resource: Resource, obj: Obj) -> Iterable[Key]:
        meta = _meta(obj)
        ns = meta.get("namespace") or ""
        if resource == STAGE:
            self._index_stage(Key(ns, meta.get("name", "")), obj)
            return []
        if resource == ANALYSIS_RUN:
            stage = owning_stage(obj)
            return [Key(ns, stage)] if stage else []
        if resource == FREIGHT:
            return [Key(ns, s) for s in vf.stages_in_verified_in(obj)]
        if resource == APPLICATION:
            with self._lock:
                return list(self._app_index.get((ns, meta.get("name", "")), ()))
        return []  # templates are read at build time; a new one needs a reverify

    def _index_stage(self, key: Key, stage: Obj) -> None:
        apps = set(vf.argocd_apps(stage))
        with self._lock:
            for app in self._stage_apps.get(key, set()) - apps:
                self._app_index.get(app, set()).discard(key)
            for app in apps:
                self._app_index.setdefault(app, set()).add(key)
            self._stage_apps[key] = apps

    def resync_keys(self, cache: Any) -> Iterable[Key]:
        """Stages that no longer exist but still have verifiedIn entries or runs."""
        keys: set[Key] = set()
        for freight in cache.list(FREIGHT):
            ns = _meta(freight).get("namespace") or ""
            for stage in vf.stages_in_verified_in(freight):
                if cache.get(STAGE, ns, stage) is None:
                    keys.add(Key(ns, stage))
        for run in cache.list(ANALYSIS_RUN):
            stage = owning_stage(run)
            ns = _meta(run).get("namespace") or ""
            if stage and (_meta(run).get("labels") or {}).get(LABEL_MANAGED_BY) == MANAGED_BY \
                    and cache.get(STAGE, ns, stage) is None:
                keys.add(Key(ns, stage))
        return keys

    # ------------------------------------------------------------------ reconcile

    def reconcile(self, key: Key, ctx: Context) -> None:
        rest = Rest(ctx.api)
        stage = ctx.cache.get(STAGE, key.namespace, key.name)
        for _ in range(MAX_CONFLICT_RETRIES):
            if stage is None or _meta(stage).get("deletionTimestamp"):
                self._clean_up(key, ctx, rest)
                return
            try:
                _Sync(self, key, stage, ctx, rest).run()
                return
            except _Conflict:
                # The cache lags our own writes; the API has the truth.
                stage = rest.get(STAGE, key.namespace, key.name)
        raise RuntimeError(f"Stage {key} kept changing under us; will retry")

    def _clean_up(self, key: Key, ctx: Context, rest: Rest) -> None:
        with self._lock:
            for app in self._stage_apps.pop(key, set()):
                self._app_index.get(app, set()).discard(key)
        for freight in ctx.cache.list(FREIGHT, key.namespace):
            if key.name in vf.stages_in_verified_in(freight):
                name = _meta(freight)["name"]
                body = {"status": {"verifiedIn": {key.name: None}}}
                try:
                    rest.patch(FREIGHT, key.namespace, name, body, subresource="status")
                except ApiException as exc:
                    if not is_not_found(exc):
                        raise
                log.info("removed deleted Stage from Freight verifiedIn",
                         extra={"key": str(key), "freight": name})
        # The garbage collector deletes owned runs too; doing it here makes clean-up
        # independent of it (and of a run whose owner reference was edited away).
        for run in ctx.cache.list(ANALYSIS_RUN, key.namespace):
            labels = _meta(run).get("labels") or {}
            if owning_stage(run) == key.name and labels.get(LABEL_MANAGED_BY) == MANAGED_BY:
                rest.delete(ANALYSIS_RUN, key.namespace, _meta(run)["name"])


class _Sync:
    """One pass over one Stage; raises _Conflict when its view turns out stale."""

    def __init__(
        self, owner: StageVerificationController, key: Key, stage: Obj, ctx: Context, rest: Rest
    ) -> None:
        self.owner = owner
        self.key = key
        self.stage = stage
        self.ctx = ctx
        self.rest = rest
        self.now = _now()
        self.where = {"key": str(key), "controller": owner.name}
        self._run_cache: Obj | None = None  # the run we just created or adopted
        # Set when the gate read an Application from the API because its namespace is
        # not watched: such an Application sends no events, so we must poll it.
        self._unwatched_app = False

    # -- entry --------------------------------------------------------------------
    def run(self) -> None:
        stage = self.stage
        if schemas.normalize_analysis(stage) is None:
            # No stanza: nothing to verify, and what we wrote before must not linger.
            self._forget_verification()
            return
        freight = vf.current_freight(stage)
        abort = vf.annotation(stage, ANNOTATION_ABORT)
        reverify = vf.annotation(stage, ANNOTATION_REVERIFY)
        if not freight:
            # waiting_for answers "no freight" before it looks at anything else, so the
            # message is written in one place.
            waiting: vf.Verification = {
                "phase": "Pending", "message": vf.waiting_for(stage, self._app) or "",
            }
            self._write_status(waiting, record_history=False)
            self._drop_annotation(ANNOTATION_ABORT, abort)
            self._drop_annotation(ANNOTATION_REVERIFY, reverify)
            return
        collection = freight_collection_id(freight)
        latest = vf.latest_verification(stage, collection)

        if abort is not None:
            current = latest.get("id") if latest is not None else None
            if abort and abort != current:
                # The value names a verification that is not the latest one (e.g. the
                # user meant a run that has since been replaced): aborting the latest
                # instead would stop something nobody asked to stop.
                if self._drop_annotation(ANNOTATION_ABORT, abort):
                    self.ctx.events.emit(
                        self.stage, type="Warning", reason="AbortIgnored",
                        message=f"{ANNOTATION_ABORT}={abort} does not name the latest "
                                f"verification ({current or 'none'}); nothing was aborted",
                    )
            elif latest is not None and latest.get("phase") in ("Pending", "Running"):
                self._abort(latest)
                self._drop_annotation(ANNOTATION_ABORT, abort)
                return
            else:
                self._drop_annotation(ANNOTATION_ABORT, abort)  # nothing running to abort

        started_by_reverify = False
        action = vf.reverify_requested(reverify, latest)
        if action == "stale":
            self._drop_annotation(ANNOTATION_REVERIFY, reverify)
        elif action == "start" and latest is not None:
            if reverify == "":
                # Pin "the latest" to its id before acting: if we fail or crash between
                # writing the new attempt and removing the annotation, the retry sees
                # an id that is no longer the latest ("stale") instead of an empty
                # value that would start yet another attempt.
                if not self._pin_annotation(ANNOTATION_REVERIFY, "", latest["id"]):
                    return  # the Stage is gone
                reverify = latest["id"]
            attempt = int(latest.get("attempt") or 1) + 1
            latest = self._new(freight, collection, attempt)
            started_by_reverify = True

        if latest is None:
            latest = self._new(freight, collection, self._existing_attempt(collection))

        if latest.get("phase") in vf.FINISHED:
            self._ensure_freight(latest)
            return

        if not latest.get("analysisRun"):
            run = self._start(latest, freight)
            if started_by_reverify:
                self._drop_annotation(ANNOTATION_REVERIFY, reverify)
            if run is None:
                return
        self._follow(latest)

    # -- steps --------------------------------------------------------------------
    def _new(self, freight: list[str], collection: str, attempt: int) -> vf.Verification:
        return vf.new_verification(
            run_name=run_name(self.key.name, collection, attempt), freight=freight,
            collection=collection, attempt=attempt, message="verification pending",
        )

    def _existing_attempt(self, collection: str) -> int:
        """Latest attempt already run for this freight (e.g. promoted back to it), else 1."""
        best = 1
        stage_label = label_value(self.key.name)
        for run in self.ctx.cache.list(ANALYSIS_RUN, self.key.namespace):
            labels = _meta(run).get("labels") or {}
            if (labels.get(LABEL_STAGE) == stage_label
                    and labels.get(LABEL_FREIGHT_COLLECTION) == collection
                    and labels.get(LABEL_MANAGED_BY) == MANAGED_BY
                    and str(labels.get(LABEL_ATTEMPT, "")).isdigit()):
                best = max(best, int(labels[LABEL_ATTEMPT]))
        return best

    def _start(self, v: vf.Verification, freight: list[str]) -> Obj | None:
        """Create (or adopt) the run once the Stage is ready; None while it is not."""
        name = v["id"]
        existing = self.ctx.cache.get(ANALYSIS_RUN, self.key.namespace, name)
        if existing is None:
            reason = vf.waiting_for(self.stage, self._app)
            if reason is not None:
                v["message"] = reason
                self._write_status(v)
                if self._unwatched_app:
                    raise Requeue(UNWATCHED_APP_POLL_SECONDS,
                                  "waiting on an Application outside the watched namespaces")
                return None
            existing = self._create(v, freight)
            if existing is None:
                return None
        # An existing run (ours after a crash, or someone else's) is adopted by its
        # labels alone: rebuilding it could fail, or differ, because a template changed
        # or was deleted since the run was created.
        wanted = run_labels(self.key.name, freight, int(v["attempt"]))
        labels = _meta(existing).get("labels") or {}
        if any(labels.get(k) != value for k, value in wanted.items()):
            message = (f"AnalysisRun {name} already exists but was not created by rollgate "
                       "for this verification (its labels differ); delete it or rename it")
            self._finished(vf.finish(v, phase="Error", message=message, now=self.now))
            return None
        v["analysisRun"] = {"name": name, "namespace": self.key.namespace,
                            "phase": vf.run_phase(existing)}
        v["phase"] = "Running"
        v["startTime"] = self.now
        v["message"] = vf.run_message(existing)
        self._write_status(v)
        self.ctx.events.emit(
            self.stage, type="Normal", reason="VerificationStarted",
            message=f"AnalysisRun {name} started for freight {', '.join(freight)} "
                    f"(attempt {v['attempt']})",
        )
        self._run_cache = existing
        return existing

    def _create(self, v: vf.Verification, freight: list[str]) -> Obj | None:
        """Build and create the run; the run that already has its name on AlreadyExists.

        None when the verification was recorded as a final Error instead.
        """
        name = v["id"]
        try:
            run = build_analysis_run(self.stage, self._template, freight=freight,
                                     attempt=int(v["attempt"]))
        except AnalysisBuildError as exc:
            self._finished(vf.finish(v, phase="Error", message=str(exc), now=self.now))
            return None
        try:
            created = self.rest.create(ANALYSIS_RUN, self.key.namespace, run)
        except ApiException as exc:
            if is_already_exists(exc):
                # Our cache has not seen it yet (or we crashed after creating it).
                existing = self.rest.get(ANALYSIS_RUN, self.key.namespace, name)
                if existing is None:
                    raise  # deleted in between: try again
                return existing
            if is_transient(exc) or is_conflict(exc):
                raise  # retried with backoff, never recorded as final
            message = f"the API server rejected AnalysisRun {name}: {_status_message(exc)}"
            self._finished(vf.finish(v, phase="Error", message=message, now=self.now))
            return None
        log.info("created AnalysisRun", extra={**self.where, "run": name})
        return created

    def _follow(self, v: vf.Verification) -> None:
        ref = v["analysisRun"]
        run = self.ctx.cache.get(ANALYSIS_RUN, ref["namespace"], ref["name"])
        if run is None:
            run = self._run_cache or self.rest.get(
                ANALYSIS_RUN, ref["namespace"], ref["name"])
        if run is None:
            message = (f"AnalysisRun {ref['name']} was deleted before it finished; annotate "
                       f"the Stage with {ANNOTATION_REVERIFY} to verify again")
            self._finished(vf.finish(v, phase="Error", message=message, now=self.now))
            return
        phase = vf.verification_phase(run)
        v["analysisRun"] = {**ref, "phase": vf.run_phase(run)}
        if phase in vf.FINISHED:
            self._finished(vf.finish(v, phase=phase, message=vf.run_message(run),
                                     now=self.now))
            return
        v["phase"] = phase
        v["message"] = vf.run_message(run)
        self._write_status(v)

    def _abort(self, v: vf.Verification) -> None:
        ref = v.get("analysisRun")
        if ref:
            self._terminate(ref)
        message = f"aborted by annotation {ANNOTATION_ABORT}"
        self._finished(vf.finish(v, phase="Aborted", message=message, now=self.now))

    def _terminate(self, ref: vf.RunRef) -> None:
        try:
            self.rest.patch(ANALYSIS_RUN, ref["namespace"], ref["name"],
                            {"spec": {"terminate": True}}, content_type=MERGE_PATCH)
        except ApiException as exc:
            if not is_not_found(exc):  # a run that is gone needs no stopping
                raise

    def _forget_verification(self) -> None:
        """The stanza was removed: stop an active run and drop our status (not history).

        An active run is terminated as an abort would and recorded as Aborted in the
        history, so no run keeps going for a check nobody asks for any more, and no
        ``Verified`` condition keeps claiming something about the current freight.
        """
        status = self.stage.get("status") or {}
        v = status.get("verification")
        has_condition = any(isinstance(c, dict) and c.get("type") == vf.CONDITION
                            for c in status.get("conditions") or [])
        if not v and not has_condition:
            return
        aborted: vf.Verification | None = None
        if isinstance(v, dict) and v.get("id") and v.get("phase") not in vf.FINISHED:
            if v.get("analysisRun"):
                self._terminate(v["analysisRun"])
            message = "aborted: the analysis stanza was removed from the Stage"
            aborted = vf.finish(v, phase="Aborted", message=message,  # type: ignore[arg-type]
                                now=self.now)
        if self._put_status(vf.status_without_verification(status, aborted)) and aborted:
            etype, reason = vf.EVENTS["Aborted"]
            self.ctx.events.emit(self.stage, type=etype, reason=reason,
                                 message=f"{aborted['id']}: {aborted['message']}")

    def _finished(self, v: vf.Verification) -> None:
        # Freight first: once the status says Successful, verifiedIn is already there.
        self._ensure_freight(v)
        if self._write_status(v):
            etype, reason = vf.EVENTS[v["phase"]]
            self.ctx.events.emit(self.stage, type=etype, reason=reason,
                                 message=f"{v['id']}: {v.get('message', '')}")
            log.info("verification finished",
                     extra={**self.where, "phase": v["phase"], "run": v.get("id")})

    def _ensure_freight(self, v: vf.Verification) -> None:
        """verifiedIn follows the latest verification: set on success, removed on failure."""
        phase = v.get("phase")
        if phase not in ("Successful", "Failed"):
            return
        for name in v.get("freight") or []:
            freight = self.ctx.cache.get(FREIGHT, self.key.namespace, name)
            if freight is None:
                freight = self.rest.get(FREIGHT, self.key.namespace, name)
                if freight is None:
                    log.warning("Freight not found; cannot record verifiedIn",
                                extra={**self.where, "freight": name})
                    continue
            present = self.key.name in vf.stages_in_verified_in(freight)
            if phase == "Successful" and not present:
                body = {"status": {"verifiedIn": {
                    self.key.name: {"verifiedAt": v.get("finishTime") or self.now}}}}
            elif phase == "Failed" and present:
                body = {"status": {"verifiedIn": {self.key.name: None}}}
            else:
                continue
            try:
                self.rest.patch(FREIGHT, self.key.namespace, name, body, subresource="status")
            except ApiException as exc:
                if not is_not_found(exc):
                    raise

    # -- I/O helpers ----------------------------------------------------------------
    def _write_status(self, v: vf.Verification, *, record_history: bool = True) -> bool:
        """Write status if it changes; True when written. Stale view -> _Conflict."""
        meta = _meta(self.stage)
        new_status = vf.status_with(self.stage.get("status"), v,
                                    generation=meta.get("generation"), now=self.now,
                                    record_history=record_history)
        return self._put_status(new_status)

    def _put_status(self, new_status: Obj) -> bool:
        """Replace the status if ours changes; True when written. Stale view -> _Conflict."""
        if vf.same_status(self.stage.get("status"), new_status):
            return False
        body = copy.deepcopy(self.stage)
        body["status"] = new_status
        try:
            updated = self.rest.replace(STAGE, self.key.namespace, self.key.name, body,
                                        subresource="status")
        except ApiException as exc:
            if is_conflict(exc):
                raise _Conflict from exc
            if is_not_found(exc):
                return False  # deleted meanwhile; the delete event cleans up
            raise
        self.stage = updated
        return True

    def _drop_annotation(self, key: str, value: str | None) -> bool:
        """Remove an annotation we acted on, only if it still has the value we saw.

        True when removed; False when it was not there to remove.
        """
        if value is None:
            return False
        path = to_pointer(("metadata", "annotations", key))
        ops = [{"op": "test", "path": path, "value": value}, {"op": "remove", "path": path}]
        try:
            self.stage = self.rest.patch(STAGE, self.key.namespace, self.key.name, ops,
                                         content_type=JSON_PATCH)
        except ApiException as exc:
            # 422: the test failed (someone set a new value, which its own event will
            # bring to us); 404: the Stage is gone; 409: it changed under the patch.
            if is_not_found(exc) or is_conflict(exc) or exc.status == 422:
                return False
            raise
        return True

    def _pin_annotation(self, key: str, seen: str, value: str) -> bool:
        """Replace an annotation's value ``seen`` by ``value``; False if the Stage is gone.

        A different value than the one we saw means our view is stale: _Conflict.
        """
        path = to_pointer(("metadata", "annotations", key))
        ops = [{"op": "test", "path": path, "value": seen},
               {"op": "replace", "path": path, "value": value}]
        try:
            self.stage = self.rest.patch(STAGE, self.key.namespace, self.key.name, ops,
                                         content_type=JSON_PATCH)
        except ApiException as exc:
            if is_not_found(exc):
                return False
            if is_conflict(exc) or exc.status == 422:
                raise _Conflict from exc
            raise
        return True

    def _app(self, namespace: str, name: str) -> Obj | None:
        app = self.ctx.cache.get(APPLICATION, namespace, name)
        watched = self.ctx.options.get("namespaces") or []
        if app is None and watched and namespace not in watched:
            self._unwatched_app = True
            app = self.rest.get(APPLICATION, namespace, name)  # outside the cached namespaces
        return app

    def _template(self, kind: str, namespace: str, name: str) -> Obj | None:
        resource = ANALYSIS_TEMPLATE if kind == KIND_ANALYSIS_TEMPLATE else (
            CLUSTER_ANALYSIS_TEMPLATE)
        found = self.ctx.cache.get(resource, namespace, name)
        if found is None:
            # The cache may not have seen a template created a moment ago (a user who
            # creates it and then asks for a reverify); the API is the authority.
            found = self.rest.get(resource, namespace, name)
        return found


def _status_message(exc: ApiException) -> str:
    try:
        return str(json.loads(exc.body or "{}").get("message") or exc.reason)
    except ValueError:
        return str(exc.reason)
