"""The real Argo Rollouts controller executes AnalysisRuns on the e2e control plane.

``rollouts-controller`` (built by hack/k8s/build.sh at the pinned version) runs on the
host with ``--controllers=analysis``, as a ManagedProcess the test stops. The metrics
it measures come from an HTTP server this test runs on 127.0.0.1, so every phase
checked here is the controller's own verdict on what that server answered.

Waits poll the API up to a generous deadline; no test asserts how fast something happens.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from harness.plane import ControlPlane
from harness.process import ManagedProcess
from harness.upstream import rollouts
from testkit import objects
from testkit.net import send_json

DEADLINE = 60.0
TERMINAL = {"Successful", "Failed", "Error", "Inconclusive"}


class MetricServer:
    """A loopback HTTP server that answers the web metric: ``health`` is the JSON body of
    ``/health``. Every request is recorded, so a test can show the controller asked."""

    def __init__(self) -> None:
        self.health: dict[str, Any] = {}
        self.requests: list[tuple[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.requests.append((self.command, self.path))
                if self.path != "/health":
                    self.send_error(404)
                    return
                send_json(self, 200, server.health)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def metric_server() -> Iterator[MetricServer]:
    server = MetricServer()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module")
def rollouts_binaries() -> rollouts.RolloutsBinaries:
    try:
        return rollouts.find_binaries()
    except rollouts.RolloutsBinariesMissing as err:
        pytest.fail(str(err), pytrace=False)


@pytest.fixture
def start_controller(
    control_plane: ControlPlane,
    rollouts_binaries: rollouts.RolloutsBinaries,
    tmp_path: Path,
) -> Iterator[Callable[..., ManagedProcess]]:
    """Start the real controller for this test; it is stopped when the test ends."""
    started: list[ManagedProcess] = []

    def start(**kwargs: Any) -> ManagedProcess:
        proc = rollouts.start_controller(
            control_plane.kubeconfig,
            tmp_path / "rollouts",
            log_path=tmp_path / "rollouts-controller.log",
            binaries=rollouts_binaries,
            **kwargs,
        )
        started.append(proc)
        proc.wait_ready(60)
        return proc

    try:
        yield start
    finally:
        for proc in started:
            proc.stop()


def create(kubectl: Callable[..., Any], obj: dict[str, Any]) -> None:
    kubectl("create", "-f", "-", input=json.dumps(obj))


def analysis_run(namespace: str, name: str, metric: dict[str, Any]) -> dict[str, Any]:
    return objects.analysis_run(name, namespace=namespace, metrics=[metric])


def finished_run(
    kubectl: Callable[..., Any], namespace: str, name: str, proc: ManagedProcess
) -> dict[str, Any]:
    """The AnalysisRun once the controller gave it a terminal phase."""
    deadline = time.monotonic() + DEADLINE
    run: dict[str, Any] = {}
    while time.monotonic() < deadline:
        run = json.loads(kubectl("get", "analysisrun", name, "-n", namespace, "-o", "json").stdout)
        if run.get("status", {}).get("phase") in TERMINAL:
            return run
        assert proc.alive(), f"controller exited:\n{proc.log_tail()}"
        time.sleep(0.2)
    pytest.fail(
        f"AnalysisRun {namespace}/{name} not finished after {DEADLINE:.0f}s: "
        f"{run.get('status')!r}\ncontroller log:\n{proc.log_tail()}"
    )


@pytest.mark.parametrize(
    ("healthy", "phase"), [(True, "Successful"), (False, "Failed")], ids=["healthy", "unhealthy"]
)
def test_controller_executes_a_web_metric(
    kubectl: Callable[..., Any],
    namespace: str,
    metric_server: MetricServer,
    start_controller: Callable[..., ManagedProcess],
    healthy: bool,
    phase: str,
) -> None:
    # Watching every namespace, as a cluster-scoped install does; its (absent)
    # argo-rollouts-config is looked up in the test namespace.
    proc = start_controller(config_namespace=namespace)
    metric_server.health = {"ok": healthy, "errors": 0 if healthy else 7}
    create(kubectl, analysis_run(namespace, "web", {
        "name": "health",
        "successCondition": "result == true",
        "failureCondition": "result == false",
        "provider": {"web": {"url": f"{metric_server.url}/health", "jsonPath": "{$.ok}"}},
    }))

    run = finished_run(kubectl, namespace, "web", proc)

    assert run["status"]["phase"] == phase, run["status"]
    result = run["status"]["metricResults"][0]
    assert result["name"] == "health"
    assert result["phase"] == phase
    assert result["measurements"][0]["value"] == str(healthy).lower()
    assert ("GET", "/health") in metric_server.requests
