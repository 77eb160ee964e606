"""Fixtures for tests against the real control plane (harness.plane).

One control plane per session (etcd, kube-apiserver, kube-controller-manager) with
rollgate on the host (its RBAC and its webhook, registered by URL), always stopped at
the end. Missing binaries FAIL the tests with the command that builds them: an e2e
test never skips itself.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.host_rollgate import HostRollgate
from harness.kits.plane import fresh_namespace, namespaces_left, rollgate_on, running_plane
from harness.kits.verification import Cluster, MetricServer, metric_server, verdict_template
from harness.plane import ControlPlane
from harness.process import ManagedProcess
from harness.upstream import rollouts

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.fspath).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def session_plane(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ControlPlane, HostRollgate]]:
    """The session's plane with rollgate's RBAC and webhook on it (reconcilers: per
    test). verbose: start-up timings and harness notes land in the captured output of
    the first test, which pytest shows when something fails."""
    with running_plane(tmp_path_factory.mktemp("controlplane"), verbose=True) as plane:
        yield plane, rollgate_on(plane)
        left = namespaces_left(plane)
        assert not left, f"namespaces the tests deleted still Terminating: {left}"


@pytest.fixture(scope="session")
def control_plane(session_plane: tuple[ControlPlane, HostRollgate]) -> ControlPlane:
    return session_plane[0]


@pytest.fixture(scope="session")
def rollgate(session_plane: tuple[ControlPlane, HostRollgate]) -> HostRollgate:
    return session_plane[1]


@pytest.fixture
def kubectl(control_plane: ControlPlane) -> Kubectl:
    return control_plane.kubectl


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    """A fresh namespace per test."""
    with fresh_namespace(control_plane) as name:
        yield name


@pytest.fixture
def get_json(control_plane: ControlPlane) -> Callable[..., dict[str, Any]]:
    """``kubectl get -o json`` of one object, as a dict."""
    return control_plane.get_json


@pytest.fixture(scope="module")
def metrics() -> Iterator[MetricServer]:
    """The HTTP metric source the verification tests' runs ask (one per module)."""
    with metric_server() as server:
        yield server


@pytest.fixture(scope="module")
def argo_rollouts(
    control_plane: ControlPlane, request: pytest.FixtureRequest
) -> Iterator[ManagedProcess]:
    """The real Argo Rollouts controller (AnalysisRuns only), all namespaces, one per
    module."""
    module = request.module.__name__.rpartition(".")[2].removeprefix("test_")
    proc = rollouts.run_on(control_plane, name=f"rollouts-controller-{module}")
    yield proc
    control_plane.stop_process(proc)


@pytest.fixture
def cluster(control_plane: ControlPlane, namespace: str, metrics: MetricServer,
            argo_rollouts: ManagedProcess) -> Cluster:
    """A namespace with the verification tests' templates and two Freight."""
    c = Cluster(control_plane, namespace)
    c.apply(verdict_template(metrics.url))
    c.apply(verdict_template(metrics.url, name="long", count=3, interval="1h"))
    c.freight("f1", "f2")
    return c
