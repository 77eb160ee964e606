"""A work queue keyed by object with the semantics of client-go's workqueue.

Why these rules: a reconcile reads the whole world for one key, so running a key
twice in parallel would race with itself, and queuing it twice is wasted work.
Hence: a key is queued at most once (``dirty``), never handed to two workers at once
(``processing``), and a key added while it is being processed is handed out again
after ``done`` so the change that caused the add is not lost.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from .backoff import Backoff

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """Raised by ``get`` once the queue is shut down and drained of waiters."""


class WorkQueue(Generic[K]):
    def __init__(
        self,
        *,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cond = threading.Condition()
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._waiting: list[tuple[float, int, K]] = []  # heap of (due, seq, key)
        self._seq = itertools.count()
        self._shutdown = False
        self._clock = clock
        self.backoff = backoff or Backoff()

    # -- adding ---------------------------------------------------------------
    def add(self, key: K) -> None:
        with self._cond:
            self._add_locked(key)

    def _add_locked(self, key: K) -> None:
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return  # re-queued by done()
        self._queue.append(key)
        self._cond.notify()

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` once ``delay`` seconds have passed (immediately if <= 0)."""
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            if self._shutdown:
                return
            heapq.heappush(self._waiting, (self._clock() + delay, next(self._seq), key))
            # Wake a getter so it recomputes how long to sleep.
            self._cond.notify()

    def add_rate_limited(self, key: K) -> float:
        """Add ``key`` after its next backoff delay; returns the delay."""
        delay = self.backoff.next_delay(key)
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        self.backoff.forget(key)

    # -- taking ---------------------------------------------------------------
    def _promote_due_locked(self) -> float | None:
        """Move due delayed keys into the queue; return seconds until the next one."""
        now = self._clock()
        while self._waiting and self._waiting[0][0] <= now:
            _, _, key = heapq.heappop(self._waiting)
            self._add_locked(key)
        return (self._waiting[0][0] - now) if self._waiting else None

    def get(self, timeout: float | None = None) -> K | None:
        """Next key to process, or None after ``timeout``; raises ShutDown when stopped.

        The caller must call ``done(key)`` when finished with it.
        """
        deadline = None if timeout is None else self._clock() + timeout
        with self._cond:
            while True:
                if self._shutdown:
                    raise ShutDown
                next_due = self._promote_due_locked()
                if self._queue:
                    key = self._queue.popleft()
                    self._processing.add(key)
                    self._dirty.discard(key)
                    return key
                wait = next_due
                if deadline is not None:
                    left = deadline - self._clock()
                    if left <= 0:
                        return None
                    wait = left if wait is None else min(wait, left)
                self._cond.wait(wait)

    def done(self, key: K) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify()

    # -- state ----------------------------------------------------------------
    def __len__(self) -> int:
        """Keys ready to be handed out (the queue-depth metric)."""
        with self._cond:
            return len(self._queue)

    def pending_delayed(self) -> int:
        """Keys waiting for their ``add_after`` delay (the other half of ``len``)."""
        with self._cond:
            return len(self._waiting)

    def shutdown(self) -> None:
        with self._cond:
            self._shutdown = True
            self._cond.notify_all()
