"""RolloutManager plugins on a real control plane (issues 5 and 10, e2e acceptance).

The reconciler runs as ``python -m reconciler --controllers rollout-plugins`` under the
ServiceAccount and RBAC from ``manifests/``, in the default ``--plugins-mode=auto``;
everything is driven and checked with kubectl, the way a user would. A stand-in
``argo-rollouts`` Deployment plays the Argo Rollouts controller: no pod needs to run, its
pod template is what tells whether the controller would be restarted. Remote plugins are
served over HTTPS from 127.0.0.1 with a CA the test made (``--plugins-ca-file``), so the
digest pre-flight downloads real bytes over verified TLS. Where the real Argo Rollouts
controller (hack/rollouts.py) is started after rollgate wrote the ConfigMap, it downloads
the real sample metric plugin from that server too and runs it.

Waits poll the API up to a generous deadline; no test asserts how fast something happens.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import controlplane
import pytest
import rollouts
import yaml
from k8sprocess import free_port
from plugin_server import PluginServer, sha256
from prometheus_client.parser import text_string_to_metric_families
from prometheus_stub import PrometheusStub

CM = "argo-rollouts-config"
TRAFFIC = "trafficRouterPlugins"
METRIC = "metricProviderPlugins"
ANNOTATION = "rollgate.dev/plugins-checksum"
DEADLINE = 60.0

# The plugin server's port is fixed when the module loads so the plugin entries below can
# be constants; the server (module fixture) binds it.
PLUGIN_PORT = free_port()
GATEWAY_BINARY = b"\x7fELF stand-in for gatewayapi-plugin-linux-amd64\n" * 4096
METRIC_BINARY = b"\x7fELF stand-in for a metric plugin\n" * 4096
GATEWAY = {
    "name": "argoproj-labs/gatewayAPI",
    "location": f"https://127.0.0.1:{PLUGIN_PORT}/releases/v0.4.0/gatewayapi-plugin-linux-amd64",
    "sha256": sha256(GATEWAY_BINARY),
}
PROMETHEUS = {"name": "argoproj-labs/sample-prometheus", "location": "file:///plugins/prom"}
# Settings someone else keeps in the same ConfigMap; rollgate must never touch them.
OTHER_DATA = {"metricProviders": "prometheus:\n  address: http://prometheus:9090\n"}
OTHER_LABELS = {"team": "platform"}


# --- fixtures ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def plugin_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PluginServer]:
    """HTTPS on 127.0.0.1 serving the plugin binaries, with the test's own CA."""
    server = PluginServer(tmp_path_factory.mktemp("plugin-server"))
    server.port = PLUGIN_PORT
    server.serve(GATEWAY["location"].split(str(PLUGIN_PORT), 1)[1], GATEWAY_BINARY)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def reconciler(
    control_plane: controlplane.ControlPlane, plugin_server: PluginServer
) -> Iterator[controlplane.ManagedProcess]:
    """One reconciler for the module, only the plugins controller, one worker.

    No leader election: nothing else in these tests competes for the Lease, and a
    standby replica left over from another module must not keep this one idle. It
    trusts the plugin server's CA on top of the system CAs.
    """
    proc = control_plane.start_reconciler(
        "--controllers", "rollout-plugins", "--no-leader-elect", "--workers", "1",
        "--plugins-ca-file", str(plugin_server.ca_file),
        name="reconciler-plugins",
    )
    try:
        proc.wait_ready(60)
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def env(
    control_plane: controlplane.ControlPlane,
    reconciler: controlplane.ManagedProcess,
    namespace: str,
) -> Env:
    env = Env(control_plane, reconciler, namespace)
    env.create_rollouts_deployment()
    return env


class Env:
    """kubectl-level helpers for one test namespace."""

    def __init__(
        self,
        plane: controlplane.ControlPlane,
        reconciler: controlplane.ManagedProcess,
        namespace: str,
    ) -> None:
        self.plane = plane
        self.reconciler = reconciler
        self.ns = namespace

    # -- kubectl ---------------------------------------------------------------------------
    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> Any:
        return self.plane.kubectl(*args, "-n", self.ns, input=input, check=check)

    def apply(self, obj: dict[str, Any]) -> None:
        obj = {**obj, "metadata": {**obj["metadata"], "namespace": self.ns}}
        self.kubectl("apply", "-f", "-", input=json.dumps(obj))

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        out = self.kubectl("get", kind, name, "-o", "json", "--ignore-not-found")
        return json.loads(out.stdout) if out.stdout.strip() else None

    # -- objects ---------------------------------------------------------------------------
    def create_rollouts_deployment(self) -> None:
        """The stand-in Deployment of a cluster that installs Argo Rollouts without the
        operator (sync mode)."""
        meta: dict[str, Any] = {"name": "argo-rollouts"}
        self.apply({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "argo-rollouts"}},
                "strategy": {"type": "RollingUpdate",
                             "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                "template": {
                    "metadata": {"labels": {"app": "argo-rollouts"}},
                    "spec": {"containers": [{
                        "name": "argo-rollouts",
                        "image": "example.invalid/argo-rollouts:stand-in",
                    }]},
                },
            },
        })

    def create_config_map(self, data: dict[str, str]) -> None:
        self.apply({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CM, "labels": OTHER_LABELS},
            "data": data,
        })

    def apply_rm(self, name: str, plugins: Any, *, labels: dict[str, str] | None = None) -> None:
        meta: dict[str, Any] = {"name": name}
        if labels:
            meta["labels"] = labels
        self.apply({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "RolloutManager",
            "metadata": meta,
            "spec": {"plugins": plugins},
        })

    # -- observations ----------------------------------------------------------------------
    def config_map(self) -> dict[str, Any] | None:
        return self.get("configmap", CM)

    def entries(self, key: str) -> list[dict[str, Any]] | None:
        cm = self.config_map() or {}
        raw = (cm.get("data") or {}).get(key)
        return None if raw is None else yaml.safe_load(raw)

    def deployment(self) -> dict[str, Any]:
        dep = self.get("deployment", "argo-rollouts")
        assert dep is not None
        return dep

    def checksum_annotation(self) -> str | None:
        template = self.deployment()["spec"]["template"]
        return (template["metadata"].get("annotations") or {}).get(ANNOTATION)

    def condition(self, rm: str) -> dict[str, Any] | None:
        obj = self.get("rolloutmanager", rm) or {}
        for cond in (obj.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PluginsSynced":
                return cond
        return None

    def events(self, rm: str, *, type: str, reason: str | None = None) -> list[dict[str, Any]]:
        selector = f"involvedObject.name={rm},type={type}"
        if reason:
            selector += f",reason={reason}"
        out = self.kubectl("get", "events", "-o", "json", "--field-selector", selector)
        return json.loads(out.stdout)["items"]

    def metric(self, name: str, **labels: str) -> float | None:
        """One sample of the reconciler's /metrics (None when absent)."""
        with urllib.request.urlopen(self.reconciler.url + "/metrics", timeout=5) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    return sample.value
        return None

    def resource_versions(self, rm: str) -> dict[str, str]:
        """resourceVersion of the ConfigMap, the Deployment and the RolloutManager."""
        return {
            kind: (self.get(kind, name) or {}).get("metadata", {}).get("resourceVersion", "")
            for kind, name in (("configmap", CM), ("deployment", "argo-rollouts"),
                               ("rolloutmanager", rm))
        }

    def reconciles(self) -> tuple[float, float]:
        """(reconciles finished, queue depth) of the plugins controller, from /metrics."""
        with urllib.request.urlopen(self.reconciler.url + "/metrics", timeout=5) as resp:
            text = resp.read().decode()
        done = depth = 0.0
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.labels.get("controller") != "rollout-plugins":
                    continue
                if sample.name == "rollgate_reconciler_reconcile_total":
                    done += sample.value
                elif sample.name == "rollgate_reconciler_queue_depth":
                    depth += sample.value
        return done, depth

    def wait_idle(self) -> float:
        """Wait until the controller's queue is empty and its reconcile count stays put."""
        last = None
        def idle() -> bool:
            nonlocal last
            done, depth = self.reconciles()
            settled = depth == 0 and done == last
            last = done
            return settled
        wait_for(idle, "the plugins controller to go idle", interval=0.5)
        assert last is not None
        return last

    def wait_synced(self, rm: str) -> dict[str, Any]:
        """Wait for PluginsSynced=True for the RM's current generation; return it."""
        def synced() -> dict[str, Any] | None:
            obj = self.get("rolloutmanager", rm) or {}
            cond = self.condition(rm)
            if (
                cond
                and cond["status"] == "True"
                and cond.get("observedGeneration") == obj["metadata"]["generation"]
            ):
                return cond
            return None
        return wait_for(synced, f"PluginsSynced=True on RolloutManager {rm}")


def wait_for(
    probe: Callable[[], Any], what: str, *, deadline: float = DEADLINE, interval: float = 0.2
) -> Any:
    """Poll ``probe`` until it returns something truthy; fail after ``deadline`` seconds."""
    end = time.monotonic() + deadline
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > end:
            pytest.fail(f"timed out after {deadline:.0f}s waiting for {what}")
        time.sleep(interval)


def expected_checksum(cm: dict[str, Any]) -> str:
    """README, "RolloutManager plugins": sha256 of the rendered keys as JSON with sorted keys."""
    data = {k: v for k, v in (cm.get("data") or {}).items() if k in (TRAFFIC, METRIC)}
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def sync_both(env: Env, name: str = "rollouts") -> None:
    env.apply_rm(name, {"trafficManagement": [GATEWAY], "metric": [PROMETHEUS]})
    env.wait_synced(name)
    wait_for(lambda: env.entries(METRIC) == [PROMETHEUS], "metric plugins in the ConfigMap")


# --- tests ------------------------------------------------------------------------------------


def test_plugins_are_written_and_other_keys_are_kept(env: Env) -> None:
    env.create_config_map(OTHER_DATA)
    env.apply_rm("rollouts", {"trafficManagement": [GATEWAY], "metric": [PROMETHEUS]})

    wait_for(lambda: env.entries(TRAFFIC) and env.entries(METRIC), "both plugin keys")
    assert env.entries(TRAFFIC) == [GATEWAY]
    assert env.entries(METRIC) == [PROMETHEUS]  # no sha256 given: none rendered
    cm = env.config_map()
    assert cm is not None
    assert {k: v for k, v in cm["data"].items() if k not in (TRAFFIC, METRIC)} == OTHER_DATA
    assert cm["metadata"]["labels"] == OTHER_LABELS

    cond = env.wait_synced("rollouts")
    assert cond["reason"]
    wait_for(env.checksum_annotation, "the checksum annotation on the Deployment")
    assert env.checksum_annotation() == expected_checksum(cm)


def test_location_change_updates_the_key_and_restarts_once(env: Env) -> None:
    sync_both(env)
    wait_for(env.checksum_annotation, "the checksum annotation on the Deployment")
    before = env.checksum_annotation()
    generation = env.deployment()["metadata"]["generation"]

    moved = {**PROMETHEUS, "location": "file:///plugins/prom-v2"}
    env.apply_rm("rollouts", {"trafficManagement": [GATEWAY], "metric": [moved]})

    wait_for(lambda: env.entries(METRIC) == [moved], "the new location in the ConfigMap")
    assert env.entries(TRAFFIC) == [GATEWAY]
    wait_for(lambda: env.checksum_annotation() != before, "a new checksum annotation")
    env.wait_synced("rollouts")
    env.wait_idle()
    cm = env.config_map()
    assert cm is not None
    assert env.checksum_annotation() == expected_checksum(cm)
    # One pod-template change = one rollout of the Argo Rollouts controller.
    assert env.deployment()["metadata"]["generation"] == generation + 1


def test_unrelated_change_writes_nothing(env: Env) -> None:
    env.create_config_map(OTHER_DATA)
    sync_both(env)
    wait_for(env.checksum_annotation, "the checksum annotation on the Deployment")
    before = env.wait_idle()
    cm_version = env.config_map()["metadata"]["resourceVersion"]  # type: ignore[index]
    deployment = env.deployment()

    env.kubectl("label", "rolloutmanager", "rollouts", "tier=gold")
    wait_for(lambda: env.reconciles()[0] > before, "the reconciler to process the label change")
    env.wait_idle()

    assert env.config_map()["metadata"]["resourceVersion"] == cm_version  # type: ignore[index]
    after = env.deployment()
    assert after["metadata"]["generation"] == deployment["metadata"]["generation"]
    assert env.checksum_annotation() == deployment["spec"]["template"]["metadata"][
        "annotations"][ANNOTATION]


def test_removing_all_plugins_removes_the_keys_only(env: Env) -> None:
    env.create_config_map(OTHER_DATA)
    sync_both(env)

    env.apply_rm("rollouts", {"trafficManagement": [GATEWAY], "metric": []})
    wait_for(lambda: env.entries(METRIC) is None, "metricProviderPlugins to go")
    assert env.entries(TRAFFIC) == [GATEWAY]

    env.apply_rm("rollouts", None)
    wait_for(lambda: env.entries(TRAFFIC) is None, "trafficRouterPlugins to go")
    env.wait_synced("rollouts")
    cm = env.config_map()
    assert cm is not None
    assert cm["data"] == OTHER_DATA
    assert cm["metadata"]["labels"] == OTHER_LABELS


def test_hand_edit_of_managed_key_is_reverted(env: Env) -> None:
    env.create_config_map(OTHER_DATA)
    sync_both(env)
    rendered = env.config_map()["data"][METRIC]  # type: ignore[index]

    hand = yaml.safe_dump([{"name": "someone/else", "location": "file:///tmp/x"}])
    env.kubectl("patch", "configmap", CM, "--type=merge", "-p",
                json.dumps({"data": {METRIC: hand, "extra": "kept"}}))

    wait_for(
        lambda: (env.config_map() or {}).get("data", {}).get(METRIC) == rendered,
        "the hand edit of metricProviderPlugins to be reverted",
    )
    data = env.config_map()["data"]  # type: ignore[index]
    assert data["extra"] == "kept"
    assert data["metricProviders"] == OTHER_DATA["metricProviders"]


def test_hand_made_entries_are_replaced_with_a_warning(env: Env) -> None:
    env.create_config_map({
        **OTHER_DATA,
        TRAFFIC: yaml.safe_dump([{"name": "hand/made-router", "location": "file:///r"}]),
        METRIC: yaml.safe_dump([PROMETHEUS, {"name": "hand/made-metric", "location": "file:///m"}]),
    })
    env.apply_rm("rollouts", {"trafficManagement": [GATEWAY], "metric": [PROMETHEUS]})

    wait_for(lambda: env.entries(TRAFFIC) == [GATEWAY], "the spec's traffic router plugins")
    assert env.entries(METRIC) == [PROMETHEUS]
    warnings = wait_for(
        lambda: [e for e in env.events("rollouts", type="Warning")
                 if "hand/made-router" in e["message"]],
        "a Warning event naming the replaced entries",
    )
    assert "hand/made-metric" in warnings[0]["message"]
    assert "argoproj-labs/sample-prometheus" not in warnings[0]["message"]
    assert env.config_map()["data"]["metricProviders"] == OTHER_DATA["metricProviders"]  # type: ignore[index]


def test_invalid_rollout_manager_stored_without_webhook_writes_nothing(
    env: Env, control_plane: controlplane.ControlPlane
) -> None:
    env.create_config_map(OTHER_DATA)
    bad = {**PROMETHEUS, "sha256": "b" * 40}
    control_plane.unregister_webhooks()
    try:
        env.apply_rm("rollouts", {"trafficManagement": [GATEWAY], "metric": [bad]})
    finally:
        control_plane.register_webhooks()

    cond = wait_for(
        lambda: (c := env.condition("rollouts")) and c["status"] == "False" and c,
        "PluginsSynced=False",
    )
    assert "spec.plugins.metric[0].sha256" in cond["message"]
    obj = env.get("rolloutmanager", "rollouts")
    assert obj is not None
    assert cond["observedGeneration"] == obj["metadata"]["generation"]
    env.wait_idle()
    cm = env.config_map()
    assert cm is not None
    assert cm["data"] == OTHER_DATA
    assert env.checksum_annotation() is None


def test_the_oldest_rollout_manager_owns_the_keys(env: Env) -> None:
    sync_both(env, "first")
    # creationTimestamp has one-second resolution; a later second makes "first" older
    # by time, not only by name.
    created = env.get("rolloutmanager", "first")["metadata"]["creationTimestamp"]  # type: ignore[index]
    wait_for(
        lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) > created,
        "the clock to pass the first creation second",
    )
    other = {"name": "other/metric", "location": "file:///plugins/other"}
    env.apply_rm("second", {"metric": [other]})

    cond = wait_for(
        lambda: (c := env.condition("second")) and c["status"] == "False" and c,
        "PluginsSynced=False on the second RolloutManager",
    )
    assert "first" in cond["message"]
    env.wait_idle()
    assert env.entries(METRIC) == [PROMETHEUS]
    assert env.entries(TRAFFIC) == [GATEWAY]
    assert env.condition("first")["status"] == "True"  # type: ignore[index]

    # The owner goes: the next oldest takes over.
    env.kubectl("delete", "rolloutmanager", "first")
    wait_for(lambda: env.entries(METRIC) == [other], "the second RolloutManager's plugins")
    wait_for(lambda: env.entries(TRAFFIC) is None, "the first one's traffic plugins to go")
    env.wait_synced("second")


def test_deleting_the_rollout_manager_removes_the_keys_and_keeps_the_config_map(
    env: Env,
) -> None:
    env.create_config_map(OTHER_DATA)
    sync_both(env)

    env.kubectl("delete", "rolloutmanager", "rollouts")

    wait_for(
        lambda: not {TRAFFIC, METRIC} & set((env.config_map() or {}).get("data") or {}),
        "the plugin keys to be removed",
    )
    cm = env.config_map()
    assert cm is not None
    assert cm["data"] == OTHER_DATA
    assert cm["metadata"]["labels"] == OTHER_LABELS


def wait_waiting(env: Env, rm: str) -> None:
    """Wait until the reconciler has seen ``rm`` and waits for the Deployment; then check
    that it wrote nothing at all: no ConfigMap, no condition, not one status write."""
    wait_for(lambda: env.metric("rollgate_plugins_mode", namespace=env.ns, mode="waiting"),
             "the namespace to wait for its argo-rollouts Deployment")
    written = (env.get("rolloutmanager", rm) or {})["metadata"]["resourceVersion"]
    env.wait_idle()
    assert env.config_map() is None, "no ConfigMap written while waiting"
    assert env.condition(rm) is None, "no condition written while waiting"
    assert (env.get("rolloutmanager", rm) or {})["metadata"]["resourceVersion"] == written


def test_nothing_is_written_before_the_rollouts_deployment_exists(env: Env) -> None:
    """auto mode: argo-rollouts-manager creates the Deployment after the RolloutManager,
    so rollgate waits for it and writes nothing at all, not even status; without an
    operator controlling it, the Deployment that appears is synced."""
    env.kubectl("delete", "deployment", "argo-rollouts")
    env.apply_rm("rollouts", {"metric": [PROMETHEUS]})
    wait_waiting(env, "rollouts")

    env.create_rollouts_deployment()
    env.wait_synced("rollouts")
    assert env.entries(METRIC) == [PROMETHEUS]
    wait_for(env.checksum_annotation, "the checksum annotation on the new Deployment")


# --- another manager co-owning a plugin key ---------------------------------------------------

# The field manager argo-rollouts-manager (the operator) uses; any other name would do.
CO_OWNER = "argo-rollouts-manager"


def co_own(env: Env, key: str) -> None:
    """Server-side apply the key's current value as a second field manager.

    Same value, so no conflict: the key is then owned by rollgate and CO_OWNER both, and
    an apply by rollgate without the key only gives up rollgate's share of it.
    """
    value = env.config_map()["data"][key]  # type: ignore[index]
    body = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CM, "namespace": env.ns}, "data": {key: value}}
    env.kubectl("apply", "--server-side", f"--field-manager={CO_OWNER}", "-f", "-",
                input=json.dumps(body))
    shown = env.kubectl("get", "configmap", CM, "-o", "json", "--show-managed-fields")
    managers = {
        entry["manager"]
        for entry in json.loads(shown.stdout)["metadata"]["managedFields"]
        if f"f:{key}" in (entry.get("fieldsV1") or {}).get("f:data", {})
    }
    assert managers == {"rollgate", CO_OWNER}, managers


def create_config_map_without_apply(env: Env, data: dict[str, str]) -> None:
    """``kubectl create``, not ``kubectl apply``.

    ``kubectl apply --server-side`` over an object that client-side apply made moves
    client-side apply's fields to the new field manager, which then drops those its
    configuration leaves out (here: the other keys and the labels).
    """
    env.kubectl("create", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CM, "labels": OTHER_LABELS}, "data": data,
    }))


def test_dropping_a_co_owned_key_from_the_spec_removes_it(env: Env) -> None:
    create_config_map_without_apply(env, OTHER_DATA)
    sync_both(env)
    co_own(env, METRIC)

    env.apply_rm("rollouts", {"trafficManagement": [GATEWAY], "metric": []})

    wait_for(lambda: env.entries(METRIC) is None, "the co-owned metricProviderPlugins to go")
    env.wait_synced("rollouts")
    env.wait_idle()
    cm = env.config_map()
    assert cm is not None
    assert env.entries(TRAFFIC) == [GATEWAY]
    assert {k: v for k, v in cm["data"].items() if k != TRAFFIC} == OTHER_DATA
    assert env.checksum_annotation() == expected_checksum(cm)


def test_deleting_the_rollout_manager_removes_a_co_owned_key(env: Env) -> None:
    create_config_map_without_apply(env, OTHER_DATA)
    env.apply_rm("rollouts", {"metric": [PROMETHEUS]})
    env.wait_synced("rollouts")
    wait_for(env.checksum_annotation, "the checksum annotation on the Deployment")
    co_own(env, METRIC)
    before = env.wait_idle()

    env.kubectl("delete", "rolloutmanager", "rollouts")

    wait_for(lambda: env.reconciles()[0] > before, "the reconciler to process the delete")
    env.wait_idle()
    cm = env.config_map()
    assert cm is not None, "the ConfigMap itself is kept"
    assert cm["data"] == OTHER_DATA, "the co-owned plugin key is removed, the rest kept"
    assert cm["metadata"]["labels"] == OTHER_LABELS
    # Nothing is configured any more: the annotation says so (the checksum of no keys),
    # and the removal was reported on the ConfigMap.
    assert env.checksum_annotation() == expected_checksum(cm)
    removed = env.kubectl(
        "get", "events", "-o", "json",
        "--field-selector", f"involvedObject.name={CM},reason=PluginsRemoved",
    )
    assert json.loads(removed.stdout)["items"]


# --- digest pre-flight -----------------------------------------------------------------------


def wait_condition(env: Env, rm: str, reason: str) -> dict[str, Any]:
    """Wait for PluginsSynced with ``reason`` for the RM's current generation."""
    def probe() -> dict[str, Any] | None:
        obj = env.get("rolloutmanager", rm) or {}
        cond = env.condition(rm)
        if (cond and cond["reason"] == reason
                and cond.get("observedGeneration") == obj["metadata"]["generation"]):
            return cond
        return None
    return wait_for(probe, f"PluginsSynced reason {reason} on RolloutManager {rm}")


def test_digests_are_proven_before_anything_is_written(
    env: Env, plugin_server: PluginServer
) -> None:
    """Correct digest -> written and rolled; wrong digest -> nothing written,
    DigestMismatch; server down -> DownloadFailed; fixed digest -> synced."""
    metric_digest = sha256(METRIC_BINARY)
    metric_path = f"/{env.ns}/metric-plugin-v2"
    metric_url = plugin_server.serve(metric_path, METRIC_BINARY)

    # Correct digest: the binary is downloaded, then the ConfigMap written and rolled.
    env.apply_rm("rollouts", {"trafficManagement": [GATEWAY]})
    env.wait_synced("rollouts")
    assert env.entries(TRAFFIC) == [GATEWAY]
    cm = env.config_map()
    assert cm is not None
    wait_for(env.checksum_annotation, "the checksum annotation on the Deployment")
    assert env.checksum_annotation() == expected_checksum(cm)
    assert GATEWAY["location"].split(str(PLUGIN_PORT), 1)[1] in plugin_server.requests
    env.wait_idle()
    before = env.resource_versions("rollouts")
    deployment = env.deployment()

    def untouched() -> None:
        env.wait_idle()
        now = env.resource_versions("rollouts")
        assert now["configmap"] == before["configmap"], "the ConfigMap was written"
        assert now["deployment"] == before["deployment"], "the Deployment was written"
        assert env.deployment()["spec"]["template"] == deployment["spec"]["template"]

    # Wrong digest: nothing but the condition is written.
    wrong = "f" * 64
    metric = {"name": "argoproj-labs/sample-metric", "location": metric_url}
    env.apply_rm("rollouts", {"trafficManagement": [GATEWAY],
                              "metric": [{**metric, "sha256": wrong}]})
    cond = wait_condition(env, "rollouts", "DigestMismatch")
    assert cond["status"] == "False"
    assert f"has sha256 {metric_digest}, expected {wrong}" in cond["message"]
    assert cond["message"].startswith("spec.plugins.metric[0].sha256: ")
    assert env.events("rollouts", type="Warning", reason="DigestMismatch")
    untouched()

    # The server is down: the download fails, still nothing written.
    plugin_server.stop()
    try:
        moved = {**metric, "location": plugin_server.url(f"/{env.ns}/metric-plugin-v3"),
                 "sha256": metric_digest}
        env.apply_rm("rollouts", {"trafficManagement": [GATEWAY], "metric": [moved]})
        cond = wait_condition(env, "rollouts", "DownloadFailed")
        assert cond["status"] == "False"
        assert "connection refused" in cond["message"]
        assert metric_digest in cond["message"]
        untouched()
    finally:
        plugin_server.start()

    # Fixed digest: proven, written, rolled.
    fixed = {**metric, "sha256": metric_digest}
    env.apply_rm("rollouts", {"trafficManagement": [GATEWAY], "metric": [fixed]})
    env.wait_synced("rollouts")
    assert env.entries(METRIC) == [fixed]
    assert env.entries(TRAFFIC) == [GATEWAY]
    wait_for(lambda: env.checksum_annotation() != deployment["spec"]["template"]["metadata"][
        "annotations"][ANNOTATION], "the Deployment to roll for the new plugin set")
    cm = env.config_map()
    assert cm is not None
    assert env.checksum_annotation() == expected_checksum(cm)


# --- the real Argo Rollouts controller loads what rollgate wrote ----------------------------

# The sample plugin reads its settings from the metric's plugin entry under this exact
# name (argo-rollouts test/cmd/metrics-plugin-sample), so it must be registered so too.
SAMPLE_PLUGIN = "argoproj/sample-prometheus"
QUERY = 'sum(rate(http_requests_total{job="checkout",code!~"5.."}[5m]))'
# Argo Rollouts v1.9.1 (utils/plugin/downloader.go, controller/controller.go): a digest
# mismatch after the download ends the process at start.
FATAL = "level=fatal"
MISMATCH = "does not match expected hash"


@dataclass(frozen=True)
class SamplePlugin:
    body: bytes
    digest: str


@pytest.fixture(scope="module")
def sample_plugin() -> SamplePlugin:
    """The real metrics-plugin-sample built by hack/k8s/build.sh, and its sha256."""
    try:
        binaries = rollouts.find_binaries()
    except rollouts.RolloutsBinariesMissing as err:
        pytest.fail(str(err), pytrace=False)
    body = binaries.metrics_plugin_sample.read_bytes()
    return SamplePlugin(body=body, digest=sha256(body))


@pytest.fixture
def start_rollouts(
    control_plane: controlplane.ControlPlane,
    plugin_server: PluginServer,
    tmp_path: Path,
) -> Iterator[Callable[[str], controlplane.ManagedProcess]]:
    """Start the real controller namespaced to a namespace (not waited for), as
    argo-rollouts-manager runs one per namespace; stopped when the test ends.

    Its work directory (where ``plugin-bin/`` goes) is this test's. It trusts the plugin
    server's CA through ``SSL_CERT_FILE``: Go's default client, which Argo Rollouts
    downloads with, reads the trusted CAs from there.
    """
    started: list[controlplane.ManagedProcess] = []

    def start(namespace: str) -> controlplane.ManagedProcess:
        proc = rollouts.start_controller(
            control_plane.kubeconfig,
            tmp_path / "rollouts",
            log_path=tmp_path / "rollouts-controller.log",
            namespace=namespace,
            base_env={**os.environ, "SSL_CERT_FILE": str(plugin_server.ca_file)},
        )
        started.append(proc)
        return proc

    try:
        yield start
    finally:
        for proc in started:
            proc.stop()


def test_the_real_controller_loads_the_plugin_rollgate_wrote(
    env: Env,
    plugin_server: PluginServer,
    sample_plugin: SamplePlugin,
    start_rollouts: Callable[[str], controlplane.ManagedProcess],
    tmp_path: Path,
) -> None:
    """Sync mode: rollgate proves the https plugin's sha256, writes the ConfigMap and
    rolls the Deployment; Argo Rollouts, (re)started after that, downloads the same bytes,
    accepts the digest, and a run measured by the plugin succeeds."""
    path = f"/{env.ns}/metrics-plugin-sample"
    plugin = {"name": SAMPLE_PLUGIN, "location": plugin_server.serve(path, sample_plugin.body),
              "sha256": sample_plugin.digest}
    env.apply_rm("rollouts", {"metric": [plugin]})

    env.wait_synced("rollouts")
    assert env.entries(METRIC) == [plugin]
    cm = env.config_map()
    assert cm is not None
    wait_for(env.checksum_annotation, "the checksum annotation on the Deployment")
    assert env.checksum_annotation() == expected_checksum(cm)
    preflight = plugin_server.requests.count(path)
    assert preflight >= 1, "rollgate downloaded the plugin before writing it"

    # The Deployment rolled: what a kubelet would now do is what the harness does,
    # start Argo Rollouts, which reads the ConfigMap once, at start.
    proc = start_rollouts(env.ns)
    proc.wait_ready(180)
    assert plugin_server.requests.count(path) > preflight, "Argo Rollouts downloaded it too"
    log = proc.log_path.read_text(errors="replace")
    assert f"Downloading plugin {SAMPLE_PLUGIN} from: {plugin['location']}" in log
    assert MISMATCH not in log
    installed = tmp_path / "rollouts" / "plugin-bin" / "argoproj" / "sample-prometheus"
    assert sha256(installed.read_bytes()) == sample_plugin.digest

    with PrometheusStub(value="0.99") as prometheus:
        env.kubectl("create", "-f", "-", input=json.dumps({
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "AnalysisRun",
            "metadata": {"name": "plugin", "namespace": env.ns},
            "spec": {"metrics": [{
                "name": "success-rate",
                "successCondition": "result >= 0.95",
                "provider": {"plugin": {SAMPLE_PLUGIN: {"address": prometheus.url,
                                                        "query": QUERY}}},
            }]},
        }))

        def finished() -> dict[str, Any] | None:
            assert proc.alive(), f"Argo Rollouts exited:\n{proc.log_tail()}"
            run = env.get("analysisrun", "plugin") or {}
            phase = (run.get("status") or {}).get("phase")
            return run if phase in ("Successful", "Failed", "Error", "Inconclusive") else None

        run = wait_for(finished, "the AnalysisRun to finish", deadline=120)

    assert run["status"]["phase"] == "Successful", run["status"]
    result = run["status"]["metricResults"][0]
    assert result["phase"] == "Successful"
    assert result["measurements"][0]["value"] == "0.99"
    # Asked of the plugin over RPC (GetMetadata) and stored by the controller.
    assert result["metadata"] == {"ResolvedPrometheusQuery": QUERY}
    # The plugin process, not the controller, asked our Prometheus.
    assert QUERY in prometheus.queries


def test_the_real_controller_exits_on_a_wrong_digest_written_by_hand(
    control_plane: controlplane.ControlPlane,
    namespace: str,
    plugin_server: PluginServer,
    sample_plugin: SamplePlugin,
    start_rollouts: Callable[[str], controlplane.ManagedProcess],
) -> None:
    """What the pre-flight is for: a well-formed sha256 of another binary, written to the
    ConfigMap without rollgate, stops Argo Rollouts at start; it never runs analysis."""
    path = f"/{namespace}/metrics-plugin-sample"
    wrong = sha256(GATEWAY_BINARY)  # a real digest, of the wrong file
    entry = {"name": SAMPLE_PLUGIN, "location": plugin_server.serve(path, sample_plugin.body),
             "sha256": wrong}
    control_plane.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": CM},
        "data": {METRIC: yaml.safe_dump([entry])},
    }))

    proc = start_rollouts(namespace)
    try:
        code = proc.popen.wait(timeout=180)
    except subprocess.TimeoutExpired:
        pytest.fail(f"Argo Rollouts still runs with a wrong digest:\n{proc.log_tail()}")

    log = proc.log_path.read_text(errors="replace")
    assert code != 0, log
    fatal = [line for line in log.splitlines() if FATAL in line]
    assert len(fatal) == 1, log
    assert "Failed to download plugins" in fatal[0] and MISMATCH in fatal[0], fatal
    # It did download the real bytes: the digest it computed is the binary's.
    assert f"expected sha256: {wrong}, actual sha256: {sample_plugin.digest}" in log
    assert plugin_server.requests.count(path) == 1
    assert rollouts.READY_LOG_LINE.pattern.decode() not in log


# --- audit: next to argo-rollouts-manager -----------------------------------------------------

# argo-rollouts-manager v0.0.9 (controllers/default.go, configmap.go): this entry is in
# every rendering, and the rendering is gopkg.in/yaml.v2 of {name, location, sha256}
# sorted by name, sha256 of traffic router plugins dropped, empty lists as "[]".
# --- least privilege ------------------------------------------------------------------------


def test_reconciler_may_write_only_the_objects_it_manages(
    control_plane: controlplane.ControlPlane, namespace: str
) -> None:
    """The plugins controller's RBAC names its ConfigMap and Deployment.

    Asked as the reconciler's ServiceAccount; the rules are the union of every role bound
    to it, so this also proves no other role of the reconciler grants more.
    """
    sa = control_plane.serviceaccount_kubeconfig("rollgate-system", "rollgate-reconciler")

    def can_i(verb: str, what: str, *, ns: str = namespace) -> bool:
        out = control_plane.kubectl("auth", "can-i", verb, what, "-n", ns,
                                    kubeconfig=sa, check=False)
        return out.stdout.strip() == "yes"

    assert can_i("patch", f"configmap/{CM}")
    assert can_i("patch", "deployment/argo-rollouts")
    assert not can_i("patch", "configmap/other")
    assert not can_i("get", "configmap/other")
    assert not can_i("create", "configmaps")  # an unnamed create could make any ConfigMap
    assert not can_i("list", "configmaps")  # only with a metadata.name field selector
    assert not can_i("patch", "deployment/other")
    assert not can_i("list", "deployments")
    assert not can_i("patch", "configmap/aws-auth", ns="kube-system")
    assert not can_i("update", "rolloutmanagers/status")
