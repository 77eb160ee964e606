"""Informers narrowed by a field selector (``Resource.named``).

The requests are checked where they leave ``Rest`` (its ``raw``), so the test covers
what the API server would receive for both the list and the watch.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from kubekit.kinds import CONFIG_MAP, DEPLOYMENT, ROLLOUT_MANAGER
from kubekit.rest import Rest
from reconciler.controllers import load
from reconciler.runtime.cache import CacheView, Store
from reconciler.runtime.informer import Informer
from reconciler.runtime.manager import Manager


class _Stream:
    """The part of a urllib3 response that ``Rest.watch`` reads."""

    def __init__(self, events: list[dict[str, Any]], stop: threading.Event) -> None:
        self.body = b"".join(json.dumps(e).encode() + b"\n" for e in events)
        self.stop = stop

    def stream(self, amt: int, decode_content: bool) -> Iterator[bytes]:
        yield self.body
        self.stop.set()  # the stream has ended: stop the informer's loop

    def release_conn(self) -> None:
        pass


class RecordingRest(Rest):
    """A ``Rest`` whose requests are recorded and answered from a script: one list
    page, then one watch stream; the informer is stopped when the stream ends."""

    def __init__(self, page: dict[str, Any], events: list[dict[str, Any]],
                 stop: threading.Event) -> None:
        super().__init__(api=None)  # type: ignore[arg-type]
        self.page = page
        self.events = events
        self.stop = stop
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def raw(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
            **kwargs: Any) -> Any:
        # Rest.raw leaves out None values; record what would be sent.
        sent = {k: v for k, v in (query or {}).items() if v is not None}
        self.requests.append((path, sent))
        if sent.get("watch"):
            return _Stream(self.events, self.stop)
        return self.page


def run(resource: Any, page: dict[str, Any], events: list[dict[str, Any]]
        ) -> tuple[RecordingRest, Store]:
    stop = threading.Event()
    rest = RecordingRest(page, events, stop)
    store = Store(resource)
    informer = Informer(rest=rest, resource=resource, namespace=None, store=store,
                        handler=lambda etype, old, new: None, stop=stop)
    informer._run()
    return rest, store


def cm(name: str, rv: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}}


def test_named_resource_is_listed_and_watched_with_a_field_selector() -> None:
    selected = CONFIG_MAP.named("argo-rollouts-config")
    rest, store = run(
        selected,
        {"metadata": {"resourceVersion": "10"}, "items": [cm("argo-rollouts-config", "9")]},
        [{"type": "MODIFIED", "object": cm("argo-rollouts-config", "11")}],
    )
    (list_path, list_query), (watch_path, watch_query) = rest.requests
    assert list_path == watch_path == "/api/v1/configmaps"
    assert list_query["fieldSelector"] == "metadata.name=argo-rollouts-config"
    assert watch_query["fieldSelector"] == "metadata.name=argo-rollouts-config"
    assert watch_query["resourceVersion"] == "10"  # the watch is otherwise unchanged
    assert store.get("ns", "argo-rollouts-config")["metadata"]["resourceVersion"] == "11"  # type: ignore[index]


def test_unnamed_resource_sends_no_field_selector() -> None:
    rest, _ = run(CONFIG_MAP, {"metadata": {"resourceVersion": "1"}, "items": []}, [])
    assert all("fieldSelector" not in query for _, query in rest.requests)
    assert len(rest.requests) == 2


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
    options = {"leader_elect": False, "rollouts_deployment": "my-rollouts"}
    manager = Manager(api=None, controllers=[load("rollout-plugins", options)], options=options)
    by_plural = {i.resource.plural: i.resource for i in manager.informers}
    assert by_plural["deployments"] == DEPLOYMENT.named("my-rollouts")
    assert by_plural["configmaps"] == CONFIG_MAP.named("argo-rollouts-config")
    assert by_plural["rolloutmanagers"] == ROLLOUT_MANAGER
    assert len(manager.informers) == 3
