"""The plugins controller per mode: what it writes (and does not) and what it reports.

Against the one fake API (support/testkit/fakeapi/), which records every write, with the
digest pre-flight's download injected: the e2e tests (tests/e2e/plugins/test_rollout_plugins.py)
run the same flows against a real kube-apiserver and a real HTTPS server; these pin the
decisions pass by pass ("a pass over an unchanged world writes nothing", "events once
per generation") where the e2e suite can only sample.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubekit.kinds import CONFIG_MAP, DEPLOYMENT, ROLLOUT_MANAGER
from reconciler.plugins.controller import RolloutPluginsController
from reconciler.plugins.digests import DigestVerifier, DownloadError
from reconciler.plugins.options import PluginsOptions
from reconciler.plugins.render import METRIC_KEY, TRAFFIC_KEY
from reconciler.runtime.health import Metrics
from reconciler.runtime.status import Conflict
from reconciler.runtime.types import Key, Requeue
from reconciler.runtime.watches import keys_for
from schemas.kinds import API_VERSION_ARGO
from testkit import objects
from testkit.fakeapi import Events, FakeApi, Interceptors, context, never

GOOD = "a1" * 32
OTHER = "b2" * 32
URL = "https://plugins.example.com/gatewayapi"
NS = "ns"


class Fetch:
    """The download, injected: location -> digest of what the server serves."""

    def __init__(self, served: dict[str, str]) -> None:
        self.served = served
        self.calls: list[str] = []

    def __call__(self, location: str) -> str:
        self.calls.append(location)
        if location not in self.served:
            raise DownloadError("connection refused")
        return self.served[location]


class World:
    def __init__(self, *, mode: str = "auto", served: dict[str, str] | None = None) -> None:
        self.fetch = Fetch({URL: GOOD} if served is None else served)
        self.controller = RolloutPluginsController(
            options=PluginsOptions(mode=mode), verifier=DigestVerifier(self.fetch))
        self.api = FakeApi(interceptors=Interceptors(
            create=never("the plugins controller creates nothing but by apply"),
            replace=never("the plugins controller never replaces"),
            delete=never("the plugins controller never deletes"),
            list=never("the plugins controller lists through its cache only"),
            watch=never("the plugins controller watches through the runtime only")))
        self.watched = tuple(w.resource for w in self.controller.watches)
        self.cache = self.api.cache(*self.watched)  # follows the API, as the watches do
        self.events = Events()
        self.serve_metrics()
        self.mode = mode

    def serve_metrics(self) -> None:
        """The runtime's metrics, serving the controller's collectors as the Manager does."""
        self.metrics = Metrics()
        self.metrics.register(self.controller.collectors)
        self.registry = self.metrics.registry

    def rm(self, plugins: dict[str, Any], *, name: str = "rollouts", uid: str = "u-1",
           generation: int = 1, created: str = "2026-01-01T00:00:01Z",
           conditions: list[dict[str, Any]] | None = None) -> None:
        obj = objects.rollout_manager(name, namespace=NS, uid=uid, generation=generation,
                                      creationTimestamp=created, spec={"plugins": plugins})
        if conditions is not None:
            obj["status"] = {"conditions": conditions}
        self.api.put(ROLLOUT_MANAGER, obj)

    def deployment(self, *, operator: bool = False, annotations: dict[str, str] | None = None
                   ) -> None:
        meta: dict[str, Any] = {"name": "argo-rollouts", "namespace": NS}
        if operator:
            meta["ownerReferences"] = [{"apiVersion": API_VERSION_ARGO,
                                        "kind": "RolloutManager", "name": "rollouts",
                                        "uid": "u-1", "controller": True}]
        self.api.put(DEPLOYMENT, {"metadata": meta, "spec": {"template": {
            "metadata": {"annotations": dict(annotations or {})}}}})

    def config_map(self, data: dict[str, str]) -> None:
        self.api.put(CONFIG_MAP, {"metadata": {"name": "argo-rollouts-config",
                                               "namespace": NS}, "data": data})

    def operator_status(self, name: str, conditions: list[dict[str, Any]]) -> None:
        """argo-rollouts-manager's Status().Update of the RolloutManager, not yet in the
        cache (``deliver`` brings it there)."""
        obj = self.api.get(ROLLOUT_MANAGER, NS, name)
        assert obj is not None
        obj["status"] = {"conditions": conditions}
        self.api.hold()
        self.api.put(ROLLOUT_MANAGER, obj)

    def deliver(self) -> None:
        self.api.deliver()

    def status_bodies(self) -> list[Any]:
        """The bodies of the status writes that succeeded, in order."""
        return [r.body for r in self.api.requests if r.verb == "patch" and r.error is None
                and r.options.get("subresource") == "status"]

    def reconcile(self, name: str = "rollouts") -> None:
        ctx = context(self.api, controller=self.controller, cache=self.cache,
                      events=self.events, metrics=self.metrics)
        self.controller.reconcile(Key(NS, name), ctx)

    def condition(self, name: str = "rollouts") -> dict[str, Any] | None:
        return next((c for c in self.conditions(name) if c["type"] == "PluginsSynced"), None)

    def conditions(self, name: str = "rollouts") -> list[dict[str, Any]]:
        obj = self.api.get(ROLLOUT_MANAGER, NS, name) or {}
        return list((obj.get("status") or {}).get("conditions") or [])

    def annotation(self) -> str | None:
        dep = self.api.get(DEPLOYMENT, NS, "argo-rollouts")
        return ((dep or {})["spec"]["template"]["metadata"].get("annotations") or {}).get(
            "rollgate.dev/plugins-checksum")

    def data(self) -> dict[str, str] | None:
        cm = self.api.get(CONFIG_MAP, NS, "argo-rollouts-config")
        return None if cm is None else dict(cm.get("data") or {})

    def sample(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)


GATEWAY = {"name": "argoproj-labs/gatewayAPI", "location": URL, "sha256": GOOD}
PROM = {"name": "argoproj-labs/sample-prometheus", "location": "file:///plugins/prom"}


# --- auto: no Deployment yet --------------------------------------------------------------


def test_auto_without_the_deployment_writes_nothing_at_all() -> None:
    """argo-rollouts-manager creates the Deployment after the RolloutManager: until then no
    write of any kind, status included (a condition then would outlive the wait)."""
    w = World()
    w.rm({"trafficManagement": [GATEWAY]})
    w.rm({"metric": [PROM]}, name="second", uid="u-2", created="2026-01-01T00:00:05Z")
    for name in ("rollouts", "second", "rollouts"):
        w.reconcile(name)
    assert w.api.writes() == [], "no ConfigMap, no Deployment, no status"
    assert w.condition() is None and w.condition("second") is None
    assert w.events.emitted == []
    assert w.data() is None
    assert w.fetch.calls == [], "nothing is about to be written: nothing to prove"
    assert w.sample("rollgate_plugins_mode", namespace=NS, mode="waiting") == 1


def test_the_deployment_is_watched_so_its_appearance_decides_the_namespace() -> None:
    w = World()
    w.rm({"trafficManagement": [GATEWAY]})
    w.deployment(operator=True)
    dep = w.api.get(w.controller.deployments, NS, "argo-rollouts")
    assert dep is not None
    assert keys_for(w.controller.watches, w.controller.deployments, None, dep,
                    w.cache) == {Key(NS, "rollouts")}


def test_a_deployment_controlled_by_a_rollout_manager_means_audit() -> None:
    w = World()
    w.rm({"trafficManagement": [GATEWAY], "metric": [PROM]})
    w.reconcile()
    # What the operator does next: render the ConfigMap, then create its Deployment.
    w.config_map({TRAFFIC_KEY: OPERATOR_TRAFFIC, METRIC_KEY: OPERATOR_METRIC})
    w.deployment(operator=True)
    w.reconcile()
    assert w.api.writes() == [], "audit: no condition was written before, none to remove"
    assert w.events.reasons() == ["PluginDigestDropped"]
    assert w.sample("rollgate_plugins_mode", namespace=NS, mode="audit") == 1
    assert w.sample("rollgate_plugins_mode", namespace=NS, mode="waiting") is None


def test_auto_with_a_deployment_no_rollout_manager_controls_syncs_as_before() -> None:
    w = World()
    w.rm({"trafficManagement": [GATEWAY], "metric": [PROM]})
    w.reconcile()
    assert w.api.writes() == []
    w.deployment()
    w.reconcile()
    assert w.api.writes() == ["patch configmaps/argo-rollouts-config",
                              "patch deployments/argo-rollouts",
                              "patch rolloutmanagers/rollouts/status"]
    assert (w.condition() or {}).get("reason") == "Synced"
    assert w.sample("rollgate_plugins_mode", namespace=NS, mode="sync") == 1


# --- sync ----------------------------------------------------------------------------------


def test_sync_proves_the_digest_then_writes_and_rolls_once() -> None:
    w = World()
    w.deployment()
    w.rm({"trafficManagement": [GATEWAY], "metric": [PROM]})
    w.reconcile()
    assert w.fetch.calls == [URL], "only the https entry with a digest is downloaded"
    assert w.api.writes() == ["patch configmaps/argo-rollouts-config",
                              "patch deployments/argo-rollouts",
                              "patch rolloutmanagers/rollouts/status"]
    assert set(w.data() or {}) == {TRAFFIC_KEY, METRIC_KEY}
    assert w.annotation()
    assert w.condition()["status"] == "True"  # type: ignore[index]
    assert w.sample("rollgate_plugins_preflight_checks_total",
                    result="verified", source="download") == 1

    w.reconcile()
    assert len(w.api.writes()) == 3, "a pass over an unchanged world writes nothing"
    assert w.fetch.calls == [URL]


def test_a_wrong_digest_leaves_config_map_and_deployment_alone() -> None:
    w = World(served={URL: OTHER})
    w.deployment()
    w.rm({"trafficManagement": [GATEWAY]})
    w.reconcile()
    assert w.api.writes() == ["patch rolloutmanagers/rollouts/status"]
    assert w.data() is None
    assert w.annotation() is None
    cond = w.condition()
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "DigestMismatch")
    assert f"has sha256 {OTHER}, expected {GOOD}" in cond["message"]
    assert cond["message"].startswith("spec.plugins.trafficManagement[0].sha256: ")
    assert w.events.reasons() == ["DigestMismatch"]

    w.reconcile()
    assert w.api.writes() == ["patch rolloutmanagers/rollouts/status"]
    assert w.events.reasons() == ["DigestMismatch"], "no second event for the same finding"
    assert len(w.fetch.calls) == 1, "the mismatch is remembered for a while"


def test_an_unchanged_synced_plugin_set_is_not_downloaded_again() -> None:
    """A restarted reconciler (empty digest cache) proves nothing that it will not write."""
    first = World()
    first.deployment()
    first.rm({"trafficManagement": [GATEWAY]})
    first.reconcile()
    restarted = RolloutPluginsController(verifier=DigestVerifier(first.fetch))
    first.controller = restarted
    first.serve_metrics()
    first.reconcile()
    assert first.fetch.calls == [URL]
    assert len(first.api.writes()) == 3


def test_a_failed_download_writes_nothing_and_retries() -> None:
    w = World(served={})
    w.deployment()
    w.rm({"trafficManagement": [GATEWAY]})
    with pytest.raises(Requeue):
        w.reconcile()
    cond = w.condition()
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "DownloadFailed")
    assert "connection refused" in cond["message"] and GOOD in cond["message"]
    assert w.api.writes() == ["patch rolloutmanagers/rollouts/status"]


def test_a_fixed_digest_syncs() -> None:
    w = World(served={URL: OTHER})
    w.deployment()
    w.rm({"trafficManagement": [GATEWAY]})
    w.reconcile()
    assert w.condition()["reason"] == "DigestMismatch"  # type: ignore[index]
    w.rm({"trafficManagement": [{**GATEWAY, "sha256": OTHER}]}, generation=2)
    w.reconcile()
    cond = w.condition()
    assert (cond["status"], cond["observedGeneration"]) == ("True", 2)  # type: ignore[index]
    assert OTHER in (w.data() or {})[TRAFFIC_KEY]


def test_explicit_sync_writes_without_the_deployment() -> None:
    w = World(mode="sync")
    w.rm({"metric": [PROM]})
    w.reconcile()
    assert w.api.writes() == ["patch configmaps/argo-rollouts-config",
                              "patch rolloutmanagers/rollouts/status"]


# --- audit: next to argo-rollouts-manager ---------------------------------------------------

OPERATOR_TRAFFIC = (
    f"- name: argoproj-labs/gatewayAPI\n  location: {URL}\n  sha256: \"\"\n"
    "- name: argoproj-labs/openshift\n  location: https://github.com/x/openshift\n"
    "  sha256: \"\"\n"
)
OPERATOR_METRIC = "- name: argoproj-labs/sample-prometheus\n  location: file:///plugins/prom\n" \
    "  sha256: \"\"\n"


def audit_world(**kwargs: Any) -> World:
    w = World(**kwargs)
    w.deployment(operator=True)
    w.config_map({TRAFFIC_KEY: OPERATOR_TRAFFIC, METRIC_KEY: OPERATOR_METRIC})
    w.rm({"trafficManagement": [GATEWAY], "metric": [PROM]})
    return w


def test_audit_writes_nothing_and_reports_the_dropped_digest_once() -> None:
    w = audit_world()
    before = {r: w.api.objects(r) for r in w.watched}
    w.reconcile()
    assert w.api.writes() == [], "audit writes nothing, not even status"
    assert w.condition() is None
    assert [(t, r) for t, r, _ in w.events.emitted] == [("Warning", "PluginDigestDropped")]
    assert "argo-rollouts-manager drops the sha256" in w.events.emitted[0][2]
    assert w.sample("rollgate_plugins_audit_findings", namespace=NS,
                    finding="digest-dropped") == 1
    assert w.sample("rollgate_plugins_mode", namespace=NS, mode="audit") == 1
    assert w.fetch.calls == [URL], "the pre-flight runs in audit mode too"

    for _ in range(3):
        w.reconcile()
    assert len(w.events.emitted) == 1, "no event on a pass that changes nothing"
    assert w.api.writes() == []
    assert w.fetch.calls == [URL], "verified once per generation"
    assert {r: w.api.objects(r) for r in w.watched} == before


def test_audit_reports_a_hand_edit_and_does_not_revert_it() -> None:
    w = audit_world()
    w.reconcile()
    w.config_map({TRAFFIC_KEY: OPERATOR_TRAFFIC, METRIC_KEY: "[]\n"})
    w.reconcile()
    assert w.events.reasons() == ["PluginDigestDropped", "PluginMissing"]
    assert w.data() == {TRAFFIC_KEY: OPERATOR_TRAFFIC, METRIC_KEY: "[]\n"}
    assert w.api.writes() == []
    assert w.sample("rollgate_plugins_audit_findings", namespace=NS, finding="missing") == 1


def test_audit_reports_again_for_a_new_generation() -> None:
    w = audit_world()
    w.reconcile()
    w.rm({"trafficManagement": [GATEWAY], "metric": [PROM]}, generation=2)
    w.reconcile()
    assert w.events.reasons() == ["PluginDigestDropped", "PluginDigestDropped"]


def test_audit_reports_a_failed_pre_flight_as_an_event_and_a_metric() -> None:
    w = audit_world(served={URL: OTHER})
    w.reconcile()
    assert w.api.writes() == []
    assert sorted(w.events.reasons()) == ["DigestMismatch", "PluginDigestDropped"]
    mismatch = next(m for _, r, m in w.events.emitted if r == "DigestMismatch")
    assert f"has sha256 {OTHER}, expected {GOOD}" in mismatch
    assert w.sample("rollgate_plugins_audit_findings", namespace=NS,
                    finding="digest-mismatch") == 1
    w.reconcile()
    assert len(w.events.emitted) == 2


def test_audit_of_an_edit_the_operator_refuses() -> None:
    """Valid first, then naming argoproj-labs/openshift: the operator errors before it
    writes, the ConfigMap keeps the earlier rendering; that is the one finding."""
    w = audit_world()
    w.reconcile()
    openshift = {"name": "argoproj-labs/openshift", "location": "file:///plugins/openshift"}
    w.rm({"trafficManagement": [GATEWAY, openshift], "metric": [PROM]}, generation=2)
    w.reconcile()
    assert w.api.writes() == []
    assert w.events.reasons() == ["PluginDigestDropped", "PluginRefusedByOperator"]
    assert "keeps what it held before" in w.events.emitted[-1][2]
    assert w.sample("rollgate_plugins_audit_findings", namespace=NS,
                    finding="operator-refuses") == 1
    assert w.sample("rollgate_plugins_audit_findings", namespace=NS,
                    finding="digest-dropped") is None


def test_metrics_of_a_namespace_go_with_its_last_rollout_manager() -> None:
    w = audit_world()
    w.reconcile()
    w.api.remove(ROLLOUT_MANAGER, NS, "rollouts")
    w.reconcile()
    assert w.sample("rollgate_plugins_audit_findings", namespace=NS,
                    finding="digest-dropped") is None
    assert w.sample("rollgate_plugins_mode", namespace=NS, mode="audit") is None
    assert w.api.writes() == []


# --- audit: the one status write ------------------------------------------------------------

RECONCILED = {"type": "Reconciled", "status": "True", "reason": "Success", "message": "",
              "lastTransitionTime": "2026-01-01T00:00:03Z"}
EARLIER = {"type": "PluginsSynced", "status": "Unknown", "reason": "WaitingForDeployment",
           "message": "written by an earlier rollgate", "observedGeneration": 1,
           "lastTransitionTime": "2026-01-01T00:00:02Z"}


def test_audit_removes_an_earlier_plugins_synced_condition_once() -> None:
    w = audit_world()
    w.rm({"trafficManagement": [GATEWAY], "metric": [PROM]}, conditions=[RECONCILED, EARLIER])
    before = w.api.get(ROLLOUT_MANAGER, NS, "rollouts")
    assert before is not None
    w.reconcile()
    assert w.api.writes() == ["patch rolloutmanagers/rollouts/status"]
    assert w.conditions() == [RECONCILED], "the operator's condition kept exactly as it was"
    [body] = w.status_bodies()
    assert body == {"metadata": {"resourceVersion": before["metadata"]["resourceVersion"]},
                    "status": {"conditions": [RECONCILED]}}, "nothing else, with a precondition"
    after = w.api.get(ROLLOUT_MANAGER, NS, "rollouts")
    assert after is not None and after["spec"] == before["spec"]

    for _ in range(3):
        w.reconcile()
    # The operator writes its status again: still nothing of rollgate's to write.
    w.operator_status("rollouts", [{**RECONCILED, "message": "again"}])
    w.deliver()
    w.reconcile()
    w.rm({"trafficManagement": [GATEWAY], "metric": [PROM]}, generation=2,
         conditions=[RECONCILED])
    w.reconcile()
    assert w.api.writes() == ["patch rolloutmanagers/rollouts/status"], "once, then never again"
    assert w.events.reasons() == ["PluginDigestDropped", "PluginDigestDropped"]


def test_the_last_condition_removed_removes_the_field() -> None:
    w = audit_world()
    w.rm({"trafficManagement": [GATEWAY], "metric": [PROM]}, conditions=[EARLIER])
    w.reconcile()
    assert w.status_bodies()[0]["status"] == {"conditions": None}
    obj = w.api.get(ROLLOUT_MANAGER, NS, "rollouts")
    assert obj is not None and "conditions" not in (obj.get("status") or {})


def test_the_removal_never_overwrites_a_status_write_the_cache_has_not_seen() -> None:
    w = audit_world()
    w.rm({"trafficManagement": [GATEWAY], "metric": [PROM]}, conditions=[EARLIER])
    w.operator_status("rollouts", [RECONCILED, EARLIER])
    with pytest.raises(Conflict):
        w.reconcile()
    assert w.conditions() == [RECONCILED, EARLIER], "refused (409), nothing lost"
    w.deliver()
    w.reconcile()
    assert w.conditions() == [RECONCILED]


def test_audit_removes_the_condition_from_every_rollout_manager_of_the_namespace() -> None:
    w = audit_world()
    not_owner = {**EARLIER, "status": "False", "reason": "NotOwner"}
    w.rm({"metric": [PROM]}, name="second", uid="u-2", created="2026-01-01T00:00:05Z",
         conditions=[not_owner])
    w.reconcile()
    assert w.api.writes() == ["patch rolloutmanagers/second/status"]
    assert w.conditions("second") == []
    w.reconcile("second")
    assert len(w.api.writes()) == 1
