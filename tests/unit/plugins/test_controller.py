"""Pure decisions of the rollout-plugins controller: who owns, when to write, what maps.

The I/O paths are covered end to end in tests/e2e/plugins/test_rollout_plugins.py; these pin
the decisions that make writes minimal (no write, no restart when nothing changed), and
the release of the keys against the one fake API (support/testkit/fakeapi/).
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.exceptions import ApiException

from kubekit.kinds import CONFIG_MAP, DEPLOYMENT, ROLLOUT_MANAGER
from kubekit.rest import namespace_terminating
from reconciler.plugins.controller import RolloutPluginsController
from reconciler.plugins.decisions import (
    EMPTY_CHECKSUM,
    apply_body,
    describe,
    in_sync,
    owner_of,
    plan,
    pod_template_checksum,
    removal_patch,
    without_condition,
)
from reconciler.plugins.options import PluginsOptions
from reconciler.plugins.render import METRIC_KEY, TRAFFIC_KEY, checksum
from reconciler.runtime.cache import CacheView
from reconciler.runtime.manager import Manager
from reconciler.runtime.options import RuntimeOptions
from reconciler.runtime.types import Key
from reconciler.runtime.watches import keys_for
from schemas.kinds import API_VERSION_ARGO
from testkit import objects
from testkit.fakeapi import Events, FakeApi, Interceptors, context, never


def rm(name: str, created: str, *, deleting: bool = False, ns: str = "ns") -> dict[str, Any]:
    deleted: dict[str, Any] = {"deletionTimestamp": "2026-01-01T00:00:09Z"} if deleting else {}
    return objects.k8s_object("RolloutManager", name=name, namespace=ns,
                              creationTimestamp=created, **deleted)


def cm(data: dict[str, str], *, owned: tuple[str, ...] = (), ns: str = "ns") -> dict[str, Any]:
    fields: dict[str, Any] = {"f:data": {f"f:{k}": {} for k in owned}}
    return {
        "metadata": {
            "name": "argo-rollouts-config",
            "namespace": ns,
            "resourceVersion": "7",
            "managedFields": [{"manager": "rollgate", "operation": "Apply", "fieldsV1": fields}],
        },
        "data": data,
    }


def test_oldest_rollout_manager_owns() -> None:
    rms = [rm("b", "2026-01-01T00:00:02Z"), rm("a", "2026-01-01T00:00:03Z")]
    assert owner_of(rms)["metadata"]["name"] == "b"  # type: ignore[index]


def test_name_breaks_a_creation_time_tie() -> None:
    rms = [rm("b", "2026-01-01T00:00:02Z"), rm("a", "2026-01-01T00:00:02Z")]
    assert owner_of(rms)["metadata"]["name"] == "a"  # type: ignore[index]


def test_a_deleting_rollout_manager_does_not_own() -> None:
    rms = [rm("old", "2026-01-01T00:00:01Z", deleting=True), rm("new", "2026-01-01T00:00:05Z")]
    assert owner_of(rms)["metadata"]["name"] == "new"  # type: ignore[index]
    assert owner_of([rms[0]]) is None
    assert owner_of([]) is None


OPERATOR_DEPLOYMENT = {"metadata": {"name": "argo-rollouts", "namespace": "ns", "ownerReferences": [
    {"apiVersion": API_VERSION_ARGO, "kind": "RolloutManager", "name": "b",
     "uid": "u-b", "controller": True}]}}
PLAIN_DEPLOYMENT = {"metadata": {"name": "argo-rollouts", "namespace": "ns"}}


def test_plan_writes_nothing_while_auto_mode_waits_for_the_deployment() -> None:
    rms = [rm("b", "2026-01-01T00:00:02Z"), rm("a", "2026-01-01T00:00:03Z")]
    for keyed in (rms[0], rms[1], None):
        step = plan("auto", rms, None, keyed)
        assert (step.mode, step.action) == ("waiting", "wait"), "not even NotOwner"
    assert plan("auto", [], None, None).action == "forget", "no release either"
    assert plan("sync", [], None, None).action == "release"


def test_plan_follows_the_deployments_controller() -> None:
    rms = [rm("b", "2026-01-01T00:00:02Z"), rm("a", "2026-01-01T00:00:03Z")]
    assert plan("auto", rms, OPERATOR_DEPLOYMENT, rms[1]).action == "audit"
    assert plan("auto", [], OPERATOR_DEPLOYMENT, None).action == "forget"
    assert plan("auto", rms, PLAIN_DEPLOYMENT, rms[0]).action == "sync"
    assert plan("auto", rms, PLAIN_DEPLOYMENT, rms[1]).action == "not-owner"
    assert plan("auto", rms, PLAIN_DEPLOYMENT, None).action == "sync"
    assert plan("auto", [], PLAIN_DEPLOYMENT, None).action == "release"
    step = plan("audit", rms, PLAIN_DEPLOYMENT, rms[1])
    assert (step.action, (step.owner or {})["metadata"]["name"]) == ("audit", "b")


def test_without_condition_keeps_every_other_condition() -> None:
    other = {"type": "Reconciled", "status": "True"}
    ours = {"type": "PluginsSynced", "status": "Unknown"}
    assert without_condition({"status": {"conditions": [other, ours]}}) == {
        "conditions": [other]}
    assert without_condition({"status": {"conditions": [ours]}}) == {"conditions": None}
    assert without_condition({"status": {"conditions": [other]}}) is None
    assert without_condition({"status": {}}) is None
    assert without_condition({}) is None


def test_in_sync_needs_equal_values_and_ownership() -> None:
    data = {METRIC_KEY: "- name: a/b\n  location: file:///x\n"}
    assert in_sync(cm({**data, "other": "1"}, owned=(METRIC_KEY,)), data)
    assert not in_sync(cm(data), data), "equal but not owned: must take the key over"
    assert not in_sync(cm({**data, TRAFFIC_KEY: "[]"}, owned=(METRIC_KEY,)), data)
    assert not in_sync(cm({METRIC_KEY: "changed"}, owned=(METRIC_KEY,)), data)
    assert not in_sync(None, data)


def test_no_config_map_and_no_plugins_is_in_sync() -> None:
    assert in_sync(None, {})
    assert in_sync(cm({"other": "1"}), {})


def test_missing_annotation_counts_as_no_plugins() -> None:
    assert pod_template_checksum(None) == EMPTY_CHECKSUM == checksum({})
    dep = {"spec": {"template": {"metadata": {"annotations": {
        "rollgate.dev/plugins-checksum": "abc"}}}}}
    assert pod_template_checksum(dep) == "abc"


def test_apply_body_holds_only_the_managed_keys() -> None:
    body = apply_body("ns", {METRIC_KEY: "x"})
    assert body == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "argo-rollouts-config", "namespace": "ns"},
        "data": {METRIC_KEY: "x"},
    }
    assert "data" not in apply_body("ns", {})


def test_removal_patch_is_guarded_by_the_seen_value() -> None:
    ops = removal_patch(cm({METRIC_KEY: "v", "other": "o"}), [METRIC_KEY, TRAFFIC_KEY])
    assert ops == [
        {"op": "test", "path": f"/data/{METRIC_KEY}", "value": "v"},
        {"op": "remove", "path": f"/data/{METRIC_KEY}"},
    ]


def test_describe_counts_entries() -> None:
    data = {METRIC_KEY: "- name: a/b\n  location: file:///x\n- name: c/d\n  location: file:///y\n"}
    assert describe(data) == "0 traffic router plugins, 2 metric plugins"


def cache_with(*objs: tuple[Any, dict[str, Any]]) -> CacheView:
    """A cache of what the controller watches, over an API holding ``objs``."""
    api = FakeApi()
    for resource, obj in objs:
        api.put(resource, obj)
    return api.cache(*(w.resource for w in RolloutPluginsController().watches))


def mapped(c: RolloutPluginsController, resource: Any, obj: dict[str, Any],
           cache: CacheView) -> list[Key]:
    """The keys the controller's watches map an event of ``obj`` to."""
    return sorted(keys_for(c.watches, resource, None, obj, cache))


def test_the_manager_maps_events_through_its_cache_from_the_start() -> None:
    """ConfigMap events map to the owner from the start, not only after a reconcile."""
    c = RolloutPluginsController()
    manager = Manager(api=None, controllers=[c], options=RuntimeOptions(leader_elect=False))
    manager.stores[ROLLOUT_MANAGER].upsert(rm("a", "2026-01-01T00:00:03Z"))
    [runner] = manager.runners
    runner.launched.set()  # its CRD is served and its informers run
    manager._handler_for(c.config_maps)("ADDED", None, cm({}))
    assert runner.queue.get() == Key("ns", "a")


def test_the_runtime_serves_the_features_metrics() -> None:
    """The feature registers its metrics (``collectors``); the runtime only serves them."""
    c = RolloutPluginsController()
    manager = Manager(api=None, controllers=[c], options=RuntimeOptions(leader_elect=False))
    c.metrics.set_mode("ns", "sync")
    assert manager.metrics.registry.get_sample_value(
        "rollgate_plugins_mode", {"namespace": "ns", "mode": "sync"}) == 1


def test_config_map_events_map_to_the_owner() -> None:
    c = RolloutPluginsController()
    cache = cache_with(
        (ROLLOUT_MANAGER, rm("b", "2026-01-01T00:00:02Z")),
        (ROLLOUT_MANAGER, rm("a", "2026-01-01T00:00:03Z")),
    )
    assert mapped(c, c.config_maps, cm({}), cache) == [Key("ns", "b")]
    other = {"metadata": {"name": "something-else", "namespace": "ns"}}
    assert mapped(c, c.config_maps, other, cache) == []
    dep = {"metadata": {"name": "argo-rollouts", "namespace": "ns"}}
    assert mapped(c, c.deployments, dep, cache) == [Key("ns", "b")]


def test_rollout_manager_events_map_to_every_rm_of_the_namespace() -> None:
    c = RolloutPluginsController()
    cache = cache_with(
        (ROLLOUT_MANAGER, rm("b", "2026-01-01T00:00:02Z")),
        (ROLLOUT_MANAGER, rm("a", "2026-01-01T00:00:03Z")),
        (ROLLOUT_MANAGER, rm("x", "2026-01-01T00:00:03Z", ns="elsewhere")),
    )
    keys = set(mapped(c, ROLLOUT_MANAGER, rm("gone", "2026-01-01T00:00:01Z"), cache))
    assert keys == {Key("ns", "a"), Key("ns", "b"), Key("ns", "gone")}


def test_without_rollout_managers_only_rollgate_owned_config_maps_map() -> None:
    c = RolloutPluginsController()
    cache = cache_with()
    owned = cm({METRIC_KEY: "x"}, owned=(METRIC_KEY,))
    assert mapped(c, c.config_maps, owned, cache) == [Key("ns", "argo-rollouts-config")]
    assert mapped(c, c.config_maps, cm({METRIC_KEY: "x"}), cache) == []
    dep = {"metadata": {"name": "d", "namespace": "ns"}}
    assert mapped(c, c.deployments, dep, cache) == []


def test_resync_finds_config_maps_left_without_rollout_manager() -> None:
    controller = RolloutPluginsController()
    cache = cache_with(
        (controller.config_maps, cm({METRIC_KEY: "x"}, owned=(METRIC_KEY,), ns="orphan")),
        (controller.config_maps, cm({METRIC_KEY: "x"}, owned=(METRIC_KEY,), ns="ns")),
        (controller.config_maps, cm({METRIC_KEY: "x"}, ns="foreign")),
        (ROLLOUT_MANAGER, rm("a", "2026-01-01T00:00:03Z")),
    )
    keys = list(controller.resync_keys(cache))
    assert keys == [Key("orphan", "argo-rollouts-config")]


def test_namespace_terminating_is_recognised() -> None:
    body = json.dumps({
        "kind": "Status", "reason": "Forbidden", "code": 403,
        "details": {"causes": [{"reason": "NamespaceTerminating", "field": "metadata.namespace"}]},
    })
    exc = ApiException(status=403, reason="Forbidden")
    exc.body = body
    assert namespace_terminating(exc)
    other = ApiException(status=403, reason="Forbidden")
    other.body = json.dumps({"reason": "Forbidden"})
    assert not namespace_terminating(other)
    garbage = ApiException(status=403, reason="Forbidden")
    garbage.body = "not json"
    assert not namespace_terminating(garbage)
    assert not namespace_terminating(ApiException(status=409, reason="Conflict"))


def test_watches_only_the_managed_config_map_and_deployment() -> None:
    """The cache (and so the RBAC) covers one ConfigMap and one Deployment by name."""
    c = RolloutPluginsController(options=PluginsOptions(rollouts_deployment="my-rollouts"))
    assert tuple(w.resource for w in c.watches) == (
        ROLLOUT_MANAGER,
        CONFIG_MAP.named("argo-rollouts-config"),
        DEPLOYMENT.named("my-rollouts"),
    )
    assert c.deployments.field_selector == "metadata.name=my-rollouts"
    assert c.config_maps.field_selector == "metadata.name=argo-rollouts-config"
    cache = cache_with((ROLLOUT_MANAGER, rm("a", "2026-01-01T00:00:03Z")))
    dep = {"metadata": {"name": "argo-rollouts", "namespace": "ns"}}
    assert mapped(c, c.deployments, dep, cache) == [], "not the flagged Deployment"


# --- releasing the keys when the last RolloutManager goes ------------------------------------

CO_OWNER = "argo-rollouts-manager"


def namespace(data: dict[str, str], owners: dict[str, set[str]],
              annotation: str | None) -> FakeApi:
    """An API holding the namespace's ConfigMap, whose ``data`` keys the field managers
    in ``owners`` own (server-side apply: the fake releases a key a manager no longer
    applies unless another manager still owns it, as the API server does), and the Argo
    Rollouts Deployment with the plugins checksum ``annotation``."""
    managers = sorted({m for key_owners in owners.values() for m in key_owners})
    api = FakeApi(interceptors=Interceptors(  # the release reads and patches, nothing else
        create=never("the release creates nothing"), replace=never("the release replaces nothing"),
        delete=never("the release deletes nothing"), list=never("the release lists nothing")))
    api.put(CONFIG_MAP, {
        "metadata": {
            "name": "argo-rollouts-config", "namespace": "ns",
            "managedFields": [
                {"manager": m, "operation": "Apply", "fieldsV1": {"f:data": {
                    f"f:{k}": {} for k, key_owners in owners.items() if m in key_owners}}}
                for m in managers
            ],
        },
        "data": dict(data),
    })
    annotations = {} if annotation is None else {"rollgate.dev/plugins-checksum": annotation}
    api.put(DEPLOYMENT, {"metadata": {"name": "argo-rollouts", "namespace": "ns"},
                         "spec": {"template": {"metadata": {"annotations": annotations}}}})
    return api


def data(api: FakeApi) -> dict[str, str] | None:
    """The ConfigMap's data as the API server holds it (None: no ConfigMap)."""
    config_map = api.get(CONFIG_MAP, "ns", "argo-rollouts-config")
    return None if config_map is None else dict(config_map.get("data") or {})


def pod_annotations(api: FakeApi) -> dict[str, str]:
    """The annotations of the Deployment's pod template, as the API server holds them."""
    deployment = api.get(DEPLOYMENT, "ns", "argo-rollouts")
    assert deployment is not None
    return dict(deployment["spec"]["template"]["metadata"].get("annotations") or {})


def release(api: FakeApi, *, deployment: bool = True, mode: str = "auto",
            config_map_deleted: bool = False) -> Events:
    """Reconcile a namespace whose last RolloutManager is gone (with the Argo Rollouts
    Deployment, no operator controlling it, in the cache unless ``deployment`` is False);
    ``config_map_deleted``: the ConfigMap is deleted after the cache saw it."""
    controller = RolloutPluginsController(options=PluginsOptions(mode=mode))
    stores = api.stores(*(w.resource for w in controller.watches))
    if not deployment:  # the API has it, the cache has not seen it
        for obj in stores[controller.deployments].list():
            stores[controller.deployments].remove(obj)
    if config_map_deleted:  # the cache still has it
        api.hold()
        api.remove(CONFIG_MAP, "ns", "argo-rollouts-config")
    events = Events()
    ctx = context(api, controller=controller, cache=CacheView(stores), events=events)
    controller.reconcile(Key("ns", "argo-rollouts-config"), ctx)
    return events


METRIC_VALUE = "- name: a/b\n  location: file:///x\n"
TRAFFIC_VALUE = "- name: c/d\n  location: file:///y\n"


def test_release_removes_a_key_another_manager_co_owns() -> None:
    api = namespace(
        {METRIC_KEY: METRIC_VALUE, "other": "o"},
        {METRIC_KEY: {"rollgate", CO_OWNER}, "other": {"someone"}},
        annotation=checksum({METRIC_KEY: METRIC_VALUE}),
    )
    events = release(api)
    assert data(api) == {"other": "o"}
    assert events.reasons() == ["PluginsRemoved"]
    assert pod_annotations(api)["rollgate.dev/plugins-checksum"] == EMPTY_CHECKSUM


def test_release_keeps_keys_rollgate_never_wrote_and_restarts_for_what_is_left() -> None:
    """The Deployment's checksum follows the plugins still configured, not "none"."""
    api = namespace(
        {METRIC_KEY: METRIC_VALUE, TRAFFIC_KEY: TRAFFIC_VALUE},
        {METRIC_KEY: {"rollgate"}, TRAFFIC_KEY: {"someone"}},
        annotation=checksum({METRIC_KEY: METRIC_VALUE}),
    )
    release(api)
    assert data(api) == {TRAFFIC_KEY: TRAFFIC_VALUE}
    assert pod_annotations(api)["rollgate.dev/plugins-checksum"] == checksum(
        {TRAFFIC_KEY: TRAFFIC_VALUE})


def test_release_of_a_config_map_deleted_meanwhile_is_done() -> None:
    api = namespace({METRIC_KEY: METRIC_VALUE}, {METRIC_KEY: {"rollgate"}}, annotation=None)
    events = release(api, config_map_deleted=True)  # the cache still has it
    assert events.emitted == []
    assert pod_annotations(api) == {}


def test_release_waits_for_the_deployment_in_auto_mode() -> None:
    """No Deployment: auto mode writes nothing at all, not even the release; an explicit
    --plugins-mode=sync releases at once."""
    owners = {METRIC_KEY: {"rollgate"}}
    waiting = namespace({METRIC_KEY: METRIC_VALUE}, owners, annotation=None)
    assert release(waiting, deployment=False).emitted == []
    assert data(waiting) == {METRIC_KEY: METRIC_VALUE}
    synced = namespace({METRIC_KEY: METRIC_VALUE}, owners, annotation=None)
    release(synced, deployment=False, mode="sync")
    assert data(synced) == {}


def test_a_deployment_that_appears_brings_back_a_pending_release() -> None:
    """The namespace is decided again when the Deployment appears, RolloutManager or not."""
    c = RolloutPluginsController()
    dep = {"metadata": {"name": "argo-rollouts", "namespace": "ns"}}
    owned = cm({METRIC_KEY: "x"}, owned=(METRIC_KEY,))
    assert mapped(c, c.deployments, dep, cache_with((c.config_maps, owned))) == [
        Key("ns", "argo-rollouts-config")]
    assert mapped(c, c.deployments, dep, cache_with((c.config_maps, cm({METRIC_KEY: "x"})))) == []
