"""Operating an installed release as users do: replacing the webhook pods under a steady
stream of admission calls (`kubectl rollout restart`, then a `helm upgrade` that changes a
value), and draining the node past the PodDisruptionBudget.

The validating webhook fails closed, so a webhook pod that goes away under a kept-alive
connection of the API server would fail a user's `kubectl apply`: the stream must see no
failed call, and every generation of pods must have served part of it.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from harness.kits.node import (
    NAMESPACE,
    WEBHOOK,
    Release,
    image_values,
    merged,
    pods,
    wait_ready,
)
from harness.kits.stream import PodCounters, streaming
from harness.node.cluster import NodeCluster
from harness.plane import ControlPlane
from testkit.denials import EXAMPLES
from testkit.waits import wait_for

ROUNDS = 3
QUIET_SECONDS = 10  # the stream runs this long before each change and after it settles


@pytest.fixture(scope="module")
def release(node: NodeCluster) -> Iterator[Release]:
    rel = Release(node)
    rel.install(image_values(node.images.rollgate))
    try:
        yield rel
    finally:
        rel.uninstall()


@pytest.fixture(scope="module")
def ca_file(release: Release, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The webhook's CA, from the Secret the chart's hook Job made."""
    secret = release.plane.get_json("-n", NAMESPACE, "secret", "rollgate-webhook-tls")
    path = tmp_path_factory.mktemp("ca") / "ca.crt"
    path.write_bytes(base64.b64decode(secret["data"]["ca.crt"]))
    return path


def webhook_pod_names(plane: ControlPlane) -> set[str]:
    return {p["metadata"]["name"] for p in pods(plane, NAMESPACE, WEBHOOK)}


def generations(served: dict[str, float]) -> dict[str, float]:
    """Requests served per ReplicaSet (a pod's name without its own suffix)."""
    out: dict[str, float] = {}
    for pod, count in served.items():
        replica_set = pod.rsplit("-", 1)[0]
        out[replica_set] = out.get(replica_set, 0) + count
    return out


def replaced(plane: ControlPlane, old: set[str], change: str) -> None:
    """Until every pod of ``old`` is gone and two new ones are Ready."""
    wait_for(f"the webhook pods to be replaced ({change})", lambda: not (
        webhook_pod_names(plane) & old), timeout=300)
    wait_ready(plane, NAMESPACE, selector=WEBHOOK, count=2)


def test_no_admission_call_fails_while_the_webhook_pods_are_replaced(
        release: Release, ca_file: Path, namespace: str) -> None:
    plane = release.plane
    plane.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "analysistemplate.yaml"))
    for round_ in range(1, ROUNDS + 1):
        with PodCounters(plane, NAMESPACE, str(ca_file)) as counters, \
                streaming(plane, namespace) as stream:
            time.sleep(QUIET_SECONDS)
            old = webhook_pod_names(plane)
            plane.kubectl("rollout", "restart", "-n", NAMESPACE, "deployment/rollgate-webhook")
            replaced(plane, old, "rollout restart")
            time.sleep(QUIET_SECONDS)
            old = webhook_pod_names(plane)
            release.upgrade(merged(release.values, {
                "webhook": {"podAnnotations": {"rollgate.test/round": str(round_)}}}))
            replaced(plane, old, "helm upgrade")
            time.sleep(QUIET_SECONDS)
        totals = stream.totals
        grown = counters.grown()
        print(f"round {round_}: {totals.answered} calls answered, {totals.failed} failed; "
              f"requests per pod: {json.dumps(grown, sort_keys=True)}")
        assert totals.failed == 0, "\n".join(totals.errors)
        assert len(grown) == 6, f"3 generations of 2 webhook pods, seen: {sorted(grown)}"
        # Every generation served part of the stream. Not every pod: the API server
        # keeps its connections alive and opens new ones only as it needs them, so a pod
        # that became Ready after the others may see none in the quiet seconds.
        assert all(served > 0 for served in generations(grown).values()), grown


def test_the_disruption_budget_keeps_one_webhook_pod(release: Release) -> None:
    """With one webhook pod evicted and its replacement not yet scheduled (the node is
    cordoned), evicting the other is refused with 429: one pod always serves."""
    plane = release.plane
    first, second = sorted(webhook_pod_names(plane))
    core = client.CoreV1Api(plane.api_client())

    def evict(pod: str) -> int:
        body = client.V1Eviction(metadata=client.V1ObjectMeta(name=pod, namespace=NAMESPACE))
        try:
            core.create_namespaced_pod_eviction(pod, NAMESPACE, body)
        except ApiException as err:
            return int(err.status)
        return 201

    plane.kubectl("cordon", release.cluster.settings.name)
    try:
        assert evict(first) == 201
        assert evict(second) == 429
        assert second in webhook_pod_names(plane)
    finally:
        plane.kubectl("uncordon", release.cluster.settings.name)
    wait_ready(plane, NAMESPACE, selector=WEBHOOK, count=2)
    # The budget held: the webhook answered throughout (it fails closed otherwise).
    out = plane.kubectl("apply", "--dry-run=server", "-f",
                        str(EXAMPLES / "invalid" / "stage.yaml"), "-n", "default", check=False)
    assert 'admission webhook "validate-stages.rollgate.dev" denied' in out.stderr, out.stderr
