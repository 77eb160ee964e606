"""The cyclic garbage collector paused while informers list (docs/components.md, "What the cache
keeps").

A list decodes the whole of every page, and most of a page's objects live long enough
to reach the collector's oldest generation before the page is dropped; each time that
pile passes a quarter of the long-lived objects, the collector walks every object the
caches already hold. Listing 10,400 Stages with Kargo's full histories into a cache made
59 such walks: 12.3 s of JSON decoding instead of 5.5 s, 34.7 s for the whole list
instead of 23.5 s (docs/benchmarks.md, "Scale"). Decoded JSON holds no reference cycles
and is freed by reference counting alone, so nothing piles up while the collector
waits; it runs once when the last list ends.

Process-wide and shared by every informer's thread, hence a counter: collection resumes
when no list is in progress, and never if it was disabled before the first list began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_lists = 0
_resume = False


@contextmanager
def collection_paused() -> Iterator[None]:
    """Pause cyclic collection for the duration of one list."""
    global _lists, _resume
    with _lock:
        if _lists == 0:
            _resume = gc.isenabled()
            gc.disable()
        _lists += 1
    try:
        yield
    finally:
        with _lock:
            _lists -= 1
            last = _lists == 0 and _resume
            if last:
                gc.enable()
        if last:
            gc.collect()  # what cycles the lists left (from the HTTP layer), at once
