"""Pure decisions of the rollout-plugins controller: who owns, when to write, what maps.

The I/O paths are covered end to end in tests/e2e/test_rollout_plugins.py; these pin
the decisions that make writes minimal (no write, no restart when nothing changed).
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes.client.exceptions import ApiException

from reconciler.controllers.rollout_plugins import (
    EMPTY_CHECKSUM,
    RolloutPluginsController,
    apply_body,
    describe,
    in_sync,
    namespace_terminating,
    owner_of,
    pod_template_checksum,
    removal_patch,
)
from reconciler.plugins import METRIC_KEY, TRAFFIC_KEY, checksum
from reconciler.runtime.cache import CacheView, Store
from reconciler.runtime.types import (
    CONFIG_MAP,
    DEPLOYMENT,
    ROLLOUT_MANAGER,
    Key,
)


def rm(name: str, created: str, *, deleting: bool = False, ns: str = "ns") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:09Z"
    return {"metadata": meta, "spec": {}}


def cm(data: dict[str, str], *, owned: tuple[str, ...] = (), ns: str = "ns") -> dict[str, Any]:
    fields = {"f:data": {f"f:{k}": {} for k in owned}}
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


def controller_with(*objs: tuple[Any, dict[str, Any]]) -> RolloutPluginsController:
    stores = {r: Store(r) for r in RolloutPluginsController.watches}
    for resource, obj in objs:
        stores[resource].upsert(obj)
    controller = RolloutPluginsController()
    controller.resync_keys(CacheView(stores))  # gives the controller its cache
    return controller


def test_config_map_events_map_to_the_owner() -> None:
    c = controller_with(
        (ROLLOUT_MANAGER, rm("b", "2026-01-01T00:00:02Z")),
        (ROLLOUT_MANAGER, rm("a", "2026-01-01T00:00:03Z")),
    )
    assert list(c.map_event(CONFIG_MAP, cm({}))) == [Key("ns", "b")]
    other = {"metadata": {"name": "something-else", "namespace": "ns"}}
    assert list(c.map_event(CONFIG_MAP, other)) == []
    dep = {"metadata": {"name": "argo-rollouts", "namespace": "ns"}}
    assert list(c.map_event(DEPLOYMENT, dep)) == [Key("ns", "b")]


def test_rollout_manager_events_map_to_every_rm_of_the_namespace() -> None:
    c = controller_with(
        (ROLLOUT_MANAGER, rm("b", "2026-01-01T00:00:02Z")),
        (ROLLOUT_MANAGER, rm("a", "2026-01-01T00:00:03Z")),
        (ROLLOUT_MANAGER, rm("x", "2026-01-01T00:00:03Z", ns="elsewhere")),
    )
    keys = set(c.map_event(ROLLOUT_MANAGER, rm("gone", "2026-01-01T00:00:01Z")))
    assert keys == {Key("ns", "a"), Key("ns", "b"), Key("ns", "gone")}


def test_without_rollout_managers_only_rollgate_owned_config_maps_map() -> None:
    c = controller_with()
    assert list(c.map_event(CONFIG_MAP, cm({METRIC_KEY: "x"}, owned=(METRIC_KEY,)))) == [
        Key("ns", "argo-rollouts-config")
    ]
    assert list(c.map_event(CONFIG_MAP, cm({METRIC_KEY: "x"}))) == []
    assert list(c.map_event(DEPLOYMENT, {"metadata": {"name": "d", "namespace": "ns"}})) == []


def test_resync_finds_config_maps_left_without_rollout_manager() -> None:
    stores = {r: Store(r) for r in RolloutPluginsController.watches}
    stores[CONFIG_MAP].upsert(cm({METRIC_KEY: "x"}, owned=(METRIC_KEY,), ns="orphan"))
    stores[CONFIG_MAP].upsert(cm({METRIC_KEY: "x"}, owned=(METRIC_KEY,), ns="ns"))
    stores[CONFIG_MAP].upsert(cm({METRIC_KEY: "x"}, ns="foreign"))
    stores[ROLLOUT_MANAGER].upsert(rm("a", "2026-01-01T00:00:03Z"))
    keys = list(RolloutPluginsController().resync_keys(CacheView(stores)))
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
