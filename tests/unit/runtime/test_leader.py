"""Leader election keeps the renew deadline even when a lease request hangs.

The Lease lives in the fake API (support/testkit/fakeapi/); its get, create and replace
hooks can make requests hang until the test lets them go. No wall-clock durations are
asserted, only the order of what happened (leadership given up while the request was
still in flight).
"""

from __future__ import annotations

import threading
from typing import Any

from kubekit.kinds import LEASE
from reconciler.runtime.leader import LeaderElector, Timings, request_timeout
from testkit.fakeapi import FakeApi, Interceptors

TIMINGS = Timings(lease_duration=1.5, renew_deadline=1.0, retry_period=0.1)


class Hang:
    """Hooks that, once ``hang`` is set, hold every request until ``release`` is."""

    def __init__(self) -> None:
        self.hang = threading.Event()  # set: requests from now on block
        self.release = threading.Event()  # set: blocked requests return
        self.in_flight = 0
        self.lock = threading.Lock()

    def hook(self, verb: str) -> Any:
        def hanging(client: Any, *args: Any, **kwargs: Any) -> Any:
            if self.hang.is_set():
                with self.lock:
                    self.in_flight += 1
                self.release.wait(30)  # the test releases it; 30 s only guards a broken test
                with self.lock:
                    self.in_flight -= 1
            return getattr(client, verb)(*args, **kwargs)

        return hanging


def test_a_hung_lease_request_does_not_extend_leadership_past_the_renew_deadline():
    hang = Hang()
    api = FakeApi(interceptors=Interceptors(
        get=hang.hook("get"), create=hang.hook("create"), replace=hang.hook("replace")))
    started, stopped = threading.Event(), threading.Event()
    in_flight_when_stopped: list[int] = []

    def on_stopped() -> None:
        in_flight_when_stopped.append(hang.in_flight)
        stopped.set()

    elector = LeaderElector(
        rest=api, namespace="n", name="l", identity="a", timings=TIMINGS,  # type: ignore[arg-type]
        on_started_leading=started.set, on_stopped_leading=on_stopped, stop=threading.Event(),
    )
    thread = threading.Thread(target=elector.run, daemon=True)
    thread.start()
    try:
        assert started.wait(10)
        [lease] = api.objects(LEASE, "n")  # read past the hooks, not recorded
        assert lease["spec"]["holderIdentity"] == "a"
        hang.hang.set()  # the next renewal never answers
        assert stopped.wait(10)
        assert in_flight_when_stopped == [1]  # given up while the request still hung
        assert not elector.is_leader.is_set()
    finally:
        hang.release.set()
        thread.join(10)
    assert not thread.is_alive()
    assert not elector.is_leader.is_set()  # the late answer did not bring leadership back
    # Every request was given at most the time left to the deadline.
    timeouts = [r.options.get("timeout") for r in api.requests]
    assert timeouts and all(t is not None and max(t) <= TIMINGS.renew_deadline
                            for t in timeouts)


def test_request_timeout_is_what_is_left_of_the_deadline():
    assert request_timeout(10.0, now=9.5) == (0.5, 0.5)
    assert request_timeout(100.0, now=0.0) == (5.0, 30.0)  # never above the defaults
    assert request_timeout(1.0, now=2.0) == (0.1, 0.1)  # past it: fail fast, not hang
