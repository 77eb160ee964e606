"""The informer's back-off starts afresh once the API server answers again:
after an outage, a successful list resets it, so the next outage is retried from the
initial delay, not from where the last one left off."""

from __future__ import annotations

import threading
from typing import Any

from kubernetes.client.exceptions import ApiException

from kubekit.kinds import CONFIG_MAP
from reconciler.runtime import informer as informer_module
from reconciler.runtime.cache import Store
from reconciler.runtime.informer import RETRY_BASE, Informer
from testkit.fakeapi import FakeApi


class Waits(threading.Event):
    """The informer's stop event, recording each retry delay instead of sleeping."""

    def __init__(self, stop_after: int) -> None:
        super().__init__()
        self.delays: list[float] = []
        self.stop_after = stop_after

    def wait(self, timeout: float | None = None) -> bool:
        self.delays.append(float(timeout or 0))
        if len(self.delays) >= self.stop_after:
            self.set()
        return self.is_set()


def test_each_outage_after_a_successful_list_starts_from_the_initial_delay(
        monkeypatch: Any) -> None:
    monkeypatch.setattr(informer_module, "backoff_delay",
                        lambda failures, **kw: RETRY_BASE * 2 ** (failures - 1))
    api = FakeApi()
    outages = 5
    lists_down = 4  # failed lists per outage, then one that succeeds
    script: list[str] = []
    for _ in range(outages):
        script += ["down"] * lists_down + ["up"]

    def list_hook(client: Any, *args: Any, **kwargs: Any) -> Any:
        if script and script.pop(0) == "down":
            raise ApiException(status=503, reason="restarting")
        return client.list(*args, **kwargs)

    def watch_hook(client: Any, *args: Any, **kwargs: Any) -> Any:
        # The API server goes down again right after the list: the watch fails, and the
        # informer re-lists since it is told the stream is gone.
        raise informer_module.Gone

    api.interceptors.list = list_hook
    api.interceptors.watch = watch_hook
    stop = Waits(stop_after=outages * lists_down)
    informer = Informer(rest=api.rest(), resource=CONFIG_MAP, namespace=None,
                        store=Store(CONFIG_MAP), handler=lambda *a: None, stop=stop)
    informer._run()
    per_outage = [stop.delays[i:i + lists_down] for i in range(0, len(stop.delays), lists_down)]
    assert len(per_outage) == outages
    for delays in per_outage:
        assert delays == [RETRY_BASE * 2 ** n for n in range(lists_down)]


def test_a_successful_list_resets_the_failure_count() -> None:
    api = FakeApi()
    api.fail("list", 503, times=3)
    stop = threading.Event()

    def watch_then_stop(client: Any, *args: Any, **kwargs: Any) -> Any:
        stop.set()
        return iter(())

    api.interceptors.watch = watch_then_stop
    informer = Informer(rest=api.rest(), resource=CONFIG_MAP, namespace=None,
                        store=Store(CONFIG_MAP), handler=lambda *a: None, stop=stop)
    informer.stop.wait = lambda timeout=None: False  # type: ignore[method-assign]
    informer._run()
    assert informer.failures == 0 and informer.synced.is_set()


def test_a_quiet_watch_the_server_answered_resets_the_failure_count(
        monkeypatch: Any) -> None:
    """A watch of a kind nothing changes carries no event for minutes; once the server
    has answered it, the next failure (the stream cut by an outage) starts the back-off
    afresh. With the reset at the first event only, the count grew from one outage to
    the next (tests/faults/test_backoff.py saw retries of 15 s after three restarts)."""
    monkeypatch.setattr(informer_module, "backoff_delay",
                        lambda failures, **kw: RETRY_BASE * 2 ** (failures - 1))
    api = FakeApi()

    def answered_then_cut(client: Any, *args: Any, **kwargs: Any) -> Any:
        raise ApiException(status=0, reason="ProtocolError: connection reset")
        yield  # a generator: the server answered the request, the stream then broke

    api.interceptors.watch = answered_then_cut
    stop = Waits(stop_after=4)
    informer = Informer(rest=api.rest(), resource=CONFIG_MAP, namespace=None,
                        store=Store(CONFIG_MAP), handler=lambda *a: None, stop=stop)
    informer._run()
    assert stop.delays == [RETRY_BASE] * 4
