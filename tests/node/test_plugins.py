"""Plugins for real: Argo Rollouts pods that download, check and load the plugins rollgate
syncs (sync mode: Argo Rollouts from argo-helm's chart, no operator).

Everything is checked from the cluster as a user would: the ConfigMap, the pods and their
logs, the RolloutManager's condition and Events, and an AnalysisRun whose metric is
measured by the plugin inside the new pods. The plugin is the real sample metric plugin
the build makes, served over HTTPS on the node's bridge address with the CA the Argo
Rollouts image trusts (rollgate's pre-flight gets the same CA with
``--plugins-ca-file``), so both download the same bytes; the Prometheus it asks listens
on the bridge address too (pods cannot reach the host's loopback).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.kits import rollouts_pods as argo
from harness.kits.node import (
    NAMESPACE,
    RECONCILER,
    ReadyCount,
    Release,
    pods,
    wait_ready,
)
from harness.node.cluster import NodeCluster
from harness.upstream import argo_helm
from testkit.plugin_server import PluginServer
from testkit.prometheus_stub import PrometheusStub
from testkit.waits import wait_for

SAMPLE_PLUGIN, QUERY = argo.SAMPLE_PLUGIN, argo.QUERY
PATH = "/releases/v1/metrics-plugin-sample"


@dataclass(frozen=True)
class Servers:
    plugins: PluginServer
    prometheus: PrometheusStub
    location: str
    digest: str


@pytest.fixture(scope="module")
def servers(node: NodeCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    sample = argo.serve_sample_plugin(node, tmp_path_factory.mktemp("plugins"), [PATH])
    plugins = sample.server
    with PrometheusStub("0.99", host=node.settings.address) as prometheus:
        try:
            yield Servers(plugins, prometheus, plugins.url(PATH), sample.digest)
        finally:
            plugins.stop()


@pytest.fixture(scope="module")
def release(node: NodeCluster, servers: Servers) -> Iterator[Release]:
    """rollgate with the plugins CA for its pre-flight (``reconciler.pluginsCA``)."""
    rel = argo.install_rollgate(node)
    try:
        yield rel
    finally:
        rel.uninstall()


@pytest.fixture
def rollouts(node: NodeCluster, release: Release, namespace: str
             ) -> Iterator[argo.ArgoNamespace]:
    """Argo Rollouts in the test's namespace from argo-helm's chart (namespaced, two
    replicas that roll one at a time, Ready once they serve metrics)."""
    argo_helm.install_crds(node.plane, argo.upstream_crds())
    argo_helm.install(node.plane, namespace, argo_helm.values(
        node.images.rollouts, namespaced=True, replicas=2, readiness=True))
    wait_ready(node.plane, namespace, selector=argo.SELECTOR, count=2)
    yield argo.ArgoNamespace(node.plane, namespace)
    argo_helm.uninstall(node.plane, namespace)


def plugin(servers: Servers, *, digest: str | None = None,
           location: str | None = None) -> dict[str, Any]:
    return {"name": SAMPLE_PLUGIN, "location": location or servers.location,
            "sha256": digest or servers.digest}


def synced(rollouts: argo.ArgoNamespace, servers: Servers) -> list[dict[str, Any]]:
    """Add the sample plugin and wait for the roll; the new pods."""
    old = rollouts.uids()
    rollouts.apply_rm({"metric": [plugin(servers)]})
    rollouts.wait_condition("True", "Synced")
    return rollouts.wait_replaced(old)


def test_a_new_metric_plugin_is_downloaded_and_runs_in_the_new_pods(
        rollouts: argo.ArgoNamespace, servers: Servers) -> None:
    asked_before = servers.plugins.requests.count(PATH)
    with ReadyCount(rollouts.plane, rollouts.namespace, argo.SELECTOR) as ready:
        new = synced(rollouts, servers)
    assert rollouts.metric_entries() == [plugin(servers)]
    # One at a time: there was always a Ready Argo Rollouts pod.
    assert ready.lowest >= 1, f"no Ready pod for {ready.seconds_without()} s of the roll"
    downloaded = argo.DOWNLOADING.format(name=SAMPLE_PLUGIN, location=servers.location)
    for name, log in rollouts.logs(new).items():
        assert downloaded in log, f"{name} did not download the plugin:\n{log[-3000:]}"
        assert "level=fatal" not in log, log[-3000:]
    # rollgate's pre-flight and each new pod downloaded the bytes.
    assert servers.plugins.requests.count(PATH) >= asked_before + 3
    run = rollouts.analysis_run("with-plugin", servers.prometheus.url)
    assert run["status"]["phase"] == "Successful", run["status"]
    result = run["status"]["metricResults"][0]
    assert result["measurements"][0]["value"] == "0.99"
    assert result["metadata"] == {"ResolvedPrometheusQuery": QUERY}
    assert QUERY in servers.prometheus.queries  # asked by the plugin process in the pod


def test_a_change_that_leaves_the_plugins_alone_restarts_nothing_and_removal_rolls(
        rollouts: argo.ArgoNamespace, servers: Servers) -> None:
    synced(rollouts, servers)
    running = rollouts.uids()
    rollouts.apply_rm({"metric": [plugin(servers)]},
                      additionalMetadata={"labels": {"team": "payments"}})
    rollouts.wait_condition("True", "Synced")
    assert rollouts.uids() == running, "an unchanged plugin set restarted Argo Rollouts"

    rollouts.apply_rm({})
    rollouts.wait_condition("True", "Synced")
    new = rollouts.wait_replaced(running)
    assert rollouts.metric_entries() == []
    for name, log in rollouts.logs(new).items():
        assert "Downloading plugin" not in log, f"{name} still has a plugin:\n{log[-2000:]}"


def test_a_wrong_digest_touches_no_pod_and_without_rollgate_crashes_argo_rollouts(
        rollouts: argo.ArgoNamespace, servers: Servers, release: Release) -> None:
    """Side by side: what the pre-flight is for."""
    synced(rollouts, servers)
    running = rollouts.uids()
    wrong = hashlib.sha256(b"another build of the plugin").hexdigest()
    rollouts.apply_rm({"metric": [plugin(servers, digest=wrong)]})
    cond = rollouts.wait_condition("False", "DigestMismatch")
    for text in (SAMPLE_PLUGIN, wrong, servers.digest):
        assert text in cond["message"], cond["message"]
    assert any(SAMPLE_PLUGIN in m and wrong in m for m in rollouts.events("DigestMismatch"))
    assert rollouts.metric_entries() == [plugin(servers)], "the ConfigMap was rewritten"
    assert rollouts.uids() == running, "a pod was replaced"
    # The running pods keep executing AnalysisRuns with the plugin they have.
    run = rollouts.analysis_run("after-refusal", servers.prometheus.url)
    assert run["status"]["phase"] == "Successful", run["status"]
    assert len(wait_ready(rollouts.plane, rollouts.namespace, selector=argo.SELECTOR,
                          count=2)) == 2

    # The same digest written by hand, rollgate stopped: the new pods exit at start.
    plane = rollouts.plane
    plane.kubectl("scale", "-n", NAMESPACE, "deployment/rollgate-reconciler", "--replicas=0")
    try:
        wait_for("the reconciler pods to be gone",
                 lambda: not pods(plane, NAMESPACE, RECONCILER), timeout=120)
        plane.kubectl("patch", "-n", rollouts.namespace, "configmap", argo.CONFIG_MAP,
                      "--type=merge", "-p", json.dumps({"data": {argo.METRIC_KEY: yaml.safe_dump(
                          [plugin(servers, digest=wrong)])}}))
        plane.kubectl("rollout", "restart", "-n", rollouts.namespace,
                      f"deployment/{argo.DEPLOYMENT}")
        crashed = wait_for("a new Argo Rollouts pod to exit at start",
                           lambda: rollouts.exited_pod(running), timeout=180)
        # The exited container's log (or the running retry's, which exits the same way).
        log = wait_for("the crashed pod's log to show the failed digest check", lambda: next(
            (text for text in (argo.pod_log(plane, rollouts.namespace, crashed, previous=p)
                               for p in (True, False)) if argo.MISMATCH in text), None),
            timeout=120)
        fatal = [line for line in log.splitlines() if "level=fatal" in line]
        assert fatal and "Failed to download plugins" in fatal[0], log[-3000:]
        # It downloaded the real bytes: the digest it computed is the binary's.
        assert f"expected sha256: {wrong}, actual sha256: {servers.digest}" in log
        # maxUnavailable 0: the old pods still serve while the new one crash-loops.
        assert running <= rollouts.uids()
    finally:
        plane.kubectl("scale", "-n", NAMESPACE, "deployment/rollgate-reconciler",
                      "--replicas=2")
        wait_ready(plane, NAMESPACE, selector=RECONCILER, count=2)


def test_with_the_plugin_server_down_nothing_rolls_until_it_is_back(
        rollouts: argo.ArgoNamespace, servers: Servers, tmp_path: Path) -> None:
    synced(rollouts, servers)
    running = rollouts.uids()
    moved = servers.plugins.serve("/releases/v2/metrics-plugin-sample",
                                  servers.plugins.routes[PATH][1])
    servers.plugins.stop()
    try:
        rollouts.apply_rm({"metric": [plugin(servers, location=moved)]})
        cond = rollouts.wait_condition("False", "DownloadFailed")
        assert SAMPLE_PLUGIN in cond["message"] and moved in cond["message"], cond["message"]
        assert rollouts.uids() == running
        assert rollouts.metric_entries() == [plugin(servers)]
    finally:
        servers.plugins.start()
    # The retry (every 60 s) finds it back: synced and rolled with nobody touching it.
    rollouts.wait_condition("True", "Synced")
    new = rollouts.wait_replaced(running)
    assert rollouts.metric_entries() == [plugin(servers, location=moved)]
    downloaded = argo.DOWNLOADING.format(name=SAMPLE_PLUGIN, location=moved)
    assert all(downloaded in log for log in rollouts.logs(new).values())


def test_a_file_that_is_not_a_linux_executable_touches_no_pod(
        rollouts: argo.ArgoNamespace, servers: Servers) -> None:
    """An error page saved where the plugin should be: its digest matches (a user took it
    from the same URL), Argo Rollouts would load it and fail on first use; rollgate
    refuses it before anything is written, saying what the file is."""
    synced(rollouts, servers)
    running = rollouts.uids()
    page = b"<!DOCTYPE html><html><body>404 Not Found</body></html>\n"
    location = servers.plugins.serve("/releases/v3/metrics-plugin-sample", page)
    rollouts.apply_rm({"metric": [plugin(servers, location=location,
                                         digest=hashlib.sha256(page).hexdigest())]})
    cond = rollouts.wait_condition("False", "NotExecutable")
    assert SAMPLE_PLUGIN in cond["message"] and "HTML" in cond["message"], cond["message"]
    assert any(SAMPLE_PLUGIN in m for m in rollouts.events("NotExecutable"))
    assert rollouts.metric_entries() == [plugin(servers)]
    assert rollouts.uids() == running
