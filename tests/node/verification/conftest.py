"""Stage verification next to the real Kargo, with its AnalysisRuns executed by Argo
Rollouts pods on the node (argo-helm's chart, cluster-wide, as most users install it
next to Kargo: harness.upstream.argo_helm) against a metric server on the node's bridge
address.

Kargo (its controller and webhooks) and rollgate's webhook and reconcilers run as host
processes on the node's plane, as the tests start and stop them with the flags each one
needs; rollgate's RBAC and webhook configurations are removed when the module ends, so
the chart's releases in other modules find a clean cluster.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.host_rollgate import HostRollgate
from harness.kits import rollouts_pods as argo
from harness.kits.node import delete_namespace, wait_ready
from harness.kits.plane import fresh_namespace
from harness.kits.verification import MetricServer, metric_server
from harness.node.cluster import NodeCluster
from harness.plane import ControlPlane, PlaneError
from harness.upstream import argo_helm

ROLLOUTS_NAMESPACE = "argo-rollouts"


@pytest.fixture(scope="module")
def rollgate(node: NodeCluster) -> Iterator[HostRollgate]:
    """rollgate's RBAC and webhook (registered) for the module, as the e2e plane has them
    for its whole session: every test of the module runs with the webhook active."""
    host = HostRollgate(node.plane)
    try:
        host.start()
    except PlaneError as err:
        pytest.fail(f"rollgate did not start on the node's plane: {err}", pytrace=False)
    try:
        yield host
    finally:
        host.remove()


@pytest.fixture(scope="module")
def control_plane(rollgate: HostRollgate) -> ControlPlane:
    return rollgate.plane


@pytest.fixture(scope="module")
def argo_rollouts(node: NodeCluster) -> Iterator[None]:
    """Argo Rollouts pods for every namespace, from argo-helm's chart."""
    plane = node.plane
    argo_helm.install_crds(plane, argo.upstream_crds())
    argo_helm.install(plane, ROLLOUTS_NAMESPACE, argo_helm.values(node.images.rollouts))
    wait_ready(plane, ROLLOUTS_NAMESPACE, selector=argo.SELECTOR, count=1)
    try:
        yield
    finally:
        argo_helm.uninstall(plane, ROLLOUTS_NAMESPACE)
        delete_namespace(plane, ROLLOUTS_NAMESPACE)


@pytest.fixture(scope="module")
def metrics(node: NodeCluster) -> Iterator[MetricServer]:
    with metric_server(node.settings.address) as server:
        yield server


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    with fresh_namespace(control_plane) as name:
        yield name
