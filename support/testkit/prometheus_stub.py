"""A Prometheus stand-in for the metric plugin the real Argo Rollouts runs (on
127.0.0.1, or on the node's bridge address for its pods).

The sample metric plugin (argo-rollouts test/cmd/metrics-plugin-sample) asks
``/api/v1/query`` through Prometheus' Go client, which POSTs a form (GET when POST is
refused). This server answers every instant query with one scalar and records the
queries it was asked, so a test can tell that the plugin process, started by the
controller, reached it with the query of the AnalysisRun's metric.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


class PrometheusStub:
    """``value`` is the scalar every query gets; ``queries`` are the PromQL texts asked."""

    def __init__(self, value: str = "0", *, host: str = "127.0.0.1") -> None:
        """``host``: the address it binds (pods reach the node's bridge address)."""
        self.value = value
        self.queries: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                url = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                form = self.rfile.read(length).decode() if length else ""
                if url.path != "/api/v1/query":
                    self.send_error(404)
                    return
                params = parse_qs(url.query) | parse_qs(form)
                outer.queries.extend(params.get("query", []))
                data = json.dumps({
                    "status": "success",
                    "data": {"resultType": "scalar", "result": [time.time(), outer.value]},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer((host, 0), Handler)
        self._httpd.daemon_threads = True
        self.url = f"http://{host}:{self._httpd.server_address[1]}"
        threading.Thread(target=self._httpd.serve_forever, daemon=True,
                         name="prometheus-stub").start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> PrometheusStub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
