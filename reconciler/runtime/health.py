"""Prometheus metrics and the /healthz, /readyz, /metrics HTTP server."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client.registry import Collector

log = logging.getLogger("reconciler.health")


class Metrics:
    """The runtime's metrics, in a registry of their own (no global state in tests), on
    which features register their own collectors (``register``)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._lock = threading.Lock()
        self._served: set[int] = set()  # ids of the collectors registered by features
        r = self.registry
        self.reconciles = Counter(
            "rollgate_reconciler_reconcile", "Reconciles by controller and result "
            "(success, requeue, error)", ["controller", "result"], registry=r,
        )
        self.errors = Counter(
            "rollgate_reconciler_reconcile_errors", "Reconciles that raised",
            ["controller"], registry=r,
        )
        self.duration = Histogram(
            "rollgate_reconciler_reconcile_duration_seconds", "Time spent in reconcile",
            ["controller"], registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.queue_depth = Gauge(
            "rollgate_reconciler_queue_depth", "Keys waiting in the work queue",
            ["controller"], registry=r,
        )
        self.watch_restarts = Counter(
            "rollgate_reconciler_watch_restarts", "Watch streams re-established "
            "(closed = normal server timeout, gone = 410 re-list, error)",
            ["resource", "reason"], registry=r,
        )
        self.crd_waiting = Gauge(
            "rollgate_reconciler_crd_waiting", "1 while the controller waits for this "
            "CRD to be served (it starts once it is), 0 after",
            ["controller", "crd"], registry=r,
        )
        self.leader = Gauge(
            "rollgate_reconciler_leader", "1 while this replica holds the lease", registry=r,
        )

    def register(self, collectors: Iterable[Collector]) -> None:
        """Serve a feature's collectors on /metrics too, each once (a feature's metrics
        are its own; the runtime only serves them)."""
        with self._lock:
            for collector in collectors:
                if id(collector) not in self._served:
                    self.registry.register(collector)
                    self._served.add(id(collector))


class HealthServer:
    """Serves probes and metrics on a background thread."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        metrics: Metrics,
        ready: Callable[[], tuple[bool, str]],
    ) -> None:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/healthz":
                    self._send(200, b"ok\n", "text/plain")
                elif path == "/readyz":
                    ok, why = outer.ready()
                    self._send(200 if ok else 503, f"{why}\n".encode(), "text/plain")
                elif path == "/metrics":
                    self._send(200, generate_latest(outer.metrics.registry), CONTENT_TYPE_LATEST)
                else:
                    self._send(404, b"not found\n", "text/plain")

            def _send(self, code: int, body: bytes, ctype: str) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # probes every few seconds would drown the real logs

        self.metrics = metrics
        self.ready = ready
        self.server = ThreadingHTTPServer((host, port), Handler)
        self.server.daemon_threads = True
        self._thread = threading.Thread(
            target=self.server.serve_forever, name="health", daemon=True
        )

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.server.server_address[:2]
        return str(host), int(port)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
