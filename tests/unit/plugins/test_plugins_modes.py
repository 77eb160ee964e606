"""The plugins controller per mode: what it writes (and does not) and what it reports.

Against an in-memory API (``Api`` below) that records every write, with the digest
pre-flight's download injected: the e2e tests (tests/e2e/test_rollout_plugins.py) run
the same flows against a real kube-apiserver and a real HTTPS server; these pin the
decisions pass by pass ("a pass over an unchanged world writes nothing", "events once
per generation") where the e2e suite can only sample.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from kubekit.kinds import ROLLOUT_MANAGER
from kubekit.rest import APPLY_PATCH, JSON_PATCH, MERGE_PATCH
from reconciler.plugins.controller import RolloutPluginsController
from reconciler.plugins.digests import DigestVerifier, DownloadError
from reconciler.plugins.render import METRIC_KEY, TRAFFIC_KEY
from reconciler.runtime.cache import CacheView, Store
from reconciler.runtime.health import Metrics
from reconciler.runtime.types import Context, Key, Requeue

GOOD = "a1" * 32
OTHER = "b2" * 32
URL = "https://plugins.example.com/gatewayapi"
NS = "ns"


class Api:
    """The Client calls the plugins controller makes, over dicts, keeping the cache
    (the controller's CacheView) up to date the way a watch would."""

    def __init__(self, controller: RolloutPluginsController) -> None:
        self.stores = {w.resource: Store(w.resource) for w in controller.watches}
        self.by_plural = {w.resource.plural: w.resource for w in controller.watches}
        self.rv = 10
        self.writes: list[str] = []

    def cache(self) -> CacheView:
        return CacheView(self.stores)

    def put(self, plural: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"].setdefault("namespace", NS)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        self.stores[self.by_plural[plural]].upsert(obj)
        return copy.deepcopy(obj)

    def get(self, resource: Any, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.stores[self.by_plural[resource.plural]].get(namespace, name)
        return copy.deepcopy(found) if found else None

    def create(self, resource: Any, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("the plugins controller creates nothing but by apply")

    def replace(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise AssertionError("the plugins controller never replaces")

    def delete(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("the plugins controller never deletes")

    def patch(self, resource: Any, namespace: str, name: str, body: Any, *,
              content_type: str = "", subresource: str = "", field_manager: str | None = None,
              force: bool | None = None) -> dict[str, Any]:
        plural = resource.plural
        current = self.get(resource, namespace, name)
        self.writes.append(f"{plural}/{name}{'/' + subresource if subresource else ''}")
        if plural == "configmaps" and content_type == APPLY_PATCH:
            cm = current or {"apiVersion": "v1", "kind": "ConfigMap",
                             "metadata": {"name": name, "namespace": namespace}, "data": {}}
            cm.setdefault("data", {}).update(body.get("data") or {})
            cm["metadata"]["managedFields"] = [{"manager": field_manager, "operation": "Apply",
                                                "fieldsV1": {"f:data": {
                                                    f"f:{k}": {} for k in body.get("data", {})}}}]
            return self.put(plural, cm)
        assert current is not None, f"patch of a missing {plural}/{name}"
        if content_type == JSON_PATCH:
            for op in body:
                if op["op"] == "remove":
                    current["data"].pop(op["path"].removeprefix("/data/"))
            return self.put(plural, current)
        assert content_type == MERGE_PATCH
        expected = (body.get("metadata") or {}).get("resourceVersion")
        if expected is not None and expected != current["metadata"]["resourceVersion"]:
            raise ApiException(status=409, reason="Conflict")
        if subresource == "status":
            current["status"] = {**(current.get("status") or {}), **body["status"]}
        else:
            annotations = body["spec"]["template"]["metadata"]["annotations"]
            template = current["spec"]["template"]["metadata"]
            template.setdefault("annotations", {}).update(annotations)
        return self.put(plural, current)


class Events:
    def __init__(self) -> None:
        self.emitted: list[tuple[str, str, str]] = []

    def emit(self, obj: Any, *, type: str, reason: str, message: str) -> None:
        self.emitted.append((type, reason, message))

    def reasons(self) -> list[str]:
        return [reason for _, reason, _ in self.emitted]


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
            {"plugins_mode": mode}, verifier=DigestVerifier(self.fetch))
        self.api = Api(self.controller)
        self.events = Events()
        self.serve_metrics()
        self.mode = mode

    def serve_metrics(self) -> None:
        """The runtime's metrics, serving the controller's collectors as the Manager does."""
        self.metrics = Metrics()
        self.metrics.serve(self.controller.collectors)
        self.registry = self.metrics.registry

    def rm(self, plugins: dict[str, Any], *, name: str = "rollouts", uid: str = "u-1",
           generation: int = 1, created: str = "2026-01-01T00:00:01Z") -> None:
        self.api.put("rolloutmanagers", {
            "apiVersion": "argoproj.io/v1alpha1", "kind": "RolloutManager",
            "metadata": {"name": name, "namespace": NS, "uid": uid, "generation": generation,
                         "creationTimestamp": created},
            "spec": {"plugins": plugins},
        })

    def deployment(self, *, operator: bool = False, annotations: dict[str, str] | None = None
                   ) -> None:
        meta: dict[str, Any] = {"name": "argo-rollouts", "namespace": NS}
        if operator:
            meta["ownerReferences"] = [{"apiVersion": "argoproj.io/v1alpha1",
                                        "kind": "RolloutManager", "name": "rollouts",
                                        "uid": "u-1", "controller": True}]
        self.api.put("deployments", {"metadata": meta, "spec": {"template": {
            "metadata": {"annotations": dict(annotations or {})}}}})

    def config_map(self, data: dict[str, str]) -> None:
        self.api.put("configmaps", {"metadata": {"name": "argo-rollouts-config",
                                                 "namespace": NS}, "data": data})

    def reconcile(self, name: str = "rollouts") -> None:
        ctx = Context(cache=self.api.cache(), client=self.api, events=self.events,
                      options={"plugins_mode": self.mode}, metrics=self.metrics)
        self.controller.reconcile(Key(NS, name), ctx)

    def condition(self, name: str = "rollouts") -> dict[str, Any] | None:
        obj = self.api.get(ROLLOUT_MANAGER, NS, name) or {}
        return next((c for c in (obj.get("status") or {}).get("conditions") or []
                     if c["type"] == "PluginsSynced"), None)

    def annotation(self) -> str | None:
        dep = self.api.stores[self.controller.deployments].get(NS, "argo-rollouts")
        return ((dep or {})["spec"]["template"]["metadata"].get("annotations") or {}).get(
            "rollgate.dev/plugins-checksum")

    def data(self) -> dict[str, str] | None:
        cm = self.api.stores[self.controller.config_maps].get(NS, "argo-rollouts-config")
        return None if cm is None else dict(cm.get("data") or {})

    def sample(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)


GATEWAY = {"name": "argoproj-labs/gatewayAPI", "location": URL, "sha256": GOOD}
PROM = {"name": "argoproj-labs/sample-prometheus", "location": "file:///plugins/prom"}


# --- auto: no Deployment yet --------------------------------------------------------------


def test_without_the_deployment_nothing_is_written_but_the_unknown_condition() -> None:
    w = World()
    w.rm({"trafficManagement": [GATEWAY]})
    w.reconcile()
    assert w.api.writes == ["rolloutmanagers/rollouts/status"]
    cond = w.condition()
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("Unknown", "WaitingForDeployment")
    assert w.data() is None
    assert w.fetch.calls == [], "nothing is about to be written: nothing to prove"
    w.reconcile()
    assert w.api.writes == ["rolloutmanagers/rollouts/status"], "an unchanged pass writes nothing"
    assert w.sample("rollgate_plugins_mode", namespace=NS, mode="waiting") == 1


# --- sync ----------------------------------------------------------------------------------


def test_sync_proves_the_digest_then_writes_and_rolls_once() -> None:
    w = World()
    w.deployment()
    w.rm({"trafficManagement": [GATEWAY], "metric": [PROM]})
    w.reconcile()
    assert w.fetch.calls == [URL], "only the https entry with a digest is downloaded"
    assert w.api.writes == ["configmaps/argo-rollouts-config", "deployments/argo-rollouts",
                            "rolloutmanagers/rollouts/status"]
    assert set(w.data() or {}) == {TRAFFIC_KEY, METRIC_KEY}
    assert w.annotation()
    assert w.condition()["status"] == "True"  # type: ignore[index]
    assert w.sample("rollgate_plugins_preflight_checks_total",
                    result="verified", source="download") == 1

    w.reconcile()
    assert len(w.api.writes) == 3, "a pass over an unchanged world writes nothing"
    assert w.fetch.calls == [URL]


def test_a_wrong_digest_leaves_config_map_and_deployment_alone() -> None:
    w = World(served={URL: OTHER})
    w.deployment()
    w.rm({"trafficManagement": [GATEWAY]})
    w.reconcile()
    assert w.api.writes == ["rolloutmanagers/rollouts/status"]
    assert w.data() is None
    assert w.annotation() is None
    cond = w.condition()
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("False", "DigestMismatch")
    assert f"has sha256 {OTHER}, expected {GOOD}" in cond["message"]
    assert cond["message"].startswith("spec.plugins.trafficManagement[0].sha256: ")
    assert w.events.reasons() == ["DigestMismatch"]

    w.reconcile()
    assert w.api.writes == ["rolloutmanagers/rollouts/status"]
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
    assert len(first.api.writes) == 3


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
    assert w.api.writes == ["rolloutmanagers/rollouts/status"]


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
    assert w.api.writes == ["configmaps/argo-rollouts-config", "rolloutmanagers/rollouts/status"]


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
    before = {r: copy.deepcopy(store.list()) for r, store in w.api.stores.items()}
    w.reconcile()
    assert w.api.writes == [], "audit writes nothing, not even status"
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
    assert w.api.writes == []
    assert w.fetch.calls == [URL], "verified once per generation"
    assert {r: store.list() for r, store in w.api.stores.items()} == before


def test_audit_reports_a_hand_edit_and_does_not_revert_it() -> None:
    w = audit_world()
    w.reconcile()
    w.config_map({TRAFFIC_KEY: OPERATOR_TRAFFIC, METRIC_KEY: "[]\n"})
    w.reconcile()
    assert w.events.reasons() == ["PluginDigestDropped", "PluginMissing"]
    assert w.data() == {TRAFFIC_KEY: OPERATOR_TRAFFIC, METRIC_KEY: "[]\n"}
    assert w.api.writes == []
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
    assert w.api.writes == []
    assert sorted(w.events.reasons()) == ["DigestMismatch", "PluginDigestDropped"]
    mismatch = next(m for _, r, m in w.events.emitted if r == "DigestMismatch")
    assert f"has sha256 {OTHER}, expected {GOOD}" in mismatch
    assert w.sample("rollgate_plugins_audit_findings", namespace=NS,
                    finding="digest-mismatch") == 1
    w.reconcile()
    assert len(w.events.emitted) == 2


def test_metrics_of_a_namespace_go_with_its_last_rollout_manager() -> None:
    w = audit_world()
    w.reconcile()
    w.api.stores[ROLLOUT_MANAGER].remove(w.api.get(ROLLOUT_MANAGER, NS, "rollouts"))
    w.reconcile()
    assert w.sample("rollgate_plugins_audit_findings", namespace=NS,
                    finding="digest-dropped") is None
    assert w.sample("rollgate_plugins_mode", namespace=NS, mode="audit") is None
    assert w.api.writes == []
