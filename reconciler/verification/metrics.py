"""The verification feature's Prometheus metrics, in engine mode (rollgate's runs) and
in observe mode (Kargo's); docs/components.md, "Reconciler" (metrics).

The collectors belong to no registry until the runtime serves them: a controller hands
them out as ``collectors`` and the runtime registers them with its own registry, so the
runtime knows no feature and tests hold no global state.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from prometheus_client import Counter, Histogram

from schemas.objects import meta_of

from .payloads import outcome, parse_time, promotion_finished_at

BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200)


class VerificationMetrics:
    def __init__(self) -> None:
        self.verifications = Counter(
            "rollgate_verifications_finished", "Verifications that finished, by namespace, "
            "stage and phase (a user's abort is Aborted, also where Kargo records it "
            "Failed)", ["namespace", "stage", "phase"], registry=None,
        )
        self.verification_duration = Histogram(
            "rollgate_verification_duration_seconds", "Start to finish of a verification",
            ["phase"], registry=None, buckets=BUCKETS,
        )
        self.promotion_to_verified = Histogram(
            "rollgate_promotion_to_verified_seconds", "From the end of the promotion to the "
            "successful verification of its freight", registry=None, buckets=BUCKETS,
        )
        self.verifier_conflicts = Counter(
            "rollgate_verifier_conflicts", "Passes that found another verifier acting on a "
            "Stage's current freight (engine mode leaves it alone)", ["namespace", "stage"],
            registry=None,
        )
        self.verification_anomalies = Counter(
            "rollgate_verification_anomalies", "What observe mode found wrong in another "
            "verifier's work, by kind", ["namespace", "stage", "kind"], registry=None,
        )

    @property
    def collectors(self) -> tuple[Counter | Histogram, ...]:
        return (self.verifications, self.verification_duration, self.promotion_to_verified,
                self.verifier_conflicts, self.verification_anomalies)

    def record_finished(self, *, namespace: str, stage: Mapping[str, Any],
                        entry: Mapping[str, Any]) -> None:
        """Count a finished verification under its :func:`outcome` (a user's abort is
        ``Aborted``, also where Kargo wrote ``Failed``); its duration and, on success, the
        seconds from the promotion's end to ``Verified`` (engine and observe modes alike)."""
        name = meta_of(stage).get("name") or ""
        phase = outcome(entry)
        self.verifications.labels(namespace, name, phase).inc()
        started, ended = parse_time(entry.get("startTime")), parse_time(entry.get("finishTime"))
        if started is not None and ended is not None and ended >= started:
            self.verification_duration.labels(phase).observe((ended - started).total_seconds())
        promoted = promotion_finished_at(stage)
        if phase == "Successful" and promoted is not None and ended is not None and (
                ended >= promoted):
            self.promotion_to_verified.observe((ended - promoted).total_seconds())

    def conflict(self, namespace: str, stage: str) -> None:
        self.verifier_conflicts.labels(namespace, stage).inc()

    def anomaly(self, namespace: str, stage: str, kind: str) -> None:
        self.verification_anomalies.labels(namespace, stage, kind).inc()
