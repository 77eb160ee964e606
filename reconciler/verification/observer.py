"""Stage verification, observe mode: Kargo verifies, rollgate watches and reports
(docs/verification.md, "Observe mode").

Kargo v1 creates and follows the AnalysisRuns of ``spec.verification`` itself, with no
per-Stage switch, so on such a cluster rollgate must never become a second verifier.
This controller creates nothing and writes nothing to Stages, Freight or runs, with one
exception the operator opts into: with ``--refresh-lagging`` it sets Kargo's own
refresh request (annotation ``kargo.akuity.io/refresh``, a metadata merge patch) on a
Stage whose current verification Kargo has not recorded, once per such entry. It
exports metrics of the verifications Kargo finishes and emits a Warning event on the
Stage, once per finding, for what Kargo is known to get wrong (``anomalies``, pure).
With ``--shard``/``--default-shard`` it observes only the Stages of a Kargo shard
(``shards``).

Memory (per process, lost on restart, which is harmless): what was counted or reported,
so nothing is counted or reported twice (a verification that finished before the process
started is not counted again: its finish time is older); when the run of a Stage's
current verification was first seen completed (the fallback when the run has no
``status.completedAt``); when each Stage's current entry was first seen naming its run;
which runs completed while no Stage in the cache named them yet (Kargo's handler, looking
in its cache the same way, then missed the change too) and which completed long after
their entry was there (Kargo's handler surely found it), both forgotten once the Stage
is gone; which lagging entries were refreshed.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Sequence

from kubernetes.client.exceptions import ApiException

from kubekit.kinds import ANALYSIS_RUN, FREIGHT, STAGE
from kubekit.rest import MERGE_PATCH, is_not_found
from schemas.objects import Obj, meta_of

from ..conditions import format_time
from ..runtime.types import Cache, Context, Controller, Key, Requeue, Watch
from ..runtime.watches import enqueue_self
from .anomalies import (
    Anomaly,
    anomalies,
    became_completed,
    entry_subject,
    phase_change_unmapped,
    recheck_after,
    unrecorded_run,
)
from .metrics import VerificationMetrics
from .options import VerificationOptions
from .payloads import (
    FINISHED,
    current_freight,
    current_verification,
    freight_names,
    name_of,
    parse_time,
    refresh_patch,
    run_of,
    stage_status,
    verification_history,
)
from .shards import Shard
from .slim import decoded, observed_run, observed_stage
from .slim import freight as slim_freight
from .watches import INDEXES, stage_of_run, stage_runs, stages_verifying

log = logging.getLogger("reconciler.verification-observer")

NOT_RECORDED = "VerificationNotRecorded"
# Seconds an entry must have named its run before the run's completion for Kargo's handler
# to be sure to have mapped it (rollgate's and Kargo's caches lag the API server by far
# less); closer completions keep the refresh at the lag.
QUEUED_AFTER = 1.0
# How a run's completion met Kargo's handler (``_Memory.completion``).
UNMAPPED, QUEUED = "unmapped", "queued"


class _Memory:
    """What this process has counted, reported, seen and refreshed (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: set[tuple[str, str]] = set()  # (stage uid, what)
        # stage uid -> (run name, when first seen completed): the current entry's run only
        self._completed: dict[str, tuple[str, dt.datetime]] = {}
        # Stage key -> (the current entry's run, when first seen naming it; monotonic).
        self._entry: dict[Key, tuple[str, float]] = {}
        # Stage key -> (the last completed run, UNMAPPED or QUEUED): how its completion
        # met Kargo's handler.
        self._completion: dict[Key, tuple[str, str]] = {}

    def first(self, uid: str, what: str) -> bool:
        """True the first time (uid, what) is asked about."""
        with self._lock:
            if (uid, what) in self._done:
                return False
            self._done.add((uid, what))
            return True

    def forget(self, uid: str, what: str) -> None:
        with self._lock:
            self._done.discard((uid, what))

    def completed(self, key: Key, run: str, how: str) -> None:
        with self._lock:
            self._completion[key] = (run, how)

    def completion(self, key: Key, run: str) -> str | None:
        """How ``run``'s completion met Kargo's handler, if it was the Stage's last seen."""
        with self._lock:
            seen = self._completion.get(key)
            return seen[1] if seen is not None and seen[0] == run else None

    def drop(self, key: Key) -> None:
        """Forget what is kept per Stage key, once the Stage is gone (or another shard's):
        the per-key memory then grows with the Stages there are, not those there were."""
        with self._lock:
            self._entry.pop(key, None)
            self._completion.pop(key, None)

    def entry_seen(self, key: Key, run: str, at: float) -> float:
        """When the Stage's current entry was first seen naming ``run`` (``at`` the
        first time)."""
        with self._lock:
            seen = self._entry.get(key)
            if seen is None or seen[0] != run:
                seen = self._entry[key] = (run, at)
            return seen[1]

    def first_seen(self, uid: str, run: str, now: dt.datetime) -> dict[str, dt.datetime]:
        """``{run: when it was first seen completed}``, remembering ``now`` the first time."""
        with self._lock:
            seen = self._completed.get(uid)
            if seen is None or seen[0] != run:
                seen = self._completed[uid] = (run, now)
            return {seen[0]: seen[1]}


class VerificationObserver(Controller):
    name = "stage-verification"
    indexes = INDEXES

    def __init__(self, *, options: VerificationOptions | None = None) -> None:
        """Observe as the flags say (the defaults without ``options``); the shard narrows
        the Stage watch, which is why the watches are fixed here."""
        options = options if options is not None else VerificationOptions()
        self.options = options
        self.grace = options.observe_grace_seconds
        self.lag = options.observe_lag_seconds
        self.refresh = options.refresh_lagging
        self.shard = Shard.from_options(options)
        selector = self.shard.label_selector()
        # The Stages of the shard, by label selector where one requirement says which
        # (the cache then holds only those); otherwise every Stage, filtered in
        # reconcile (``shards`` says why the union cannot be one selector).
        self.stages = STAGE.labelled(selector) if selector else STAGE
        self.primary = self.stages
        # The mappings also note when an entry appeared and how each completion met it
        # (_stage_changed, _run_changed).
        self.watches = (
            Watch(self.stages, self._stage_changed), Watch(FREIGHT, stages_verifying),
            Watch(ANALYSIS_RUN, self._run_changed))
        self._clock = time.monotonic
        # What the cache keeps (docs/components.md, "What the cache keeps"): what this mode reads.
        self.transforms = {self.stages: observed_stage, FREIGHT: slim_freight,
                           ANALYSIS_RUN: observed_run}
        self.metrics = VerificationMetrics()
        self.collectors = self.metrics.collectors  # served by the runtime on /metrics
        # Whole seconds, as Kubernetes timestamps are: a verification that finished in
        # the second this process started still counts.
        self._started = dt.datetime.now(dt.UTC).replace(microsecond=0)
        self._memory = _Memory()
        log.info("observing %s", self.shard.describe())

    def reconcile(self, key: Key, ctx: Context) -> None:
        cached = ctx.cache.get(self.stages, key.namespace, key.name)
        if cached is None or not self.shard.responsible(cached):
            self._memory.drop(key)
            return  # gone, or another shard's
        stage = decoded(cached)
        uid = str(meta_of(stage).get("uid") or key)
        now = dt.datetime.now(dt.UTC)
        self._count_finished(key, uid, stage)
        runs = stage_runs(ctx.cache, key.namespace, key.name)
        first_seen = self._first_seen(uid, stage, runs, now)
        current = current_freight(stage)
        freight = {n: ctx.cache.get(FREIGHT, key.namespace, n)
                   for n in (freight_names(current) if current is not None else [])}
        found = anomalies(stage, runs, freight, now=now, grace=self.grace, lag=self.lag,
                          first_seen=first_seen)
        self._report(ctx, key, uid, stage, found)
        self._refresh(ctx, key, uid, stage, runs, found)
        # The same ``now`` as the findings: what was not yet due there is due later.
        after = recheck_after(stage, runs, now=now, grace=self.grace, lag=self.lag,
                              first_seen=first_seen)
        if after is not None:
            raise Requeue(after, "a finding may become due with no event to wake the Stage")

    # -- the steps of a pass --------------------------------------------------------
    def _count_finished(self, key: Key, uid: str, stage: Obj) -> None:
        """Metrics of the current freight's verifications that finished since start."""
        for entry in verification_history(current_freight(stage)):
            finished = parse_time(entry.get("finishTime"))
            if entry.get("phase") in FINISHED and finished is not None and (
                    finished >= self._started) and self._memory.first(uid, f"v/{entry.get('id')}"):
                self.metrics.record_finished(namespace=key.namespace, stage=stage, entry=entry)

    def _first_seen(self, uid: str, stage: Obj, runs: Sequence[Obj],
                    now: dt.datetime) -> dict[str, dt.datetime]:
        """When the current entry's run was first seen completed, for a run without
        ``status.completedAt``."""
        found = unrecorded_run(stage, runs)
        if found is None:
            return {}
        return self._memory.first_seen(uid, name_of(found[1]), now)

    def _report(self, ctx: Context, key: Key, uid: str, stage: Obj,
                found: Sequence[Anomaly]) -> None:
        """One Warning event and one count per finding, the first time it is found."""
        for anomaly in found:
            if not self._memory.first(uid, f"a/{anomaly.kind}/{anomaly.subject}"):
                continue
            log.warning("verification anomaly", extra={"key": str(key), "kind": anomaly.kind,
                                                       "detail": anomaly.message})
            ctx.events.emit(stage, type="Warning", reason=anomaly.kind, message=anomaly.message)
            self.metrics.anomaly(key.namespace, key.name, anomaly.kind)

    def _refresh(self, ctx: Context, key: Key, uid: str, stage: Obj, runs: Sequence[Obj],
                 found: Sequence[Anomaly]) -> None:
        """With ``--refresh-lagging``: Kargo's refresh request on the Stage, once per
        lagging entry: at once when its run completed before any cached Stage named it
        (Kargo's handler missed that change, ``_run_changed``), else when the finding is
        due. Remembered in memory only, so a restarted reconciler may refresh a
        still-lagging entry once more: harmless, it only asks Kargo to reconcile."""
        if not self.refresh:
            return
        for subject, why in self._due_refreshes(key, stage, runs, found):
            what = f"r/{subject}"
            if not self._memory.first(uid, what):
                continue
            body = refresh_patch(format_time(dt.datetime.now(dt.UTC)))
            try:
                updated = ctx.client.patch(STAGE, key.namespace, key.name, body,
                                           content_type=MERGE_PATCH)
            except ApiException as exc:
                if is_not_found(exc):
                    return  # the Stage is gone
                self._memory.forget(uid, what)  # retried with the key's backoff
                raise
            # The watch's echo of this write then wakes nothing (the informer skips it).
            ctx.cache.observe(self.stages, updated)
            log.info("asked Kargo to refresh the Stage", extra={
                "key": str(key), "entry": subject, "why": why})

    def _due_refreshes(self, key: Key, stage: Obj, runs: Sequence[Obj],
                       found: Sequence[Anomaly]) -> list[tuple[str, str]]:
        """(entry, why) of each refresh this pass asks for: the current entry when its
        run's completion mapped to no Stage, and every ``VerificationNotRecorded``."""
        due: list[tuple[str, str]] = []
        unrecorded = unrecorded_run(stage, runs)
        how = (self._memory.completion(key, name_of(unrecorded[1]))
               if unrecorded is not None else None)
        if unrecorded is not None and how == UNMAPPED:
            due.append((entry_subject(*unrecorded), "completed before any Stage named the run"))
        if how == QUEUED:
            return due  # in Kargo's queue: a refresh would only add to a busy queue
        due += [(a.subject, "not recorded") for a in found
                if a.kind == NOT_RECORDED and a.subject not in {s for s, _ in due}]
        return due

    # -- the mappings of events ------------------------------------------------------
    def _stage_changed(self, old: Obj | None, stage: Obj, cache: Cache) -> list[Key]:
        """The Stage itself; notes when its current entry was first seen naming a run.
        Only on a change of the freight history (a ``Packed`` one compares without
        decoding); a Stage first seen in a list has no such moment, and its runs'
        completions get the lag's refresh, as before."""
        keys = enqueue_self(old, stage, cache)
        history = stage_status(stage).get("freightHistory")
        if old is None or history == stage_status(old).get("freightHistory"):
            return keys
        run = run_of(current_verification(current_freight(stage)) or {})
        if run:
            self._memory.entry_seen(keys[0], run, self._clock())
        return keys

    def _run_changed(self, old: Obj | None, run: Obj, cache: Cache) -> list[Key]:
        """The run's Stage (``stage_of_run``). A change into a completed phase is also
        looked up as Kargo's own handler does, among the Stages' current verifications
        (``phase_change_unmapped``); when none in the cache names the run, Kargo's, filled
        from the same API server at the same moment, most likely found none either and
        will not record the result until its periodic requeue, so with
        ``--refresh-lagging`` the pass refreshes at once instead of after
        ``--observe-lag-seconds`` (when the caches raced the other way, the refresh is
        one reconcile Kargo did not need; when ours lagged Kargo's, the lag still
        catches it)."""
        keys = stage_of_run(old, run, cache)
        if not became_completed(old, run):
            return keys
        for key in keys:
            stage = cache.get(self.stages, key.namespace, key.name)
            if phase_change_unmapped(old, run, stage):
                self._memory.completed(key, name_of(run), UNMAPPED)
            elif self._settled(run, key):
                self._memory.completed(key, name_of(run), QUEUED)
        return keys

    def _settled(self, run: Obj, key: Key) -> bool:
        """A completion that mapped, QUEUED_AFTER seconds or more after its entry first
        named the run: Kargo's cache, fed by the same API server, had the entry too, so
        its handler queued the Stage and it will record the result (a later refresh
        would only add a reconcile to Kargo's queue; docs/benchmarks.md: with 500 Stages
        and runs of two 4 s measurements, refreshing what Kargo had queued made it
        slower). Closer than that, the two caches may have raced, and the lag's refresh
        stays the safety net."""
        seen = self._memory.entry_seen(key, name_of(run), self._clock())
        return self._clock() - seen >= QUEUED_AFTER

