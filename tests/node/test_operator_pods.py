"""Next to the real argo-rollouts-manager: the operator creates the Argo Rollouts
Deployment (the image made here, through ``spec.image``/``spec.version``/
``spec.imagePullPolicy``) and its pods run the plugins it rendered; rollgate audits.

The operator runs as a process with the admin kubeconfig (as the harness runs it
everywhere), with ``OPENSHIFT_ROUTE_PLUGIN_LOCATION`` pointing inside the Argo Rollouts
image, so the ``argoproj-labs/openshift`` plugin it always adds is a local file. What it
does to running pods on a plugin change (it deletes them) is measured and printed, for
the comparison with upstream in the docs; nothing about its timing is asserted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from harness.kits import rollouts_pods as argo
from harness.kits.kargo import ROLLGATE_MANAGERS, writers
from harness.kits.node import ReadyCount, Release, ready
from harness.node import images
from harness.node.cluster import NodeCluster
from harness.process import ManagedProcess
from harness.upstream import argo_helm, trees
from harness.upstream import operator as rollouts_manager
from testkit.plugin_server import PluginServer
from testkit.prometheus_stub import PrometheusStub
from testkit.waits import wait_for

METRIC_PATH = "/releases/v1/metrics-plugin-sample"
TRAFFIC_PATH = "/releases/v1/traffic-plugin"
TRAFFIC = "argoproj-labs/gatewayAPI"


@dataclass(frozen=True)
class Served:
    plugins: PluginServer
    prometheus: PrometheusStub
    digest: str

    def metric(self, path: str = METRIC_PATH) -> dict[str, Any]:
        return {"name": argo.SAMPLE_PLUGIN, "location": self.plugins.url(path),
                "sha256": self.digest}

    def traffic(self) -> dict[str, Any]:
        """A traffic plugin with a digest, which the operator drops (the binary is the
        sample plugin again: Argo Rollouts only downloads traffic plugins at start)."""
        return {"name": TRAFFIC, "location": self.plugins.url(TRAFFIC_PATH),
                "sha256": self.digest}


@pytest.fixture(scope="module")
def served(node: NodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    sample = argo.serve_sample_plugin(
        node, tmp_path_factory.mktemp("plugins"),
        (METRIC_PATH, "/releases/v2/metrics-plugin-sample", TRAFFIC_PATH))
    with PrometheusStub("0.99", host=node.settings.address) as prometheus:
        try:
            yield Served(sample.server, prometheus, sample.digest)
        finally:
            sample.server.stop()


@pytest.fixture(scope="module")
def operator(node: NodeCluster) -> Iterator[ManagedProcess]:
    argo_helm.install_crds(node.plane, argo.upstream_crds())
    try:
        proc = rollouts_manager.start(
            node.plane, openshift_plugin=f"file://{images.IMAGE_SAMPLE_PLUGIN}")
    except trees.UpstreamMissing as err:
        pytest.fail(str(err), pytrace=False)
    try:
        yield proc
    finally:
        rollouts_manager.stop(node.plane, proc)


@pytest.fixture(scope="module")
def release(node: NodeCluster, operator: ManagedProcess) -> Iterator[Release]:
    rel = argo.install_rollgate(node)
    try:
        yield rel
    finally:
        rel.uninstall()


def operator_spec(node: NodeCluster) -> dict[str, Any]:
    """The operator's Deployment runs the image made here, never pulled."""
    image = node.images.rollouts
    return {"namespaceScoped": True, "image": image.repository, "version": image.tag,
            "imagePullPolicy": "Never"}


def rollgate_writes(space: argo.ArgoNamespace) -> dict[str, set[str]]:
    """rollgate's field managers on what the operator owns."""
    found = {}
    for kind, name in (("configmap", argo.CONFIG_MAP), ("deployment", argo.DEPLOYMENT),
                       ("rolloutmanager", "rollouts")):
        obj = space.plane.get_json("-n", space.namespace, kind, name, "--show-managed-fields")
        mine = {w for w in writers(obj) if w.startswith(ROLLGATE_MANAGERS)}
        if mine:
            found[kind] = mine
    return found


def test_the_operators_pods_load_what_it_rendered_and_rollgate_only_audits(
        node: NodeCluster, release: Release, served: Served, namespace: str) -> None:
    space = argo.ArgoNamespace(node.plane, namespace)
    space.apply_rm({"metric": [served.metric()], "trafficManagement": [served.traffic()]},
                   **operator_spec(node))
    wait_for("the operator's argo-rollouts Deployment", lambda: space.plane.kubectl(
        "get", "deployment", argo.DEPLOYMENT, "-n", namespace, check=False).returncode == 0,
        timeout=120)
    # The operator may start a pod before it renders the plugins; it deletes the pods
    # when the ConfigMap changes, so the pod to look at is the one whose start saw them.
    lines = [argo.DOWNLOADING.format(name=e["name"], location=e["location"])
             for e in (served.metric(), served.traffic())]
    lines.append(f"Copied plugin from {images.IMAGE_SAMPLE_PLUGIN}")  # the openshift one

    def loaded() -> dict[str, str] | None:
        logs = space.logs([p for p in space.pods() if ready(p)])
        return logs if logs and all(all(line in log for line in lines)
                                    for log in logs.values()) else None

    wait_for("a Ready pod of the operator's that loaded every plugin", loaded, timeout=240)
    run = space.analysis_run("in-operator-pods", served.prometheus.url)
    assert run["status"]["phase"] == "Successful", run["status"]

    # rollgate audits: the digest the operator dropped is reported; nothing written.
    wait_for("PluginDigestDropped", lambda: any(
        TRAFFIC in m for m in space.events("PluginDigestDropped")), timeout=120)
    assert not space.condition().get("type"), "rollgate wrote PluginsSynced"
    assert rollgate_writes(space) == {}

    # A plugin change: the operator restarts its pods itself (it deletes them).
    running = space.uids()
    with ReadyCount(space.plane, namespace, argo.SELECTOR) as count:
        space.apply_rm({"metric": [served.metric("/releases/v2/metrics-plugin-sample")],
                        "trafficManagement": [served.traffic()]}, **operator_spec(node))
        new = space.wait_replaced(running, count=1)
    moved = argo.DOWNLOADING.format(
        name=argo.SAMPLE_PLUGIN, location=served.plugins.url("/releases/v2/metrics-plugin-sample"))
    assert all(moved in log for log in space.logs(new).values())
    assert rollgate_writes(space) == {}, "rollgate wrote what the operator owns"
    template = space.plane.get_json("-n", namespace, "deployment", argo.DEPLOYMENT)
    annotations = template["spec"]["template"]["metadata"].get("annotations") or {}
    assert not any(k.startswith("rollgate.dev/") for k in annotations), annotations
    print(f"operator: plugin change replaced {len(running)} pod(s); no Ready Argo Rollouts "
          f"pod for {count.seconds_without()} s")
