"""Stage verification next to the real Kargo, with its AnalysisRuns executed by Argo
Rollouts pods on the node (upstream's cluster-wide ``install.yaml`` at the tag, only the
image and its pull policy changed) against a metric server on the node's bridge address.

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
    """Argo Rollouts pods for every namespace, from upstream's install.yaml."""
    plane = node.plane
    # Kept if there: a host Argo Rollouts controller of an earlier module keeps its
    # argo-rollouts-config in a namespace of this name.
    plane.create_namespace(ROLLOUTS_NAMESPACE)
    argo.install(plane, ROLLOUTS_NAMESPACE, argo.cluster_install(node.images.rollouts))
    wait_ready(plane, ROLLOUTS_NAMESPACE, selector=argo.SELECTOR, count=1)
    try:
        yield
    finally:
        objects = argo.cluster_install(node.images.rollouts)
        cluster_wide = [f"{o['kind'].lower()}/{o['metadata']['name']}" for o in objects
                        if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
        plane.kubectl("delete", "--ignore-not-found", *cluster_wide, check=False)
        delete_namespace(plane, ROLLOUTS_NAMESPACE)


@pytest.fixture(scope="module")
def metrics(node: NodeCluster) -> Iterator[MetricServer]:
    with metric_server(node.settings.address) as server:
        yield server


@pytest.fixture
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    with fresh_namespace(control_plane) as name:
        yield name
