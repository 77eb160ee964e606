"""What the cache keeps (reconciler/runtime/cache.py ``Store.transform``, manager.py
``cache_transforms``, reconciler/verification/slim.py ``strip_metadata``): the informer
stores, and hands its handler, objects as the store's transform makes them, for the list
and for every watch event; the writes a controller observes go through the same
transform; a kind with no transform is stored whole.

The informer talks to a real ``kubekit.rest.Rest`` answered by the fake API, as in
test_runtime_informer_field_selector.py.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from typing import Any

from kubekit.kinds import ANALYSIS_RUN, CONFIG_MAP, FREIGHT, STAGE, Resource
from reconciler.runtime.cache import CacheView, Store
from reconciler.runtime.informer import Informer
from reconciler.runtime.manager import cache_transforms
from reconciler.runtime.types import Watch
from reconciler.runtime.watches import enqueue_self
from reconciler.verification import slim
from reconciler.verification.packed import Packed
from testkit.fakeapi import FakeApi

MANAGED = [{"manager": "kubectl", "operation": "Apply", "fieldsV1": {"f:data": {}}}]


def cm(name: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "managedFields": MANAGED,
                         "annotations": {slim.LAST_APPLIED: "{...}", "keep": "me"}},
            "data": data}


def test_strip_metadata_drops_the_bookkeeping_and_leaves_the_input_alone() -> None:
    obj = cm("a", k="v")
    before = copy.deepcopy(obj)
    slimmed = slim.strip_metadata(obj)
    assert obj == before
    assert slimmed == {"metadata": {"name": "a", "namespace": "ns",
                                    "annotations": {"keep": "me"}}, "data": {"k": "v"}}
    assert slimmed["data"] is obj["data"]  # shared, not copied
    plain = {"metadata": {"name": "b"}}
    assert slim.strip_metadata(plain) is plain


def keep_data_only(obj: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": slim.strip_metadata(obj)["metadata"],
            "data": {"kept": (obj.get("data") or {}).get("k")}}


def test_a_store_without_a_transform_keeps_objects_whole() -> None:
    """The plugins controller reads ConfigMaps' managedFields (which keys rollgate owns):
    a kind no controller declares a transform for is stored as received."""
    store = Store(CONFIG_MAP)
    obj = cm("a", k="v")
    assert store.transform(obj) is obj


def test_the_informer_stores_and_hands_on_transformed_objects_from_list_and_watch() -> None:
    api = FakeApi()
    api.put(CONFIG_MAP, cm("listed", k="1", big="x" * 1000))
    stop = threading.Event()

    def one_watch(client: Any, resource: Resource, namespace: str | None,
                  **kwargs: Any) -> Iterator[dict[str, Any]]:
        client.create(CONFIG_MAP, "ns", cm("watched", k="2", big="y" * 1000))
        yield from client.watch(resource, namespace, **kwargs)
        stop.set()

    api.interceptors.watch = one_watch
    seen: list[dict[str, Any]] = []
    store = Store(CONFIG_MAP, keep_data_only)
    informer = Informer(rest=api.rest(), resource=CONFIG_MAP, namespace=None, store=store,
                        handler=lambda etype, old, new: seen.append(new), stop=stop)
    informer._run()
    for name, value in (("listed", "1"), ("watched", "2")):
        stored = store.get("ns", name)
        assert stored is not None
        assert stored["data"] == {"kept": value}
        assert "managedFields" not in stored["metadata"]
        assert stored["metadata"]["annotations"] == {"keep": "me"}
    assert [o["data"] for o in seen] == [{"kept": "1"}, {"kept": "2"}]


def test_an_observed_write_is_stored_in_the_same_shape() -> None:
    store = Store(CONFIG_MAP, keep_data_only)
    CacheView({CONFIG_MAP: store}).observe(CONFIG_MAP, {**cm("w", k="3"), "metadata": {
        **cm("w")["metadata"], "resourceVersion": "5"}})
    assert store.get("ns", "w") == {"metadata": {"name": "w", "namespace": "ns",
                                                 "annotations": {"keep": "me"},
                                                 "resourceVersion": "5"},
                                    "data": {"kept": "3"}}


class _Controller:
    def __init__(self, watches: tuple[Watch, ...], transforms: dict[Resource, Any]) -> None:
        self.watches, self.transforms = watches, transforms


def test_a_resource_is_transformed_only_when_every_controller_watching_it_agrees() -> None:
    observe = _Controller((Watch(STAGE, enqueue_self), Watch(FREIGHT, enqueue_self)),
                          {STAGE: slim.observed_stage, FREIGHT: slim.freight})
    other = _Controller((Watch(FREIGHT, enqueue_self), Watch(ANALYSIS_RUN, enqueue_self)),
                        {FREIGHT: slim.freight})
    unaware = _Controller((Watch(ANALYSIS_RUN, enqueue_self),), {})
    chosen = cache_transforms([observe, other, unaware],  # type: ignore[list-item]
                              [STAGE, FREIGHT, ANALYSIS_RUN])
    assert chosen == {STAGE: slim.observed_stage, FREIGHT: slim.freight, ANALYSIS_RUN: None}
    engine = _Controller((Watch(STAGE, enqueue_self),), {STAGE: slim.engine_stage})
    assert cache_transforms([observe, engine], [STAGE])[STAGE] is None  # type: ignore[list-item]


def test_packed_reads_as_the_list_it_was_made_from() -> None:
    items = [{"analysisRun": {"name": "r1"}}, {"analysisRun": {"name": "r2"}}]
    packed = Packed(items)
    assert isinstance(packed, list)
    assert list(packed) == items and packed == items and len(packed) == 2
    assert packed[1] == items[1] and packed[-1:] == items[-1:]
    assert bool(packed) and not Packed([])
    assert copy.deepcopy(packed) == items and type(copy.deepcopy(packed)) is list
    next(iter(packed))["analysisRun"]["name"] = "changed"  # a reader's copy only
    assert packed == items


def test_packed_lists_compare_by_value_and_equal_bytes_without_decoding() -> None:
    items = [{"id": "a", "phase": "Successful"}]
    same, other = Packed(items), Packed([{"id": "b"}])
    reordered = Packed([{"phase": "Successful", "id": "a"}])  # other bytes, equal values
    decodes = []
    plain = Packed.unpacked

    def counted(self: Packed) -> list[object]:
        decodes.append(self)
        return plain(self)

    Packed.unpacked = counted  # type: ignore[method-assign]
    try:
        assert Packed(items) == same and not decodes  # the same bytes: no decoding
        assert Packed(items) != other and Packed(items) == reordered and decodes
    finally:
        Packed.unpacked = plain  # type: ignore[method-assign]


def test_an_observe_pass_reads_the_history_decoded_once_and_leaves_the_cache_packed() -> None:
    stage = slim.observed_stage({"metadata": {"name": "s"}, "status": {"freightHistory": [
        {"id": "c1", "items": {"Warehouse/w": {"name": "f1"}}, "verificationHistory": [
            {"id": "v1", "phase": "Running", "analysisRun": {"name": "r1"}}]}]}})
    packed = stage["status"]["freightHistory"]
    decoded = slim.decoded(stage)
    assert type(decoded["status"]["freightHistory"]) is list
    assert decoded["status"]["freightHistory"] == packed
    assert stage["status"]["freightHistory"] is packed  # the cached object is unchanged
    plain = {"metadata": {"name": "s"}, "status": {"freightHistory": []}}
    assert slim.decoded(plain) is plain
