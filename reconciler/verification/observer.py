"""Stage verification, observe mode: Kargo verifies, rollgate watches and reports
(README, "Observe mode").

Kargo v1 creates and follows the AnalysisRuns of ``spec.verification`` itself, with no
per-Stage switch, so on such a cluster rollgate must never become a second verifier.
This controller creates nothing and writes nothing to Stages, Freight or runs. It
exports metrics of the verifications Kargo finishes and emits a Warning event on the
Stage, once per finding, for what Kargo is known to get wrong (``anomalies``, pure).

Memory (per process, lost on restart, which is harmless): what was counted or reported,
so nothing is counted or reported twice (a verification that finished before the process
started is not counted again: its finish time is older).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from kubekit.kinds import FREIGHT, STAGE
from schemas.objects import Obj, meta_of

from ..runtime.types import Context, Key, Requeue
from .anomalies import Anomaly, anomalies, recheck_after
from .metrics import VerificationMetrics
from .options import OBSERVE_GRACE_SECONDS
from .payloads import FINISHED, current_freight, freight_names, parse_time, verification_history
from .watches import INDEXES, WATCHES, stage_runs

log = logging.getLogger("reconciler.verification-observer")


class _Memory:
    """What this process has counted and reported (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: set[tuple[str, str]] = set()  # (stage uid, what)

    def first(self, uid: str, what: str) -> bool:
        """True the first time (uid, what) is asked about."""
        with self._lock:
            if (uid, what) in self._done:
                return False
            self._done.add((uid, what))
            return True


class VerificationObserver:
    name = "stage-verification"
    primary = STAGE
    watches = WATCHES
    indexes = INDEXES

    def __init__(self, options: Mapping[str, Any] | None = None) -> None:
        options = options or {}
        self.grace = _seconds(options, "observe_grace_seconds", OBSERVE_GRACE_SECONDS)
        self.metrics = VerificationMetrics()
        self.collectors = self.metrics.collectors  # served by the runtime on /metrics
        # Whole seconds, as Kubernetes timestamps are: a verification that finished in
        # the second this process started still counts.
        self._started = dt.datetime.now(dt.UTC).replace(microsecond=0)
        self._memory = _Memory()

    def reconcile(self, key: Key, ctx: Context) -> None:
        stage = ctx.cache.get(STAGE, key.namespace, key.name)
        if stage is None:
            return
        uid = str(meta_of(stage).get("uid") or key)
        self._count_finished(key, uid, stage)
        runs = stage_runs(ctx.cache, key.namespace, key.name)
        current = current_freight(stage)
        freight = {n: ctx.cache.get(FREIGHT, key.namespace, n)
                   for n in (freight_names(current) if current is not None else [])}
        found = anomalies(stage, runs, freight, now=dt.datetime.now(dt.UTC), grace=self.grace)
        self._report(ctx, key, uid, stage, found)
        after = recheck_after(stage, runs, now=dt.datetime.now(dt.UTC), grace=self.grace)
        if after is not None:
            raise Requeue(after, "a run no verification records yet")

    # -- the steps of a pass --------------------------------------------------------
    def _count_finished(self, key: Key, uid: str, stage: Obj) -> None:
        """Metrics of the current freight's verifications that finished since start."""
        for entry in verification_history(current_freight(stage)):
            finished = parse_time(entry.get("finishTime"))
            if entry.get("phase") in FINISHED and finished is not None and (
                    finished >= self._started) and self._memory.first(uid, f"v/{entry.get('id')}"):
                self.metrics.record_finished(namespace=key.namespace, stage=stage, entry=entry)

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


def _seconds(options: Mapping[str, Any], key: str, default: float) -> float:
    value = options.get(key)
    return float(value) if value is not None else default
