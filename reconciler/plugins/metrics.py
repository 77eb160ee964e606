"""Prometheus metrics of the plugins feature (mode, audit findings, pre-flight).

Kept in a registry of their own (no global state in tests). The feature registers them:
the controller hands ``collectors`` to the runtime, which serves every controller's
collectors on its one ``/metrics`` without knowing what they measure.
Label sets of a namespace are removed when it has nothing to report any more, so
series do not pile up for namespaces that are gone.
"""

from __future__ import annotations

import threading
from collections import Counter as Tally
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge

from .digests import PluginDigest


class PluginMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.mode = Gauge(
            "rollgate_plugins_mode",
            "1 for what rollgate does with the plugins of a namespace: sync, audit (next to "
            "argo-rollouts-manager) or waiting (no argo-rollouts Deployment yet: nothing is "
            "written)",
            ["namespace", "mode"], registry=r,
        )
        self.findings = Gauge(
            "rollgate_plugins_audit_findings",
            "Audit mode: differences between spec.plugins and what argo-rollouts-manager "
            "rendered, and failed digest pre-flights, by namespace and kind",
            ["namespace", "finding"], registry=r,
        )
        self.preflight = Counter(
            "rollgate_plugins_preflight_checks",
            "Digest pre-flight checks by result (verified, mismatch, failed) and source "
            "(download, cache)",
            ["result", "source"], registry=r,
        )
        self._lock = threading.Lock()
        self._modes: dict[str, str] = {}
        self._kinds: dict[str, set[str]] = {}

    @property
    def collectors(self) -> tuple[Gauge | Counter, ...]:
        return (self.mode, self.findings, self.preflight)

    def set_mode(self, namespace: str, mode: str) -> None:
        with self._lock:
            old = self._modes.get(namespace)
            if old == mode:
                return
            if old is not None:
                self.mode.remove(namespace, old)
            self.mode.labels(namespace, mode).set(1)
            self._modes[namespace] = mode

    def set_findings(self, namespace: str, kinds: Iterable[str]) -> None:
        counts = Tally(kinds)
        with self._lock:
            for kind in self._kinds.get(namespace, set()) - set(counts):
                self.findings.remove(namespace, kind)
            for kind, count in counts.items():
                self.findings.labels(namespace, kind).set(count)
            self._kinds[namespace] = set(counts)

    def count_checks(self, results: Iterable[PluginDigest]) -> None:
        for result in results:
            source = "cache" if result.check.cached else "download"
            self.preflight.labels(result.check.outcome, source).inc()

    def forget(self, namespace: str) -> None:
        """Drop every series of ``namespace`` (no RolloutManager left there)."""
        self.set_findings(namespace, ())
        with self._lock:
            old = self._modes.pop(namespace, None)
            if old is not None:
                self.mode.remove(namespace, old)
            self._kinds.pop(namespace, None)
