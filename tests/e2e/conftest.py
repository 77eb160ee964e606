"""Fixtures for tests against the real control plane (hack/controlplane.py).

One control plane per session (etcd, kube-apiserver, kube-controller-manager and the
webhook, registered by URL), always stopped at the end. Missing binaries FAIL the
tests with the command that builds them: an e2e test never skips itself.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import controlplane
import pytest
from plane_kit import fresh_namespace, running_plane
from verification_kit import Cluster, MetricServer, metric_server, verdict_template

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    # verbose: start-up timings and harness notes land in the captured output of the
    # first test, which pytest shows when something fails.
    with running_plane(tmp_path_factory.mktemp("controlplane"), verbose=True) as plane:
        yield plane


@pytest.fixture
def kubectl(control_plane: controlplane.ControlPlane) -> Kubectl:
    return control_plane.kubectl


@pytest.fixture
def namespace(control_plane: controlplane.ControlPlane) -> Iterator[str]:
    """A fresh namespace per test."""
    with fresh_namespace(control_plane) as name:
        yield name


@pytest.fixture
def get_json(kubectl: Kubectl) -> Callable[..., dict[str, Any]]:
    """``kubectl get -o json`` of one object, as a dict."""

    def _get(*args: str) -> dict[str, Any]:
        return json.loads(kubectl("get", *args, "-o", "json").stdout)

    return _get


@pytest.fixture(scope="module")
def metrics() -> Iterator[MetricServer]:
    """The HTTP metric source the verification tests' runs ask (one per module)."""
    with metric_server() as server:
        yield server


@pytest.fixture(scope="module")
def argo_rollouts(
    control_plane: controlplane.ControlPlane, request: pytest.FixtureRequest
) -> Iterator[Any]:
    """The real Argo Rollouts controller (AnalysisRuns only), all namespaces, one per
    module."""
    module = request.module.__name__.rpartition(".")[2].removeprefix("test_")
    proc = control_plane.start_rollouts_controller(name=f"rollouts-controller-{module}")
    yield proc
    control_plane.stop_process(proc)


@pytest.fixture
def cluster(control_plane: controlplane.ControlPlane, namespace: str, metrics: MetricServer,
            argo_rollouts: Any) -> Cluster:
    """A namespace with the verification tests' templates and two Freight."""
    c = Cluster(control_plane, namespace)
    c.apply(verdict_template(metrics.url))
    c.apply(verdict_template(metrics.url, name="long", count=3, interval="1h"))
    c.freight("f1", "f2")
    return c
