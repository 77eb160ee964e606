"""Leader election keeps the renew deadline even when a lease request hangs.

A stand-in for the REST layer holds the Lease in memory and can make requests hang
until the test lets them go; no wall-clock durations are asserted, only the order of
what happened (leadership given up while the request was still in flight).
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from kubernetes.client.exceptions import ApiException

from reconciler.runtime.leader import LeaderElector, Timings, request_timeout

TIMINGS = Timings(lease_duration=1.5, renew_deadline=1.0, retry_period=0.1)


class LeaseRest:
    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.rv = 0
        self.hang = threading.Event()  # set: requests from now on block
        self.release = threading.Event()  # set: blocked requests return
        self.in_flight = 0
        self.timeouts: list[Any] = []
        self.lock = threading.Lock()

    def _maybe_hang(self, timeout: Any) -> None:
        self.timeouts.append(timeout)
        if self.hang.is_set():
            with self.lock:
                self.in_flight += 1
            self.release.wait(30)  # the test releases it; 30 s only guards a broken test
            with self.lock:
                self.in_flight -= 1

    def get(self, resource: Any, namespace: str, name: str, *, timeout: Any = None) -> Any:
        self._maybe_hang(timeout)
        with self.lock:
            return copy.deepcopy(self.lease)

    def create(self, resource: Any, namespace: str, body: Any, *, timeout: Any = None) -> Any:
        self._maybe_hang(timeout)
        with self.lock:
            if self.lease is not None:
                raise ApiException(status=409)
            self.rv += 1
            body["metadata"]["resourceVersion"] = str(self.rv)
            self.lease = copy.deepcopy(body)
            return body

    def replace(self, resource: Any, namespace: str, name: str, body: Any, *,
                timeout: Any = None) -> Any:
        self._maybe_hang(timeout)
        with self.lock:
            assert self.lease is not None
            if body["metadata"].get("resourceVersion") != self.lease["metadata"][
                    "resourceVersion"]:
                raise ApiException(status=409)
            self.rv += 1
            body["metadata"]["resourceVersion"] = str(self.rv)
            self.lease = copy.deepcopy(body)
            return body


def test_a_hung_lease_request_does_not_extend_leadership_past_the_renew_deadline():
    rest = LeaseRest()
    started, stopped = threading.Event(), threading.Event()
    in_flight_when_stopped: list[int] = []

    def on_stopped() -> None:
        in_flight_when_stopped.append(rest.in_flight)
        stopped.set()

    elector = LeaderElector(
        rest=rest, namespace="n", name="l", identity="a", timings=TIMINGS,  # type: ignore[arg-type]
        on_started_leading=started.set, on_stopped_leading=on_stopped, stop=threading.Event(),
    )
    thread = threading.Thread(target=elector.run, daemon=True)
    thread.start()
    try:
        assert started.wait(10)
        rest.hang.set()  # the next renewal never answers
        assert stopped.wait(10)
        assert in_flight_when_stopped == [1]  # given up while the request still hung
        assert not elector.is_leader.is_set()
    finally:
        rest.release.set()
        thread.join(10)
    assert not thread.is_alive()
    assert not elector.is_leader.is_set()  # the late answer did not bring leadership back
    # Every request was given at most the time left to the deadline.
    assert all(t is not None and max(t) <= TIMINGS.renew_deadline for t in rest.timeouts)


def test_request_timeout_is_what_is_left_of_the_deadline():
    assert request_timeout(10.0, now=9.5) == (0.5, 0.5)
    assert request_timeout(100.0, now=0.0) == (5.0, 30.0)  # never above the defaults
    assert request_timeout(1.0, now=2.0) == (0.1, 0.1)  # past it: fail fast, not hang
