"""The fake API (support/testkit/fakeapi/) keeps the API server's semantics the tests
depend on; each case states what kube-apiserver does, so a test passing against the fake
means something.

Its objects are bare (a name, no apiVersion or kind), not testkit.objects': the fake
fills in what the API server fills in, and these tests check that it does."""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from kubekit.kinds import (
    ANALYSIS_RUN,
    CLUSTER_ANALYSIS_TEMPLATE,
    CONFIG_MAP,
    DEPLOYMENT,
    ROLLOUT_MANAGER,
    STAGE,
)
from kubekit.rest import APPLY_PATCH, JSON_PATCH, is_already_exists, is_conflict, reason_of
from reconciler.runtime.options import RuntimeOptions
from reconciler.runtime.watches import enqueue_self
from schemas.kinds import API_VERSION_KARGO
from testkit import objects
from testkit.fakeapi import Events, FakeApi, Interceptors, api_error, context, never


def stage(name: str = "s", ns: str = "ns", **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"x": 1}, **extra}


def status(exc: pytest.ExceptionInfo[ApiException]) -> tuple[int, str]:
    return exc.value.status, reason_of(exc.value)


def test_create_sets_what_the_server_sets_and_refuses_a_duplicate() -> None:
    api = FakeApi()
    created = api.create(STAGE, "ns", stage(status={"phase": "x"}))
    meta = created["metadata"]
    assert (created["apiVersion"], created["kind"]) == (API_VERSION_KARGO, "Stage")
    assert meta["namespace"] == "ns" and meta["generation"] == 1
    assert meta["uid"] and meta["creationTimestamp"] and meta["resourceVersion"]
    assert "status" not in created  # a status subresource: ignored on create
    assert api.get(STAGE, "ns", "s") == created
    with pytest.raises(ApiException) as exc:
        api.create(STAGE, "ns", stage())
    assert is_already_exists(exc.value)
    later = api.create(STAGE, "ns", stage("t"))
    assert later["metadata"]["creationTimestamp"] > meta["creationTimestamp"]
    named = api.create(ANALYSIS_RUN, "ns", {"metadata": {"generateName": "run-"}})
    assert named["metadata"]["name"].startswith("run-")
    with pytest.raises(ApiException) as exc:
        api.create(STAGE, "ns", {"metadata": {"name": "u", "resourceVersion": "3"}})
    assert exc.value.status == 500  # "resourceVersion should not be set on objects ..."


def test_replace_checks_the_resource_version_and_keeps_status_apart() -> None:
    api = FakeApi()
    current = api.create(STAGE, "ns", stage())
    api.patch(STAGE, "ns", "s", {"status": {"phase": "Healthy"}}, subresource="status")
    with pytest.raises(ApiException) as exc:
        api.replace(STAGE, "ns", "s", current)  # stale: the status write came in between
    assert is_conflict(exc.value) and reason_of(exc.value) == "Conflict"
    fresh = api.get(STAGE, "ns", "s")
    assert fresh is not None
    fresh["spec"] = {"x": 2}
    fresh["status"] = {"phase": "ignored by the main resource"}
    replaced = api.replace(STAGE, "ns", "s", fresh)
    assert replaced["status"] == {"phase": "Healthy"}
    assert replaced["metadata"]["generation"] == 2  # spec changed
    relabelled = api.patch(STAGE, "ns", "s", {"metadata": {"labels": {"a": "b"}}})
    assert relabelled["metadata"]["generation"] == 2  # metadata is not spec
    unconditional = {**relabelled, "metadata": {**relabelled["metadata"]}}
    del unconditional["metadata"]["resourceVersion"]
    api.replace(STAGE, "ns", "s", unconditional)  # no resourceVersion: no precondition
    with pytest.raises(ApiException) as exc:
        api.replace(STAGE, "ns", "gone", stage("gone"))
    assert status(exc) == (404, "NotFound")


def test_a_write_that_changes_nothing_is_not_a_change() -> None:
    api = FakeApi()
    created = api.create(STAGE, "ns", stage())
    again = api.patch(STAGE, "ns", "s", {"spec": {"x": 1}})
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


def test_status_subresource_only_where_the_crd_has_one() -> None:
    api = FakeApi()
    api.create(ANALYSIS_RUN, "ns", {"metadata": {"name": "r"}, "status": {"phase": "Running"}})
    assert api.get(ANALYSIS_RUN, "ns", "r")["status"] == {"phase": "Running"}  # type: ignore[index]
    with pytest.raises(ApiException) as exc:
        api.patch(ANALYSIS_RUN, "ns", "r", {"status": {}}, subresource="status")
    assert exc.value.status == 404


def test_merge_and_json_patches() -> None:
    api = FakeApi()
    api.create(CONFIG_MAP, "ns", {"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}})
    merged = api.patch(CONFIG_MAP, "ns", "c", {"data": {"a": None, "c": "3"}})
    assert merged["data"] == {"b": "2", "c": "3"}  # null removes (RFC 7386)
    assert "generation" not in merged["metadata"]  # ConfigMaps have none
    patched = api.patch(CONFIG_MAP, "ns", "c", [
        {"op": "test", "path": "/data/b", "value": "2"},
        {"op": "remove", "path": "/data/b"},
        {"op": "add", "path": "/metadata/annotations", "value": {"x~y/z": "1"}},
        {"op": "replace", "path": "/metadata/annotations/x~0y~1z", "value": "2"},
    ], content_type=JSON_PATCH)
    assert patched["data"] == {"c": "3"}
    assert patched["metadata"]["annotations"] == {"x~y/z": "2"}
    moved = api.patch(CONFIG_MAP, "ns", "c", [
        {"op": "copy", "from": "/data/c", "path": "/data/d"},
        {"op": "move", "from": "/data/c", "path": "/data/e"},
    ], content_type=JSON_PATCH)
    assert moved["data"] == {"d": "3", "e": "3"}
    for ops in ([{"op": "test", "path": "/data/d", "value": "other"}],
                [{"op": "remove", "path": "/data/missing"}],
                [{"op": "move", "from": "/data/missing", "path": "/data/f"}],
                [{"op": "merge", "path": "/data/d", "value": "4"}]):
        with pytest.raises(ApiException) as exc:
            api.patch(CONFIG_MAP, "ns", "c", ops, content_type=JSON_PATCH)
        assert status(exc) == (422, "Invalid")
    assert api.get(CONFIG_MAP, "ns", "c")["data"] == {"d": "3", "e": "3"}  # type: ignore[index]
    with pytest.raises(ApiException) as exc:
        api.patch(CONFIG_MAP, "ns", "c", {"metadata": {"resourceVersion": "1"}})
    assert is_conflict(exc.value)


def test_a_json_patchs_values_are_stored_not_shared() -> None:
    """The API server stores what a patch said when it came: changing the patch's
    value afterwards changes neither the stored object nor what the call returned."""
    api = FakeApi()
    api.create(CONFIG_MAP, "ns", {"metadata": {"name": "c"}, "data": {"a": "1"}})
    labels = {"team": "a"}
    patched = api.patch(CONFIG_MAP, "ns", "c", [
        {"op": "add", "path": "/metadata/labels", "value": labels},
    ], content_type=JSON_PATCH)
    labels["team"] = "b"
    assert patched["metadata"]["labels"] == {"team": "a"}
    assert api.get(CONFIG_MAP, "ns", "c")["metadata"]["labels"] == {"team": "a"}  # type: ignore[index]


def test_server_side_apply_owns_removes_and_conflicts() -> None:
    api = FakeApi()
    body = objects.config_map("c", namespace="ns", data={"a": "1", "b": "2"})
    created = api.patch(CONFIG_MAP, "ns", "c", body, content_type=APPLY_PATCH,
                        field_manager="rollgate", force=True)
    [entry] = created["metadata"]["managedFields"]
    assert entry["manager"] == "rollgate" and entry["operation"] == "Apply"
    assert entry["fieldsV1"] == {"f:data": {"f:a": {}, "f:b": {}}}
    api.patch(CONFIG_MAP, "ns", "c", {"data": {"mine": "x"}})  # someone else's merge patch
    applied = api.patch(CONFIG_MAP, "ns", "c", {**body, "data": {"a": "1"}},
                        content_type=APPLY_PATCH, field_manager="rollgate")
    assert applied["data"] == {"a": "1", "mine": "x"}  # b was ours and is left out: gone
    other = {**body, "data": {"a": "changed"}}
    with pytest.raises(ApiException) as exc:
        api.patch(CONFIG_MAP, "ns", "c", other, content_type=APPLY_PATCH, field_manager="op")
    assert exc.value.status == 409
    forced = api.patch(CONFIG_MAP, "ns", "c", other, content_type=APPLY_PATCH,
                       field_manager="op", force=True)
    assert forced["data"]["a"] == "changed"
    owners = {e["manager"]: e["fieldsV1"] for e in forced["metadata"]["managedFields"]}
    assert owners == {"op": {"f:data": {"f:a": {}}}}  # rollgate lost a, its only field


def test_delete_with_finalizers_waits_for_the_last_one() -> None:
    api = FakeApi()
    api.create(STAGE, "ns", stage(metadata={"name": "s", "finalizers": ["a", "b"]}))
    api.delete(STAGE, "ns", "s")
    deleting = api.get(STAGE, "ns", "s")
    assert deleting is not None and deleting["metadata"]["deletionTimestamp"]
    with pytest.raises(ApiException) as exc:
        api.patch(STAGE, "ns", "s", {"metadata": {"finalizers": ["a", "b", "c"]}})
    assert exc.value.status == 422
    api.patch(STAGE, "ns", "s", {"metadata": {"finalizers": ["b"]}})
    assert api.get(STAGE, "ns", "s") is not None
    api.patch(STAGE, "ns", "s", {"metadata": {"finalizers": None}})
    assert api.get(STAGE, "ns", "s") is None
    api.delete(STAGE, "ns", "s")  # a missing object: no error, as Rest.delete


def test_list_selectors_and_pages() -> None:
    api = FakeApi()
    for ns, name, labels in (("a", "x", {"app": "web"}), ("a", "y", {"app": "db"}),
                             ("b", "z", {"app": "web", "tier": "1"})):
        api.create(ANALYSIS_RUN, ns, {"metadata": {"name": name, "labels": labels}})

    def names(**query: Any) -> list[str]:
        return [i["metadata"]["name"] for i in api.list(ANALYSIS_RUN, **query)["items"]]

    assert names() == ["x", "y", "z"]
    assert [i["metadata"]["name"] for i in api.list(ANALYSIS_RUN, "a")["items"]] == ["x", "y"]
    assert names(labelSelector="app=web") == ["x", "z"]
    assert names(labelSelector="app!=web") == ["y"]
    assert names(labelSelector="tier") == ["z"] and names(labelSelector="!tier") == ["x", "y"]
    assert names(labelSelector="app in (db, cache)") == ["y"]
    assert names(labelSelector="app notin (db),tier") == ["z"]
    assert names(fieldSelector="metadata.name=y") == ["y"]
    assert names(fieldSelector="metadata.namespace!=a") == ["z"]
    page = api.list(ANALYSIS_RUN, limit=2)
    assert len(page["items"]) == 2 and "kind" not in page["items"][0]  # as built-in lists
    rest = api.list(ANALYSIS_RUN, limit=2, **{"continue": page["metadata"]["continue"]})
    assert [i["metadata"]["name"] for i in rest["items"]] == ["z"]
    assert "continue" not in rest["metadata"]
    assert page["metadata"]["resourceVersion"] == api.resource_version
    api.create(CLUSTER_ANALYSIS_TEMPLATE, "ignored", {"metadata": {"name": "t"}})
    assert api.names(CLUSTER_ANALYSIS_TEMPLATE, "any") == ["t"]


def test_watch_replays_changes_filters_and_expires() -> None:
    api = FakeApi()
    api.create(CONFIG_MAP, "ns", {"metadata": {"name": "keep"}})
    start = api.resource_version
    api.patch(CONFIG_MAP, "ns", "keep", {"data": {"a": "1"}})
    api.create(CONFIG_MAP, "other", {"metadata": {"name": "elsewhere"}})
    api.delete(CONFIG_MAP, "ns", "keep")
    events = list(api.watch(CONFIG_MAP, "ns", resource_version=start, timeout_seconds=1))
    assert [e["type"] for e in events] == ["MODIFIED", "DELETED", "BOOKMARK"]
    assert events[-1]["object"]["metadata"]["resourceVersion"] == api.resource_version
    everything = list(api.watch(CONFIG_MAP, None, resource_version="", timeout_seconds=1))
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in everything] == [
        ("ADDED", "elsewhere"), ("BOOKMARK", None)]
    named = CONFIG_MAP.named("elsewhere")
    assert len(list(api.watch(named, None, resource_version=start, timeout_seconds=1))) == 2
    api.compact()
    [gone] = api.watch(CONFIG_MAP, None, resource_version=start, timeout_seconds=1)
    assert gone["type"] == "ERROR" and gone["object"]["code"] == 410


def test_a_followed_watch_waits_for_changes() -> None:
    api = FakeApi(follow=True)
    start = api.resource_version
    seen: list[str] = []
    got_one = threading.Event()

    def watch() -> None:
        for event in api.watch(CONFIG_MAP, "ns", resource_version=start, timeout_seconds=30):
            seen.append(event["type"])
            got_one.set()

    thread = threading.Thread(target=watch)
    thread.start()
    api.create(CONFIG_MAP, "ns", {"metadata": {"name": "c"}})
    assert got_one.wait(10)
    api.close_watches()
    thread.join(10)
    assert seen == ["ADDED", "BOOKMARK"]


def test_interceptors_fail_delegate_and_are_recorded() -> None:
    seen: list[str] = []

    def get(client: Any, resource: Any, namespace: str, name: str, **kwargs: Any) -> Any:
        seen.append(name)
        return client.get(resource, namespace, name, **kwargs)

    api = FakeApi(interceptors=Interceptors(get=get))
    api.create(STAGE, "ns", stage())
    api.fail("patch", 503, when=lambda r: r.options.get("subresource") == "status")
    api.patch(STAGE, "ns", "s", {"spec": {"x": 5}})  # not the status: goes through
    with pytest.raises(ApiException) as exc:
        api.patch(STAGE, "ns", "s", {"status": {"a": 1}}, subresource="status")
    assert exc.value.status == 503
    api.patch(STAGE, "ns", "s", {"status": {"a": 1}}, subresource="status")  # once only
    assert api.get(STAGE, "ns", "s")["status"] == {"a": 1}  # type: ignore[index]
    assert seen == ["s"]
    assert api.writes() == ["create stages/s", "patch stages/s", "patch stages/s/status"]
    failed = [r for r in api.requests if r.error is not None]
    assert [str(r) for r in failed] == ["patch stages/s/status"]
    api.fail("get", api_error(0), times=2)
    for _ in range(2):
        with pytest.raises(ApiException):
            api.get(STAGE, "ns", "s")
    assert api.get(STAGE, "ns", "s") is not None
    assert seen == ["s", "s"]  # the hook before fail() still runs after it


def test_rest_over_the_fake_speaks_http() -> None:
    api = FakeApi()
    rest = api.rest()
    rest.create(DEPLOYMENT, "ns", {"metadata": {"name": "d"}, "spec": {"replicas": 1}})
    assert rest.get(DEPLOYMENT, "ns", "d")["spec"] == {"replicas": 1}  # type: ignore[index]
    assert rest.get(DEPLOYMENT, "ns", "missing") is None  # a 404 on the wire
    rest.patch(DEPLOYMENT, "ns", "d", {"status": {"ready": 1}}, subresource="status")
    rest.delete(DEPLOYMENT, "ns", "d")
    rest.delete(DEPLOYMENT, "ns", "d")  # 404, swallowed by Rest
    assert api.wire[0][:2] == ("POST", "/apis/apps/v1/namespaces/ns/deployments")
    assert api.wire[3][:2] == ("PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/status")
    assert [str(r) for r in api.requests] == [
        "create deployments/d", "get deployments/d", "get deployments/missing",
        "patch deployments/d/status", "delete deployments/d"]


def test_a_live_cache_follows_the_fake_and_a_snapshot_lags() -> None:
    api = FakeApi()
    live = api.cache(ROLLOUT_MANAGER)
    snapshot = api.cache(ROLLOUT_MANAGER, live=False)
    api.create(ROLLOUT_MANAGER, "ns", {"metadata": {"name": "rm"}})
    assert live.get(ROLLOUT_MANAGER, "ns", "rm") == api.get(ROLLOUT_MANAGER, "ns", "rm")
    assert snapshot.get(ROLLOUT_MANAGER, "ns", "rm") is None
    api.remove(ROLLOUT_MANAGER, "ns", "rm")
    assert live.list(ROLLOUT_MANAGER) == []
    stores = api.stores(CONFIG_MAP.named("one"))  # a named resource holds only its name
    api.create(CONFIG_MAP, "ns", {"metadata": {"name": "one"}})
    api.create(CONFIG_MAP, "ns", {"metadata": {"name": "two"}})
    assert [o["metadata"]["name"] for o in stores[CONFIG_MAP.named("one")].list()] == ["one"]


def test_context_caches_what_the_controller_watches_with_its_indexes() -> None:
    class Controller:
        watches = (type("W", (), {"resource": STAGE, "mapper": enqueue_self})(),)
        indexes = {STAGE: {"by-x": lambda obj: [str(obj["spec"]["x"])]}}

    api = FakeApi()
    options = RuntimeOptions(workers=1)
    ctx = context(api, controller=Controller(), options=options)
    api.create(STAGE, "ns", stage())
    assert [o["metadata"]["name"] for o in ctx.cache.by_index(STAGE, "by-x", "1")] == ["s"]
    with pytest.raises(KeyError):
        ctx.cache.list(CONFIG_MAP)  # not watched: not cached
    assert ctx.client is api and ctx.options is options
    assert isinstance(ctx.events, Events)
    ctx.events.emit(stage(), type="Warning", reason="R", message="m")
    assert ctx.events.reasons() == ["R"] and ctx.events.emitted == [("Warning", "R", "m")]


def test_a_labelled_resource_selects_in_lists_watches_and_caches() -> None:
    """An informer of ``Resource.labelled`` sends ``labelSelector`` on its list and
    watch: the API server answers with the matching objects only, and an object whose
    labels stop matching is DELETED for that watch."""
    api = FakeApi()
    shard = STAGE.labelled("shard=a")
    unsharded = STAGE.labelled("!shard")
    cache = api.cache(shard, unsharded)
    start = api.resource_version
    api.create(STAGE, "ns", stage("a", metadata={"name": "a", "labels": {"shard": "a"}}))
    api.create(STAGE, "ns", stage("b", metadata={"name": "b", "labels": {"shard": "b"}}))
    api.create(STAGE, "ns", stage("none"))
    assert [i["metadata"]["name"] for i in api.list(shard)["items"]] == ["a"]
    assert [i["metadata"]["name"] for i in api.list(unsharded, "ns")["items"]] == ["none"]
    assert [o["metadata"]["name"] for o in cache.list(shard)] == ["a"]
    assert [o["metadata"]["name"] for o in cache.list(unsharded)] == ["none"]
    api.patch(STAGE, "ns", "a", {"metadata": {"labels": {"shard": "b"}}})
    assert cache.list(shard) == []
    events = list(api.watch(shard, "ns", resource_version=start, timeout_seconds=1))
    assert [(e["type"], e["object"]["metadata"].get("name")) for e in events] == [
        ("ADDED", "a"), ("DELETED", "a"), ("BOOKMARK", None)]
    rest = api.rest()
    assert rest.list(unsharded, "ns")["items"][0]["metadata"]["name"] == "none"
    assert api.wire[-1][2]["labelSelector"] == "!shard"


def test_a_held_cache_lags_until_delivered() -> None:
    """``hold``: the watch behind a live cache has not delivered yet; reads and writes
    through the API see the change, the cache the version before, until ``deliver``."""
    api = FakeApi()
    cache = api.cache(ROLLOUT_MANAGER)
    created = api.create(ROLLOUT_MANAGER, "ns", {"metadata": {"name": "rm"}})
    api.hold()
    api.patch(ROLLOUT_MANAGER, "ns", "rm", {"status": {"phase": "Available"}},
              subresource="status")
    api.put(ROLLOUT_MANAGER, {"metadata": {"name": "new", "namespace": "ns"}})
    assert cache.get(ROLLOUT_MANAGER, "ns", "rm") == created  # as before the hold
    assert cache.get(ROLLOUT_MANAGER, "ns", "new") is None
    assert api.get(ROLLOUT_MANAGER, "ns", "rm")["status"] == {  # type: ignore[index]
        "phase": "Available"}
    stale = cache.get(ROLLOUT_MANAGER, "ns", "rm")
    with pytest.raises(ApiException) as exc:  # a write from the lagging view: refused
        api.patch(ROLLOUT_MANAGER, "ns", "rm", {"metadata": {
            "resourceVersion": stale["metadata"]["resourceVersion"]},  # type: ignore[index]
            "status": {"phase": "Pending"}}, subresource="status")
    assert is_conflict(exc.value)
    api.deliver()
    assert cache.get(ROLLOUT_MANAGER, "ns", "rm") == api.get(ROLLOUT_MANAGER, "ns", "rm")
    assert api.names(ROLLOUT_MANAGER) == sorted(
        o["metadata"]["name"] for o in cache.list(ROLLOUT_MANAGER)) == ["new", "rm"]
    api.remove(ROLLOUT_MANAGER, "ns", "new")  # following again
    assert cache.get(ROLLOUT_MANAGER, "ns", "new") is None


def test_a_never_hook_fails_the_test_whatever_the_code_catches() -> None:
    api = FakeApi(interceptors=Interceptors(delete=never("must not delete")))
    api.create(STAGE, "ns", stage())
    with pytest.raises(AssertionError, match="must not delete"), contextlib.suppress(
            ApiException):  # what a controller catches
        api.delete(STAGE, "ns", "s")
    assert api.names(STAGE, "ns") == ["s"] and api.writes() == ["create stages/s"]
