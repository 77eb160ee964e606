"""``kubernetes.watch.Watch`` with types, for the benchmarks that watch through the official
client: it ships ``py.typed`` but leaves ``Watch`` unannotated, so each call from typed code
is an untyped call to mypy. The events are the client's: ``type``, ``object`` (a model, or a
dict for custom objects) and ``raw_object``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import watch


class Watch:
    """One ``kubernetes.watch.Watch``: ``stream`` the events of a list call, ``stop`` it."""

    def __init__(self) -> None:
        # kubernetes.watch is unannotated (stub gap): the calls below are typed here once.
        self._watch = watch.Watch()  # type: ignore[no-untyped-call]

    def stream(self, func: Callable[..., Any], *args: Any,
               **kwargs: Any) -> Iterator[dict[str, Any]]:
        """The events of ``func(*args, watch=True, **kwargs)``, as the client yields them."""
        events: Iterator[dict[str, Any]] = self._watch.stream(  # type: ignore[no-untyped-call]
            func, *args, **kwargs)
        return events

    def stop(self) -> None:
        self._watch.stop()  # type: ignore[no-untyped-call]
