"""Informers narrowed by a field selector (``Resource.named``) or a label selector
(``Resource.labelled``).

The informer talks to a real ``kubekit.rest.Rest`` whose requests are answered by the
fake API (``FakeApi.rest()``) at the HTTP level, so the test sees what the API server
would receive for both the list and the watch (``FakeApi.wire``), and the fake answers
them as the server would: only the selected objects.

The expected paths, selectors and messages are spelled out, not built from
schemas.kinds: they state what the API server and users see, apart from the code under
test.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kubekit.kinds import CONFIG_MAP, DEPLOYMENT, ROLLOUT_MANAGER, STAGE, Resource
from reconciler.controllers import load
from reconciler.options import ReconcilerOptions
from reconciler.plugins.options import PluginsOptions
from reconciler.runtime.cache import CacheView, Store
from reconciler.runtime.informer import Informer
from reconciler.runtime.manager import Manager
from reconciler.runtime.options import RuntimeOptions
from reconciler.verification.shards import LABEL_SHARD
from testkit.fakeapi import FakeApi


def run(resource: Resource, objects: list[dict[str, Any]],
        during_watch: Callable[[Any], None] = lambda client: None, *,
        kind: Resource = CONFIG_MAP) -> tuple[FakeApi, Store]:
    """An informer of ``resource`` over ``Rest`` and the fake holding ``objects``: one
    list, one watch (``during_watch(client)`` writes first); the informer is stopped
    when the watch stream ends."""
    api = FakeApi()
    for obj in objects:
        api.put(kind, obj)
    stop = threading.Event()

    def one_watch(client: Any, resource: Resource, namespace: str | None,
                  **kwargs: Any) -> Iterator[dict[str, Any]]:
        during_watch(client)
        yield from client.watch(resource, namespace, **kwargs)
        stop.set()  # the stream has ended: stop the informer's loop

    api.interceptors.watch = one_watch
    store = Store(resource)
    informer = Informer(rest=api.rest(), resource=resource, namespace=None, store=store,
                        handler=lambda etype, old, new: None, stop=stop)
    informer._run()
    return api, store


def cm(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns"}, "data": {}}


def touch(name: str) -> Callable[[Any], None]:
    return lambda client: client.patch(CONFIG_MAP, "ns", name, {"data": {"changed": "yes"}})


def test_named_resource_is_listed_and_watched_with_a_field_selector() -> None:
    selected = CONFIG_MAP.named("argo-rollouts-config")
    listed: list[str] = []

    def change_both(client: Any) -> None:
        listed.append(client.resource_version)
        touch("argo-rollouts-config")(client)
        touch("other")(client)

    api, store = run(selected, [cm("argo-rollouts-config"), cm("other")], change_both)
    (list_method, list_path, list_query), (_, watch_path, watch_query) = api.wire
    assert list_method == "GET"
    assert list_path == watch_path == "/api/v1/configmaps"
    assert list_query["fieldSelector"] == "metadata.name=argo-rollouts-config"
    assert watch_query["fieldSelector"] == "metadata.name=argo-rollouts-config"
    assert watch_query["resourceVersion"] == listed[0]  # the watch is otherwise unchanged
    assert store.get("ns", "argo-rollouts-config") == api.get(
        CONFIG_MAP, "ns", "argo-rollouts-config")
    assert store.get("ns", "other") is None  # neither listed nor watched


def test_unnamed_resource_sends_no_field_selector() -> None:
    api, store = run(CONFIG_MAP, [cm("a")], touch("a"))
    assert all("fieldSelector" not in query for _, _, query in api.wire)
    assert len(api.wire) == 2
    assert store.get("ns", "a")["data"] == {"changed": "yes"}  # type: ignore[index]


def test_a_named_resource_is_its_own_cache() -> None:
    """Asking for all ConfigMaps when only one name is cached must fail, not answer
    from the subset."""
    selected = CONFIG_MAP.named("argo-rollouts-config")
    assert selected == CONFIG_MAP.named("argo-rollouts-config")
    assert selected != CONFIG_MAP
    assert hash(selected) == hash(CONFIG_MAP.named("argo-rollouts-config"))
    assert selected.api_version == "v1" and selected.kind == "ConfigMap"
    view = CacheView({selected: Store(selected)})
    assert view.list(selected) == []
    with pytest.raises(KeyError):
        view.list(CONFIG_MAP)


def test_manager_narrows_the_plugins_watches_to_the_flagged_names() -> None:
    options = ReconcilerOptions(runtime=RuntimeOptions(leader_elect=False),
                                plugins=PluginsOptions(rollouts_deployment="my-rollouts"))
    plugins = load("rollout-plugins", options=options)
    assert plugins is not None
    manager = Manager(api=None, controllers=[plugins], options=options.runtime)
    by_plural = {i.resource.plural: i.resource for i in manager.informers}
    assert by_plural["deployments"] == DEPLOYMENT.named("my-rollouts")
    assert by_plural["configmaps"] == CONFIG_MAP.named("argo-rollouts-config")
    assert by_plural["rolloutmanagers"] == ROLLOUT_MANAGER
    assert len(manager.informers) == 3


def test_labelled_resource_is_listed_and_watched_with_a_label_selector() -> None:
    selected = STAGE.labelled("kargo.akuity.io/shard=a")
    in_a = {"metadata": {"name": "s", "namespace": "ns", "labels": {
        LABEL_SHARD: "a"}}}
    in_b = {"metadata": {"name": "t", "namespace": "ns", "labels": {
        LABEL_SHARD: "b"}}}
    api, store = run(selected, [in_a, in_b], kind=STAGE)
    (_, list_path, list_query), (_, _, watch_query) = api.wire
    assert list_path == "/apis/kargo.akuity.io/v1alpha1/stages"
    assert list_query["labelSelector"] == watch_query["labelSelector"] == (
        "kargo.akuity.io/shard=a")
    assert "fieldSelector" not in list_query and "fieldSelector" not in watch_query
    assert store.get("ns", "s") is not None and store.get("ns", "t") is None
    assert selected != STAGE and selected.kind == "Stage"
    informer = Informer(rest=api.rest(), resource=selected, namespace=None,
                        store=Store(selected), handler=lambda etype, old, new: None,
                        stop=threading.Event())
    assert informer.name == "stages.kargo.akuity.io/*[kargo.akuity.io/shard=a]"


def test_unselected_resource_sends_no_label_selector() -> None:
    api, _ = run(STAGE, [], kind=STAGE)
    assert all("labelSelector" not in query for _, _, query in api.wire)
