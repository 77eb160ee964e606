"""Stage verification, observe mode: Kargo verifies, rollgate watches and reports.

Kargo v1 creates and follows the AnalysisRuns of ``spec.verification`` itself, with no
per-Stage switch, so on such a cluster rollgate must never become a second verifier.
This controller creates nothing and writes nothing to Stages, Freight or runs. It
exports metrics of the verifications Kargo finishes and emits Warning events on the
Stage for what Kargo is known to get wrong (``anomalies``, a pure function).

Metrics are counted once per process: a verification that finished before the
process started is not counted again after a restart (its finish time is older).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from kubekit.kinds import FREIGHT, STAGE
from schemas.objects import meta_of

from .. import verification as vf
from ..runtime.types import Context, Key, Requeue
from .stage_verification import INDEXES, WATCHES, _time, record_finished, stage_runs

log = logging.getLogger("reconciler.verification-observer")

# A run younger than this may simply not be recorded in the Stage status yet.
UNRECORDED_GRACE_SECONDS = 60.0
ACTIVE_RUN_PHASES = frozenset({"", "Pending", "Running"})


class Anomaly(NamedTuple):
    kind: str  # Event reason and metric label
    subject: str  # what it is about (run or Freight name), for de-duplication
    message: str


def anomalies(
    stage: Mapping[str, Any],
    runs: Sequence[Mapping[str, Any]],
    freight: Mapping[str, Mapping[str, Any] | None],
    *,
    now: dt.datetime,
    grace: float = UNRECORDED_GRACE_SECONDS,
) -> list[Anomaly]:
    """What looks wrong in another verifier's work on ``stage`` (DESIGN.md, observe)."""
    name = meta_of(stage).get("name") or ""
    history = [c for c in ((stage.get("status") or {}).get("freightHistory") or [])
               if isinstance(c, dict)]
    found: list[Anomaly] = []
    current = vf.collection_id(history[0]) if history else None
    by_collection: dict[str, list[Mapping[str, Any]]] = {}
    for run in runs:
        by_collection.setdefault(vf.run_collection(run), []).append(run)
    recorded = {cid: {str((e.get("analysisRun") or {}).get("name"))
                      for e in (c.get("verificationHistory") or []) if isinstance(e, dict)}
                for c in history for cid in [vf.collection_id(c)]}
    for cid, group in sorted(by_collection.items()):
        if len(group) < 2:
            continue
        stray = sorted(str(r["metadata"]["name"]) for r in group
                       if str(r["metadata"]["name"]) not in recorded.get(cid, set())
                       and _age(r, now) > grace)
        if stray:
            found.append(Anomaly(
                "DuplicateVerificationRuns", ",".join(stray),
                f"{len(group)} AnalysisRuns verify freight collection {cid} of Stage {name}, "
                f"but {', '.join(stray)} is in no verification of its history (no reverify "
                "started it): the verifier ran the same verification twice"))
    for run in runs:
        if current is not None and vf.run_collection(run) != current and (
                vf.run_phase(run) in ACTIVE_RUN_PHASES):
            run_name = str(run["metadata"]["name"])
            found.append(Anomaly(
                "StaleVerificationRun", run_name,
                f"AnalysisRun {run_name} is still {vf.run_phase(run) or 'Pending'} for freight "
                f"collection {vf.run_collection(run)}, which is no longer current in Stage "
                f"{name} (current: {current}); nobody will read its result"))
    if history:
        entries = [e for e in (history[0].get("verificationHistory") or [])
                   if isinstance(e, dict)]
        if entries and entries[0].get("phase") == "Failed":
            for freight_name in vf.freight_names(history[0]):
                status = (freight.get(freight_name) or {}).get("status") or {}
                if name in (status.get("verifiedIn") or {}):
                    found.append(Anomaly(
                        "VerifiedDespiteFailure", freight_name,
                        f"verification {entries[0].get('id')} of Stage {name} Failed, but "
                        f"Freight {freight_name} is still verified in it (status.verifiedIn)"))
    return found


def recheck_after(
    stage: Mapping[str, Any], runs: Sequence[Mapping[str, Any]], *, now: dt.datetime,
    grace: float,
) -> float | None:
    """Seconds until an unrecorded run is old enough to judge (no event would wake the
    Stage then), or None."""
    history = [c for c in ((stage.get("status") or {}).get("freightHistory") or [])
               if isinstance(c, dict)]
    recorded = {str((e.get("analysisRun") or {}).get("name"))
                for c in history for e in (c.get("verificationHistory") or [])
                if isinstance(e, dict)}
    waits = [grace - _age(r, now) for r in runs
             if str(r["metadata"]["name"]) not in recorded and _age(r, now) <= grace]
    return max(1.0, min(waits) + 1.0) if waits else None


def _age(run: Mapping[str, Any], now: dt.datetime) -> float:
    created = _time(meta_of(run).get("creationTimestamp"))
    return (now - created).total_seconds() if created is not None else 0.0


class VerificationObserver:
    name = "stage-verification"
    primary = STAGE
    watches = WATCHES
    indexes = INDEXES

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        # Whole seconds, as Kubernetes timestamps are: a verification that finished in
        # the second this process started still counts.
        self._started = dt.datetime.now(dt.UTC).replace(microsecond=0)
        self._lock = threading.Lock()
        self._counted: set[tuple[str, str]] = set()  # (stage uid, what was counted)

    def reconcile(self, key: Key, ctx: Context) -> None:
        stage = ctx.cache.get(STAGE, key.namespace, key.name)
        if stage is None:
            return
        uid = str(meta_of(stage).get("uid") or key)
        history = [c for c in ((stage.get("status") or {}).get("freightHistory") or [])
                   if isinstance(c, dict)]
        if ctx.metrics is not None:
            for collection in history[:1]:
                for entry in collection.get("verificationHistory") or []:
                    finished = _time(entry.get("finishTime")) if isinstance(entry, dict) else None
                    if entry.get("phase") in vf.FINISHED and finished is not None and (
                            finished >= self._started) and self._first(uid, f"v/{entry.get('id')}"):
                        record_finished(ctx.metrics, namespace=key.namespace, stage=stage,
                                        entry=entry)
        runs = stage_runs(ctx, key.namespace, key.name)
        names = vf.freight_names(history[0]) if history else []
        freight = {n: ctx.cache.get(FREIGHT, key.namespace, n) for n in names}
        grace = float(ctx.options.get("observe_grace_seconds", UNRECORDED_GRACE_SECONDS))
        for anomaly in anomalies(stage, runs, freight, now=dt.datetime.now(dt.UTC),
                                 grace=grace):
            if not self._first(uid, f"a/{anomaly.kind}/{anomaly.subject}"):
                continue
            log.warning("verification anomaly", extra={"key": str(key), "kind": anomaly.kind,
                                                       "detail": anomaly.message})
            ctx.events.emit(stage, type="Warning", reason=anomaly.kind, message=anomaly.message)
            if ctx.metrics is not None:
                ctx.metrics.verification_anomalies.labels(
                    key.namespace, key.name, anomaly.kind).inc()
        after = recheck_after(stage, runs, now=dt.datetime.now(dt.UTC), grace=grace)
        if after is not None:
            raise Requeue(after, "a run no verification records yet")

    def _first(self, uid: str, what: str) -> bool:
        with self._lock:
            if (uid, what) in self._counted:
                return False
            self._counted.add((uid, what))
            return True
