"""RolloutManager plugins on a real control plane.

The reconciler runs as ``python -m reconciler --controllers rollout-plugins`` under the
ServiceAccount and RBAC from ``manifests/``, in the default ``--plugins-mode=auto``;
everything is driven and checked with kubectl, the way a user would. A stand-in
``argo-rollouts`` Deployment plays the Argo Rollouts controller: no pod needs to run, its
pod template is what tells whether the controller would be restarted. Remote plugins are
served over HTTPS from 127.0.0.1 with a CA the test made (``--plugins-ca-file``), so the
digest pre-flight downloads real bytes over verified TLS. Argo Rollouts pods that
download, check and load what rollgate wrote are tests/node/test_plugins.py's.

Waits poll the API up to a generous deadline; no test asserts how fast something happens.
"""

from __future__ import annotations

import hashlib
import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from harness.plane import ControlPlane
from harness.process import ManagedProcess, free_port
from testkit import objects
from testkit.plugin_server import PluginServer, elf_stand_in, sha256
from testkit.waits import wait_for

CM = "argo-rollouts-config"
TRAFFIC = "trafficRouterPlugins"
METRIC = "metricProviderPlugins"
ANNOTATION = "rollgate.dev/plugins-checksum"

# The plugin server's port is fixed when the module loads so the plugin entries below can
# be constants; the server (module fixture) binds it.
PLUGIN_PORT = free_port()
GATEWAY_BINARY = elf_stand_in("stand-in for gatewayapi-plugin-linux-amd64", copies=4096)
METRIC_BINARY = elf_stand_in("stand-in for a metric plugin", copies=4096)
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
    control_plane: ControlPlane, plugin_server: PluginServer, rollgate) -> Iterator[ManagedProcess]:
    """One reconciler for the module, only the plugins controller, one worker.

    No leader election: nothing else in these tests competes for the Lease, and a
    standby replica left over from another module must not keep this one idle. It
    trusts the plugin server's CA on top of the system CAs.
    """
    proc = rollgate.start_reconciler(
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
    control_plane: ControlPlane,
    reconciler: ManagedProcess,
    namespace: str,
) -> Env:
    env = Env(control_plane, reconciler, namespace)
    env.create_rollouts_deployment()
    return env


class Env:
    """kubectl-level helpers for one test namespace."""

    def __init__(
        self,
        plane: ControlPlane,
        reconciler: ManagedProcess,
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
        deployment = objects.deployment(image="example.invalid/argo-rollouts:stand-in")
        deployment["spec"]["strategy"] = {"type": "RollingUpdate",
                                          "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
        self.apply(deployment)

    def create_config_map(self, data: dict[str, str]) -> None:
        self.apply(objects.config_map(CM, data=data, labels=OTHER_LABELS))

    def apply_rm(self, name: str, plugins: Any, *, labels: dict[str, str] | None = None) -> None:
        manager = objects.rollout_manager(name, plugins=plugins)
        if labels:
            manager["metadata"]["labels"] = labels
        self.apply(manager)

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
        conds: list[dict[str, Any]] = (obj.get("status") or {}).get("conditions") or []
        for cond in conds:
            if cond.get("type") == "PluginsSynced":
                return cond
        return None

    def events(self, rm: str, *, type: str, reason: str | None = None) -> list[dict[str, Any]]:
        selector = f"involvedObject.name={rm},type={type}"
        if reason:
            selector += f",reason={reason}"
        out = self.kubectl("get", "events", "-o", "json", "--field-selector", selector)
        items: list[dict[str, Any]] = json.loads(out.stdout)["items"]
        return items

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
        wait_for("the plugins controller to go idle", idle, interval=0.5)
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
        return wait_for(f"PluginsSynced=True on RolloutManager {rm}", synced)


def expected_checksum(cm: dict[str, Any]) -> str:
    """docs/plugins.md, "RolloutManager plugins": sha256 of the rendered keys as JSON with
    sorted keys."""
    data = {k: v for k, v in (cm.get("data") or {}).items() if k in (TRAFFIC, METRIC)}
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def sync_both(env: Env, name: str = "rollouts") -> None:
    env.apply_rm(name, {"trafficManagement": [GATEWAY], "metric": [PROMETHEUS]})
    env.wait_synced(name)
    wait_for("metric plugins in the ConfigMap", lambda: env.entries(METRIC) == [PROMETHEUS])


# --- tests ------------------------------------------------------------------------------------


def test_plugins_are_written_and_other_keys_are_kept(env: Env) -> None:
    env.create_config_map(OTHER_DATA)
    env.apply_rm("rollouts", {"trafficManagement": [GATEWAY], "metric": [PROMETHEUS]})

    wait_for("both plugin keys", lambda: env.entries(TRAFFIC) and env.entries(METRIC))
    assert env.entries(TRAFFIC) == [GATEWAY]
    assert env.entries(METRIC) == [PROMETHEUS]  # no sha256 given: none rendered
    cm = env.config_map()
    assert cm is not None
    assert {k: v for k, v in cm["data"].items() if k not in (TRAFFIC, METRIC)} == OTHER_DATA
    assert cm["metadata"]["labels"] == OTHER_LABELS

    cond = env.wait_synced("rollouts")
    assert cond["reason"]
    wait_for("the checksum annotation on the Deployment", env.checksum_annotation)
    assert env.checksum_annotation() == expected_checksum(cm)


def test_location_change_updates_the_key_and_restarts_once(env: Env) -> None:
    sync_both(env)
    wait_for("the checksum annotation on the Deployment", env.checksum_annotation)
    before = env.checksum_annotation()
    generation = env.deployment()["metadata"]["generation"]

    moved = {**PROMETHEUS, "location": "file:///plugins/prom-v2"}
    env.apply_rm("rollouts", {"trafficManagement": [GATEWAY], "metric": [moved]})

    wait_for("the new location in the ConfigMap", lambda: env.entries(METRIC) == [moved])
    assert env.entries(TRAFFIC) == [GATEWAY]
    wait_for("a new checksum annotation", lambda: env.checksum_annotation() != before)
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
    wait_for("the checksum annotation on the Deployment", env.checksum_annotation)
    before = env.wait_idle()
    cm_version = env.config_map()["metadata"]["resourceVersion"]  # type: ignore[index]
    deployment = env.deployment()

    env.kubectl("label", "rolloutmanager", "rollouts", "tier=gold")
    wait_for("the reconciler to process the label change", lambda: env.reconciles()[0] > before)
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
    wait_for("metricProviderPlugins to go", lambda: env.entries(METRIC) is None)
    assert env.entries(TRAFFIC) == [GATEWAY]

    env.apply_rm("rollouts", None)
    wait_for("trafficRouterPlugins to go", lambda: env.entries(TRAFFIC) is None)
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
        "the hand edit of metricProviderPlugins to be reverted",
        lambda: (env.config_map() or {}).get("data", {}).get(METRIC) == rendered,
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

    wait_for("the spec's traffic router plugins", lambda: env.entries(TRAFFIC) == [GATEWAY])
    assert env.entries(METRIC) == [PROMETHEUS]
    warnings = wait_for(
        "a Warning event naming the replaced entries",
        lambda: [e for e in env.events("rollouts", type="Warning")
                 if "hand/made-router" in e["message"]],
    )
    assert "hand/made-metric" in warnings[0]["message"]
    assert "argoproj-labs/sample-prometheus" not in warnings[0]["message"]
    assert env.config_map()["data"]["metricProviders"] == OTHER_DATA["metricProviders"]  # type: ignore[index]


def test_invalid_rollout_manager_stored_without_webhook_writes_nothing(
    env: Env, control_plane: ControlPlane, rollgate) -> None:
    env.create_config_map(OTHER_DATA)
    bad = {**PROMETHEUS, "sha256": "b" * 40}
    rollgate.unregister_webhooks()
    try:
        env.apply_rm("rollouts", {"trafficManagement": [GATEWAY], "metric": [bad]})
    finally:
        rollgate.register_webhooks()

    cond = wait_for(
        "PluginsSynced=False",
        lambda: (c := env.condition("rollouts")) and c["status"] == "False" and c,
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
        "the clock to pass the first creation second",
        lambda: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) > created,
    )
    other = {"name": "other/metric", "location": "file:///plugins/other"}
    env.apply_rm("second", {"metric": [other]})

    cond = wait_for(
        "PluginsSynced=False on the second RolloutManager",
        lambda: (c := env.condition("second")) and c["status"] == "False" and c,
    )
    assert "first" in cond["message"]
    env.wait_idle()
    assert env.entries(METRIC) == [PROMETHEUS]
    assert env.entries(TRAFFIC) == [GATEWAY]
    assert env.condition("first")["status"] == "True"  # type: ignore[index]

    # The owner goes: the next oldest takes over.
    env.kubectl("delete", "rolloutmanager", "first")
    wait_for("the second RolloutManager's plugins", lambda: env.entries(METRIC) == [other])
    wait_for("the first one's traffic plugins to go", lambda: env.entries(TRAFFIC) is None)
    env.wait_synced("second")


def test_deleting_the_rollout_manager_removes_the_keys_and_keeps_the_config_map(
    env: Env,
) -> None:
    env.create_config_map(OTHER_DATA)
    sync_both(env)

    env.kubectl("delete", "rolloutmanager", "rollouts")

    wait_for(
        "the plugin keys to be removed",
        lambda: not {TRAFFIC, METRIC} & set((env.config_map() or {}).get("data") or {}),
    )
    cm = env.config_map()
    assert cm is not None
    assert cm["data"] == OTHER_DATA
    assert cm["metadata"]["labels"] == OTHER_LABELS


def wait_waiting(env: Env, rm: str) -> None:
    """Wait until the reconciler has seen ``rm`` and waits for the Deployment; then check
    that it wrote nothing at all: no ConfigMap, no condition, not one status write."""
    wait_for("the namespace to wait for its argo-rollouts Deployment",
             lambda: env.metric("rollgate_plugins_mode", namespace=env.ns, mode="waiting"))
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
    wait_for("the checksum annotation on the new Deployment", env.checksum_annotation)


# --- another manager co-owning a plugin key ---------------------------------------------------

# The field manager argo-rollouts-manager (the operator) uses; any other name would do.
CO_OWNER = "argo-rollouts-manager"


def co_own(env: Env, key: str) -> None:
    """Server-side apply the key's current value as a second field manager.

    Same value, so no conflict: the key is then owned by rollgate and CO_OWNER both, and
    an apply by rollgate without the key only gives up rollgate's share of it.
    """
    value = env.config_map()["data"][key]  # type: ignore[index]
    body = objects.config_map(CM, namespace=env.ns, data={key: value})
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
    env.kubectl("create", "-f", "-", input=json.dumps(
        objects.config_map(CM, data=data, labels=OTHER_LABELS)))


def test_dropping_a_co_owned_key_from_the_spec_removes_it(env: Env) -> None:
    create_config_map_without_apply(env, OTHER_DATA)
    sync_both(env)
    co_own(env, METRIC)

    env.apply_rm("rollouts", {"trafficManagement": [GATEWAY], "metric": []})

    wait_for("the co-owned metricProviderPlugins to go", lambda: env.entries(METRIC) is None)
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
    wait_for("the checksum annotation on the Deployment", env.checksum_annotation)
    co_own(env, METRIC)
    before = env.wait_idle()

    env.kubectl("delete", "rolloutmanager", "rollouts")

    wait_for("the reconciler to process the delete", lambda: env.reconciles()[0] > before)
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
    return wait_for(f"PluginsSynced reason {reason} on RolloutManager {rm}", probe)


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
    wait_for("the checksum annotation on the Deployment", env.checksum_annotation)
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
    before = deployment["spec"]["template"]["metadata"]["annotations"][ANNOTATION]
    wait_for("the Deployment to roll for the new plugin set",
             lambda: env.checksum_annotation() != before)
    cm = env.config_map()
    assert cm is not None
    assert env.checksum_annotation() == expected_checksum(cm)


# --- audit: next to argo-rollouts-manager -----------------------------------------------------

# argo-rollouts-manager v0.0.9 (controllers/default.go, configmap.go): this entry is in
# every rendering, and the rendering is gopkg.in/yaml.v2 of {name, location, sha256}
# sorted by name, sha256 of traffic router plugins dropped, empty lists as "[]".
# --- least privilege ------------------------------------------------------------------------


def test_reconciler_may_write_only_the_objects_it_manages(
    control_plane: ControlPlane, namespace: str
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
