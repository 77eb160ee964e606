"""A steady stream of admission calls, as a cluster's users make them, and the webhook
pods' own request counters, to show that replacing the pods fails no call.

``AdmissionStream`` runs clients (threads, each with its own official-client connection
pool to the API server) that make server-side dry-run creates of a valid Stage and a
valid RolloutManager at a fixed rate, counting answers and failures. ``PodCounters``
reads each webhook pod's ``rollgate_webhook_requests_total`` from its own /metrics (pods'
addresses are on the node's bridge, which the host reaches) every second, so that a pod
that got no request shows.
"""

from __future__ import annotations

import re
import ssl
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from harness.kits.node import WEBHOOK, pods
from harness.kits.polling import Poller
from harness.plane import ControlPlane
from schemas.kinds import GROUP_ARGO, GROUP_KARGO, VERSION_ARGO, VERSION_KARGO
from testkit import objects

_REQUESTS = re.compile(r"^rollgate_webhook_requests_total\{[^}]*\}\s+([0-9.e+]+)", re.M)


def stage(name: str) -> dict[str, Any]:
    return objects.stage(name, warehouse="w",
                         verification=objects.verification("success-rate"))


def rollout_manager(name: str) -> dict[str, Any]:
    return objects.rollout_manager(name, metric=[{
        "name": "argoproj-labs/sample-prometheus",
        "location": "https://plugins.example/metric", "sha256": "ab" * 32}])


@dataclass
class StreamTotals:
    answered: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass
class AdmissionStream:
    """``clients`` threads, each making ``rate`` dry-run creates a second (a Stage, then
    a RolloutManager, in turn) until ``stop()``."""

    plane: ControlPlane
    namespace: str
    clients: int = 4
    rate: float = 5.0
    totals: StreamTotals = field(default_factory=StreamTotals)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start(self) -> AdmissionStream:
        for index in range(self.clients):
            thread = threading.Thread(target=self._run, args=(index,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> StreamTotals:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        return self.totals

    def _run(self, index: int) -> None:
        api = client.CustomObjectsApi(self.plane.api_client())
        period = 1.0 / self.rate
        due = time.monotonic()
        sent = 0
        while not self._stop.is_set():
            sent += 1
            self._one(api, sent, f"c{index}-{sent}")
            due += period
            self._stop.wait(max(0.0, due - time.monotonic()))

    def _one(self, api: client.CustomObjectsApi, sent: int, name: str) -> None:
        try:
            if sent % 2:
                api.create_namespaced_custom_object(
                    GROUP_KARGO, VERSION_KARGO, self.namespace, "stages", stage(name),
                    dry_run="All")
            else:
                api.create_namespaced_custom_object(
                    GROUP_ARGO, VERSION_ARGO, self.namespace, "rolloutmanagers",
                    rollout_manager(name), dry_run="All")
        except Exception as err:
            with self._lock:
                self.totals.failed += 1
                if len(self.totals.errors) < 10:
                    self.totals.errors.append(f"{time.strftime('%H:%M:%S')} {name}: "
                                              f"{str(err).strip()[:400]}")
        else:
            with self._lock:
                self.totals.answered += 1


@contextmanager
def streaming(plane: ControlPlane, namespace: str, **options: Any) -> Iterator[AdmissionStream]:
    stream = AdmissionStream(plane, namespace, **options).start()
    try:
        yield stream
    finally:
        stream.stop()


def requests_served(metrics: str) -> float:
    """The sum of ``rollgate_webhook_requests_total`` over its labels."""
    return sum(float(m) for m in _REQUESTS.findall(metrics))


@dataclass
class PodCounters(Poller):
    """Each webhook pod's request counter: the first and the last value read (every
    second while running), by pod name, for every pod seen."""

    plane: ControlPlane
    namespace: str
    ca_file: str
    first: dict[str, float] = field(default_factory=dict)
    last: dict[str, float] = field(default_factory=dict)
    interval = 1.0

    def _context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.ca_file)
        context.check_hostname = False  # the certificate names the Service, not the pod
        return context

    def poll_once(self) -> None:
        context = self._context()
        for pod in pods(self.plane, self.namespace, WEBHOOK):
            address = pod.get("status", {}).get("podIP")
            if not address:
                continue
            name = pod["metadata"]["name"]
            try:
                with urllib.request.urlopen(f"https://{address}:8443/metrics",
                                            context=context, timeout=2) as resp:
                    value = requests_served(resp.read().decode())
            except OSError:
                continue  # not serving yet, or gone
            self.first.setdefault(name, value)
            self.last[name] = value

    def grown(self) -> dict[str, float]:
        """Requests each pod served while it was watched."""
        return {name: self.last[name] - self.first[name] for name in self.last}
