"""Per-key exponential backoff with jitter and a cap.

Kept apart from the queue and free of clocks so the arithmetic can be tested
directly: a failing key must neither hammer the API server nor wait forever.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

DEFAULT_BASE = 0.5
DEFAULT_CAP = 300.0


def backoff_delay(
    failures: int,
    *,
    base: float = DEFAULT_BASE,
    cap: float = DEFAULT_CAP,
    jitter: float = 0.2,
    rand: Callable[[], float] = random.random,
) -> float:
    """Delay before retry number ``failures`` (1 = first retry).

    ``base * 2**(failures-1)``, capped, then spread by up to ``±jitter`` of itself so
    that many keys failing together (an API server restart) do not retry in lockstep.
    The result never exceeds ``cap``.
    """
    if failures < 1:
        return 0.0
    # Cap the exponent before computing so huge failure counts cannot overflow.
    raw = min(cap, base * (2.0 ** min(failures - 1, 64)))
    spread = raw * jitter * (2 * rand() - 1)
    return max(0.0, min(cap, raw + spread))


@dataclass
class Backoff:
    """Failure counts per key; thread-safe."""

    base: float = DEFAULT_BASE
    cap: float = DEFAULT_CAP
    jitter: float = 0.2
    _failures: dict[Hashable, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def next_delay(self, key: Hashable) -> float:
        """Record one more failure of ``key`` and return how long to wait."""
        with self._lock:
            n = self._failures.get(key, 0) + 1
            self._failures[key] = n
        return backoff_delay(n, base=self.base, cap=self.cap, jitter=self.jitter)

    def failures(self, key: Hashable) -> int:
        """Failures recorded for ``key`` since its last ``forget`` (client-go's
        ``NumRequeues``)."""
        with self._lock:
            return self._failures.get(key, 0)

    def forget(self, key: Hashable) -> None:
        """Reset ``key`` after a success, so its next failure starts small again."""
        with self._lock:
            self._failures.pop(key, None)
