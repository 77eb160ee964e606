"""rollgate next to the real argo-rollouts-manager v0.0.9 (docs/plugins.md,
"RolloutManager plugins").

The real operator renders ``spec.plugins`` into ``argo-rollouts-config`` and creates the
``argo-rollouts`` Deployment it controls; rollgate's reconciler in the default
``--plugins-mode=auto`` must then audit: write nothing to the ConfigMap, the Deployment
or the RolloutManager's status, and report every difference between what the operator
really rendered and the spec as a Warning event and a metric. Remote plugins are served
over HTTPS from 127.0.0.1 with a CA the test made, so the digest pre-flight downloads
real bytes.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from harness.host_rollgate import HostRollgate
from harness.kits.kargo import ROLLGATE_MANAGERS, writers
from harness.plane import ControlPlane
from harness.process import ManagedProcess
from harness.upstream import operator as rollouts_manager
from harness.upstream import trees
from testkit import objects
from testkit.plugin_server import PluginServer, elf_stand_in, sha256
from testkit.waits import wait_for

CM = "argo-rollouts-config"
TRAFFIC = "trafficRouterPlugins"
METRIC = "metricProviderPlugins"
OPENSHIFT = "argoproj-labs/openshift"
GATEWAY_BINARY = elf_stand_in("stand-in for gatewayapi-plugin-linux-amd64")
METRIC_BINARY = elf_stand_in("stand-in for a metric plugin")
PROMETHEUS = {"name": "argoproj-labs/sample-prometheus", "location": "file:///plugins/prom"}


@pytest.fixture(scope="module")
def plugin_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PluginServer]:
    server = PluginServer(tmp_path_factory.mktemp("operator-plugins"))
    server.serve("/gatewayapi-plugin-linux-amd64", GATEWAY_BINARY)
    server.serve("/metric-plugin-linux-amd64", METRIC_BINARY)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def operator(control_plane: ControlPlane) -> Iterator[ManagedProcess]:
    try:
        proc = rollouts_manager.start(control_plane)
    except trees.UpstreamMissing as err:
        pytest.fail(str(err), pytrace=False)
    yield proc
    control_plane.stop_process(proc)


@pytest.fixture(scope="module")
def reconciler(control_plane: ControlPlane, plugin_server: PluginServer,
               operator: Any, rollgate: HostRollgate) -> Iterator[ManagedProcess]:
    proc = rollgate.start_reconciler(
        "--controllers", "rollout-plugins", "--no-leader-elect", "--workers", "1",
        "--plugins-ca-file", str(plugin_server.ca_file), name="reconciler-operator")
    try:
        proc.wait_ready(60)
        yield proc
    finally:
        control_plane.stop_process(proc)


def manager(name: str, namespace: str, plugins: dict[str, Any]) -> dict[str, Any]:
    """A namespace-scoped RolloutManager (the operator runs with
    NAMESPACE_SCOPED_ARGO_ROLLOUTS=true); its default image is v1.9.0, rollgate targets
    v1.9.1."""
    rm = objects.rollout_manager(name, namespace=namespace, plugins=plugins)
    rm["spec"].update({"namespaceScoped": True, "version": "v1.9.1"})
    return rm


class Env:
    def __init__(self, plane: ControlPlane, reconciler: ManagedProcess,
                 namespace: str, plugins: PluginServer) -> None:
        self.plane, self.reconciler, self.ns, self.plugins = plane, reconciler, namespace, plugins
        self.gateway = {"name": "argoproj-labs/gatewayAPI",
                        "location": plugins.url("/gatewayapi-plugin-linux-amd64"),
                        "sha256": sha256(GATEWAY_BINARY)}
        self.remote_metric = {"name": "argoproj-labs/remote-metric",
                              "location": plugins.url("/metric-plugin-linux-amd64"),
                              "sha256": sha256(METRIC_BINARY)}

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> Any:
        return self.plane.kubectl(*args, "-n", self.ns, input=input, check=check)

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        out = self.kubectl("get", kind, name, "-o", "json", "--ignore-not-found",
                           "--show-managed-fields")
        return json.loads(out.stdout) if out.stdout.strip() else None

    def apply_rm(self, name: str, plugins: dict[str, Any]) -> None:
        self.kubectl("apply", "-f", "-", input=json.dumps(manager(name, self.ns, plugins)))

    def entries(self, key: str) -> list[dict[str, Any]] | None:
        cm = self.get("configmap", CM) or {}
        raw = (cm.get("data") or {}).get(key)
        return None if raw is None else yaml.safe_load(raw)

    def rendered(self, name: str) -> dict[str, Any] | None:
        """The operator's rendering of ``name``, once it is there."""
        for key in (TRAFFIC, METRIC):
            for entry in self.entries(key) or []:
                if entry.get("name") == name:
                    return entry
        return None

    def events(self, rm: str, reason: str) -> list[dict[str, Any]]:
        out = self.kubectl("get", "events", "-o", "json", "--field-selector",
                           f"involvedObject.name={rm},type=Warning,reason={reason}")
        items: list[dict[str, Any]] = json.loads(out.stdout)["items"]
        return items

    def metric(self, name: str, **labels: str) -> float | None:
        with urllib.request.urlopen(self.reconciler.url + "/metrics", timeout=5) as resp:
            text = resp.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == name and all(sample.labels.get(k) == v
                                               for k, v in labels.items()):
                    return sample.value
        return None

    def conditions(self, rm: str) -> list[dict[str, Any]]:
        return ((self.get("rolloutmanager", rm) or {}).get("status") or {}).get(
            "conditions") or []

    def rollgate_managers(self, rm: str) -> dict[str, set[str]]:
        """Field managers of rollgate's on what the operator owns."""
        found = {}
        for kind, name in (("configmap", CM), ("deployment", "argo-rollouts"),
                           ("rolloutmanager", rm)):
            mine = {w for w in writers(self.get(kind, name) or {})
                    if w.startswith(ROLLGATE_MANAGERS)}
            if mine:
                found[kind] = mine
        return found

    def versions(self, rm: str) -> dict[str, str]:
        """resourceVersion of the ConfigMap, the Deployment and the RolloutManager."""
        return {kind: ((self.get(kind, name) or {}).get("metadata") or {}).get(
            "resourceVersion", "") for kind, name in (
            ("configmap", CM), ("deployment", "argo-rollouts"), ("rolloutmanager", rm))}

    def wait_operator(self, rm: str) -> dict[str, Any]:
        """Until the operator has created its Deployment, controlled by ``rm``."""
        def owned() -> dict[str, Any] | None:
            dep = self.get("deployment", "argo-rollouts")
            refs = (dep or {}).get("metadata", {}).get("ownerReferences") or []
            return dep if any(r.get("kind") == "RolloutManager" and r.get("controller")
                              and r.get("name") == rm for r in refs) else None
        return wait_for("the operator's argo-rollouts Deployment", owned)


@pytest.fixture
def env(control_plane: ControlPlane, reconciler: ManagedProcess,
        namespace: str, plugin_server: PluginServer) -> Env:
    return Env(control_plane, reconciler, namespace, plugin_server)


def test_audit_reports_what_the_operator_really_rendered(env: Env) -> None:
    env.apply_rm("rollouts", {"trafficManagement": [env.gateway], "metric": [PROMETHEUS]})
    env.wait_operator("rollouts")
    wait_for("the operator's rendering", lambda: env.rendered(env.gateway["name"]))
    # What the operator did: traffic sha256 dropped, its own openshift entry added.
    assert not (env.rendered(env.gateway["name"]) or {}).get("sha256")
    assert env.rendered(OPENSHIFT) is not None

    dropped = wait_for("a Warning about the traffic digest the operator dropped",
                       lambda: env.events("rollouts", "PluginDigestDropped"))
    assert "spec.plugins.trafficManagement[0].sha256" in dropped[0]["message"]
    assert env.gateway["sha256"] in dropped[0]["message"]
    assert env.metric("rollgate_plugins_mode", namespace=env.ns, mode="audit") == 1
    assert env.metric("rollgate_plugins_audit_findings", namespace=env.ns,
                      finding="digest-dropped") == 1
    # The operator's own openshift entry is not the user's difference.
    assert env.events("rollouts", "PluginUnlisted") == []
    # Nothing of rollgate's on what the operator owns, and no condition of rollgate's.
    before = env.versions("rollouts")
    time.sleep(10)
    assert env.versions("rollouts") == before
    assert env.rollgate_managers("rollouts") == {}
    assert all(c.get("type") != "PluginsSynced" for c in env.conditions("rollouts"))
    assert len(env.events("rollouts", "PluginDigestDropped")) == 1, (
        "a finding is reported once, not on every pass")


def test_hand_edits_of_the_operators_rendering_are_reported(env: Env) -> None:
    env.apply_rm("rollouts", {"metric": [PROMETHEUS]})
    env.wait_operator("rollouts")
    wait_for("the operator's rendering", lambda: env.rendered(PROMETHEUS["name"]))
    cm = env.get("configmap", CM) or {}
    data = dict(cm["data"])
    metric_entries = yaml.safe_load(data[METRIC])
    metric_entries[0]["location"] = "file:///plugins/elsewhere"
    metric_entries.append({"name": "someone/unlisted", "location": "file:///plugins/x"})
    env.kubectl("patch", "configmap", CM, "--type=merge", "-p",
                json.dumps({"data": {METRIC: yaml.safe_dump(metric_entries)}}))
    differs = wait_for("a Warning about the location that differs",
                       lambda: env.events("rollouts", "PluginLocationDiffers"))
    assert "file:///plugins/elsewhere" in differs[0]["message"]
    unlisted = wait_for("a Warning about the unlisted entry",
                        lambda: env.events("rollouts", "PluginUnlisted"))
    assert "someone/unlisted" in unlisted[0]["message"]
    assert env.rollgate_managers("rollouts") == {}


def test_a_wrong_metric_digest_is_found_before_argo_rollouts_would_exit(env: Env) -> None:
    wrong = {**env.remote_metric, "sha256": "0" * 64}
    env.apply_rm("rollouts", {"metric": [wrong]})
    env.wait_operator("rollouts")
    wait_for("the operator's rendering", lambda: env.rendered(wrong["name"]))
    mismatch = wait_for("a Warning about the digest mismatch",
                        lambda: env.events("rollouts", "DigestMismatch"))
    assert sha256(METRIC_BINARY) in mismatch[0]["message"]
    assert "0" * 64 in mismatch[0]["message"]
    assert env.rollgate_managers("rollouts") == {}


def test_a_refused_openshift_entry_keeps_the_previous_rendering(env: Env) -> None:
    env.apply_rm("rollouts", {"metric": [PROMETHEUS]})
    env.wait_operator("rollouts")
    wait_for("the operator's first rendering", lambda: env.rendered(PROMETHEUS["name"]))
    before = env.get("configmap", CM) or {}
    # rollgate's webhook only warns (without the operator the name is legitimate).
    out = env.kubectl("apply", "-f", "-", input=json.dumps(manager("rollouts", env.ns, {
        "metric": [PROMETHEUS],
        "trafficManagement": [{"name": OPENSHIFT, "location": "file:///plugins/os"}]})))
    assert "spec.plugins.trafficManagement[0].name: argo-rollouts-manager refuses" in out.stderr
    assert "an edited one keeps its previous plugins" in out.stderr
    refused = wait_for("a Warning that the operator refuses the openshift entry",
                       lambda: env.events("rollouts", "PluginRefusedByOperator"))
    assert "spec.plugins.trafficManagement[0]" in refused[0]["message"]
    assert "keeps what it held before" in refused[0]["message"]
    time.sleep(3)
    after = env.get("configmap", CM) or {}
    assert after["data"] == before["data"], "the operator kept its previous rendering"
    openshift = env.rendered(OPENSHIFT)
    assert openshift is not None and openshift["location"] != "file:///plugins/os"
    assert env.rollgate_managers("rollouts") == {}


def test_a_metric_plugin_with_the_operators_own_name_is_warned_and_collides(env: Env) -> None:
    # The operator refuses argoproj-labs/openshift only among traffic plugins; as a metric
    # plugin it renders it next to its own traffic entry of the same name, which Argo
    # Rollouts stores at the same plugin-bin/ path. rollgate warns on the name at submit.
    out = env.kubectl("apply", "-f", "-", input=json.dumps(manager("rollouts", env.ns, {
        "metric": [{"name": OPENSHIFT, "location": "file:///plugins/osm"}]})))
    assert "spec.plugins.metric[0].name: argo-rollouts-manager always adds" in out.stderr
    env.wait_operator("rollouts")
    metric = wait_for("the operator's metric rendering", lambda: env.entries(METRIC))
    traffic = env.entries(TRAFFIC) or []
    assert [e["name"] for e in metric] == [OPENSHIFT]
    assert metric[0]["location"] == "file:///plugins/osm"
    assert [e["name"] for e in traffic] == [OPENSHIFT]
    assert traffic[0]["location"] != "file:///plugins/osm"


def test_an_earlier_rollgates_condition_is_removed_once(
        control_plane: ControlPlane, env: Env) -> None:
    env.apply_rm("rollouts", {"metric": [PROMETHEUS]})
    env.wait_operator("rollouts")
    wait_for("the operator's rendering", lambda: env.rendered(PROMETHEUS["name"]))
    # What an earlier rollgate left: a PluginsSynced condition next to the operator's own.
    rm = env.get("rolloutmanager", "rollouts") or {}
    conditions = [c for c in (rm.get("status") or {}).get("conditions") or []
                  if c.get("type") != "PluginsSynced"]
    stale = {"type": "PluginsSynced", "status": "Unknown", "reason": "WaitingForDeployment",
             "message": "left by an earlier rollgate", "observedGeneration": 1,
             "lastTransitionTime": "2026-01-01T00:00:00Z"}
    env.kubectl("patch", "rolloutmanager", "rollouts", "--subresource=status",
                "--type=merge", "-p", json.dumps({"status": {"conditions": [
                    *conditions, stale]}}))
    wait_for("rollgate to remove its old condition",
             lambda: all(c.get("type") != "PluginsSynced" for c in env.conditions("rollouts")))
    assert [c["type"] for c in env.conditions("rollouts")] == [c["type"] for c in conditions]
