"""The watch verb: the events after a resourceVersion (ADDED, MODIFIED, DELETED; an
object leaving a selector is DELETED for that watch), ``""``/``"0"`` starting with ADDED
for every object, 410 Gone for a compacted resourceVersion, then a BOOKMARK at the
current resourceVersion: at once, or with ``follow`` after waiting for new events until
the timeout or ``close_watches``."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

from kubekit.kinds import Resource

from .selectors import selected
from .tracker import Change, Tracker, key_of

Obj = dict[str, Any]


def watch(tracker: Tracker, resource: Resource, namespace: str | None, *,
          resource_version: str, timeout_seconds: int) -> Iterator[Obj]:
    """The events a watch of ``resource`` (with its selectors) in ``namespace`` gets."""
    canonical = tracker.register(resource)
    namespace = namespace if canonical.namespaced else None
    deadline = time.monotonic() + timeout_seconds
    with tracker._lock:
        closed_at_start = tracker._closed
        start, backlog = _start(tracker, resource, namespace=namespace,
                                resource_version=resource_version)
    yield from backlog
    if start < 0:
        return
    seen = start
    while True:
        with tracker._changed:
            events = [e for c in tracker._log if c.rv > seen and c.key == key_of(canonical)
                      for e in _seen_by(c, namespace=namespace, resource=resource)]
            seen = tracker._rv
            if not events and tracker.follow and tracker._closed == closed_at_start:
                left = deadline - time.monotonic()
                if left > 0:
                    tracker._changed.wait(left)
                    continue
            bookmark = {"type": "BOOKMARK", "object": {
                "apiVersion": canonical.api_version, "kind": canonical.kind,
                "metadata": {"resourceVersion": str(tracker._rv)}}}
        yield from events
        if events and tracker.follow:
            continue
        yield bookmark
        return


def _start(tracker: Tracker, resource: Resource, *, namespace: str | None,
           resource_version: str) -> tuple[int, list[Obj]]:
    """(the resourceVersion the watch follows from, the events it begins with) (lock
    held); -1 after a 410 Gone, which ends the watch."""
    if resource_version in ("", "0"):
        return tracker._rv, [{"type": "ADDED", "object": copy.deepcopy(o)}
                             for o in tracker._scope(resource, namespace)
                             if selected(resource, o)]
    start = int(resource_version)
    if start >= tracker._compacted:
        return start, []
    return -1, [{"type": "ERROR", "object": {
        "kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 410,
        "reason": "Expired",
        "message": f"too old resource version: {start} ({tracker._compacted})"}}]


def _seen_by(change: Change, *, namespace: str | None, resource: Resource) -> list[Obj]:
    """The event a watch of ``namespace`` with ``resource``'s selectors gets for
    ``change``."""
    obj = change.new
    if namespace and (obj["metadata"].get("namespace") or "") != namespace:
        return []
    before = change.old is not None and selected(resource, change.old)
    if change.type != "DELETED" and selected(resource, obj):
        return [{"type": "MODIFIED" if before else "ADDED", "object": copy.deepcopy(obj)}]
    return [{"type": "DELETED", "object": copy.deepcopy(obj)}] if before else []
