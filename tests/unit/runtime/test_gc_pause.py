"""The cyclic collector paused while informers list (reconciler/runtime/gc_pause.py)."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kubekit.kinds import CONFIG_MAP, Resource
from reconciler.runtime.cache import Store
from reconciler.runtime.gc_pause import collection_paused
from reconciler.runtime.informer import Informer
from testkit.fakeapi import FakeApi


@pytest.fixture(autouse=True)
def collector_enabled() -> Iterator[None]:
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_collection_resumes_only_when_the_last_of_overlapping_lists_ends() -> None:
    first_in, second_done = threading.Event(), threading.Event()
    seen: list[bool] = []

    def first() -> None:
        with collection_paused():
            first_in.set()
            second_done.wait(5)
            seen.append(gc.isenabled())  # the second list ended; this one has not

    thread = threading.Thread(target=first)
    thread.start()
    first_in.wait(5)
    with collection_paused():
        seen.append(gc.isenabled())
    second_done.set()
    thread.join(5)
    assert seen == [False, False]
    assert gc.isenabled()


def test_a_collector_disabled_before_stays_disabled() -> None:
    gc.disable()
    with collection_paused():
        pass
    assert not gc.isenabled()


def test_a_failed_list_resumes_collection() -> None:
    with pytest.raises(RuntimeError), collection_paused():
        raise RuntimeError("the API server went away")
    assert gc.isenabled()


def test_the_informer_lists_with_collection_paused_and_watches_with_it_running() -> None:
    api = FakeApi()
    api.put(CONFIG_MAP, {"metadata": {"name": "a", "namespace": "ns"}, "data": {}})
    stop = threading.Event()
    during: dict[str, bool] = {}
    rest = api.rest()
    plain_list = rest.list

    def list_(resource: Resource, namespace: str | None = None, **query: Any) -> Any:
        during["list"] = gc.isenabled()
        return plain_list(resource, namespace, **query)

    def one_watch(client: Any, resource: Resource, namespace: str | None,
                  **kwargs: Any) -> Iterator[dict[str, Any]]:
        during["watch"] = gc.isenabled()
        stop.set()
        yield from ()

    rest.list = list_  # type: ignore[method-assign]
    api.interceptors.watch = one_watch
    informer = Informer(rest=rest, resource=CONFIG_MAP, namespace=None,
                        store=Store(CONFIG_MAP), handler=lambda etype, old, new: None,
                        stop=stop)
    informer._run()
    assert during == {"list": False, "watch": True}
    assert informer.synced.is_set()
