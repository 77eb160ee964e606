"""Work queue and backoff: the rules that keep one key from racing with itself."""

from __future__ import annotations

import threading

import pytest

from reconciler.runtime.backoff import Backoff, backoff_delay
from reconciler.runtime.queue import ShutDown, WorkQueue
from reconciler.runtime.types import Key

A = Key("ns", "a")
B = Key("ns", "b")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_key_added_twice_is_handed_out_once():
    q: WorkQueue[Key] = WorkQueue()
    q.add(A)
    q.add(A)
    q.add(B)
    assert len(q) == 2
    assert q.get(timeout=0) == A
    assert q.get(timeout=0) == B
    assert q.get(timeout=0) is None


def test_a_key_being_processed_is_not_handed_to_a_second_worker():
    q: WorkQueue[Key] = WorkQueue()
    q.add(A)
    assert q.get(timeout=0) == A
    q.add(A)  # changed while a worker is on it
    assert q.get(timeout=0) is None
    q.done(A)
    # ...and runs again afterwards, so the change is not lost.
    assert q.get(timeout=0) == A
    q.done(A)
    assert q.get(timeout=0) is None


def test_done_without_a_new_add_does_not_requeue():
    q: WorkQueue[Key] = WorkQueue()
    q.add(A)
    q.get(timeout=0)
    q.done(A)
    assert len(q) == 0


def test_add_after_waits_for_the_clock():
    clock = FakeClock()
    q: WorkQueue[Key] = WorkQueue(clock=clock)
    q.add_after(A, 5)
    assert q.get(timeout=0) is None
    assert q.pending_delayed() == 1
    clock.now += 5
    assert q.get(timeout=0) == A


def test_add_after_zero_is_immediate():
    q: WorkQueue[Key] = WorkQueue()
    q.add_after(A, 0)
    assert q.get(timeout=0) == A


def test_delayed_add_of_a_queued_key_is_deduplicated():
    clock = FakeClock()
    q: WorkQueue[Key] = WorkQueue(clock=clock)
    q.add(A)
    q.add_after(A, 1)
    clock.now += 2
    assert q.get(timeout=0) == A
    assert q.get(timeout=0) is None


def test_shutdown_wakes_blocked_getters():
    q: WorkQueue[Key] = WorkQueue()
    raised = threading.Event()

    def getter():
        try:
            q.get()
        except ShutDown:
            raised.set()

    t = threading.Thread(target=getter)
    t.start()
    q.shutdown()
    t.join(10)
    assert raised.is_set()
    q.add(A)  # ignored after shutdown
    with pytest.raises(ShutDown):
        q.get(timeout=0)


def test_rate_limited_add_uses_growing_backoff_and_forget_resets():
    clock = FakeClock()
    q: WorkQueue[Key] = WorkQueue(backoff=Backoff(base=1, cap=100, jitter=0), clock=clock)
    assert q.add_rate_limited(A) == 1
    assert q.add_rate_limited(A) == 2
    assert q.add_rate_limited(A) == 4
    q.forget(A)
    assert q.add_rate_limited(A) == 1


@pytest.mark.parametrize(
    ("failures", "expected"),
    [(0, 0.0), (1, 0.5), (2, 1.0), (3, 2.0), (10, 256.0), (11, 300.0), (10_000, 300.0)],
)
def test_backoff_is_exponential_and_capped(failures, expected):
    assert backoff_delay(failures, base=0.5, cap=300, jitter=0) == expected


@pytest.mark.parametrize("r", [0.0, 0.25, 0.5, 0.999])
def test_backoff_jitter_stays_within_bounds_and_cap(r):
    d = backoff_delay(3, base=1, cap=100, jitter=0.2, rand=lambda: r)
    assert 4 * 0.8 <= d <= 4 * 1.2
    assert backoff_delay(50, base=1, cap=100, jitter=0.2, rand=lambda: r) <= 100


def test_backoff_counts_keys_separately():
    b = Backoff(base=1, cap=10, jitter=0)
    b.next_delay(A)
    b.next_delay(A)
    assert b.failures(A) == 2
    assert b.failures(B) == 0
    assert b.next_delay(B) == 1
