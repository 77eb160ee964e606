"""core/v1 Events about the objects we act on, so ``kubectl describe`` tells the story.

Emitting is best effort: an Event that cannot be written is logged and dropped,
never a reason to fail or retry a reconcile.
"""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from kubekit.events import build_event
from kubekit.kinds import EVENT
from kubekit.rest import brief, namespace_terminating
from schemas.objects import meta_of

from .types import Client

log = logging.getLogger("reconciler.events")

COMPONENT = "rollgate-reconciler"


class Recorder:
    """``types.EventRecorder`` writing core/v1 Events from a background thread.

    ``emit`` only queues: a reconcile never waits for an Event's round trip. Like
    client-go's EventCorrelator, the same event (object, type, reason, message) emitted
    again within ``dedupe_seconds`` is dropped instead of written again, so a condition
    that is re-detected on every pass (e.g. a verifier conflict) does not flood the
    namespace with Events. The queue is bounded; when it is full, events are dropped
    and logged rather than slowing reconciles down.
    """

    def __init__(
        self,
        client: Client,
        *,
        instance: str,
        dedupe_seconds: float = 600.0,
        max_queued: int = 10000,
        busy: Callable[[], bool] | None = None,
        max_defer_seconds: float = 5.0,
    ) -> None:
        self.client = client
        self.instance = instance
        self.dedupe_seconds = dedupe_seconds
        # Events yield to the controllers' own writes: while ``busy()`` (keys waiting in
        # a work queue), an Event waits, up to ``max_defer_seconds``, so a burst of
        # finished verifications reaches verifiedIn before the API server spends time
        # on their Events.
        self.busy = busy
        self.max_defer_seconds = max_defer_seconds
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(max_queued)
        self._seen: OrderedDict[tuple[str, ...], float] = OrderedDict()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="events", daemon=True)
        self._thread.start()

    def emit(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        meta = meta_of(obj)
        key = (str(meta.get("uid") or meta.get("namespace")), str(meta.get("name")),
               type, reason, message)
        now = time.monotonic()
        with self._lock:
            last = self._seen.get(key)
            if last is not None and now - last < self.dedupe_seconds:
                return
            self._seen[key] = now
            self._seen.move_to_end(key)
            while len(self._seen) > 4096:
                self._seen.popitem(last=False)
        event = build_event(
            obj, type=type, reason=reason, message=message, component=COMPONENT,
            instance=self.instance, now=dt.datetime.now(dt.UTC),
        )
        try:
            self._queue.put_nowait(event)
        except queue.Full:
            log.warning("event queue full; dropped event %s", reason)

    def flush(self, timeout: float = 5.0) -> None:
        """Wait until queued events are written (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        while self._queue.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)

    def _run(self) -> None:
        while True:
            event = self._queue.get()
            try:
                if event is None:
                    return
                deadline = time.monotonic() + self.max_defer_seconds
                while self.busy is not None and self.busy() and time.monotonic() < deadline:
                    time.sleep(0.05)
                self.client.create(EVENT, event["metadata"]["namespace"], event)
            except Exception as exc:
                _log_failure(event, exc)
            finally:
                self._queue.task_done()


def _log_failure(event: Mapping[str, Any] | None, exc: BaseException) -> None:
    """One line: the Event's reason and the API error's status, reason and message
    (``kubekit.rest.brief``). An Event refused because its namespace is being deleted
    is a debug line: the object it was about goes away with the namespace."""
    reason = (event or {}).get("reason")
    namespace = ((event or {}).get("metadata") or {}).get("namespace")
    if namespace_terminating(exc):
        log.debug("event %s not recorded: namespace %s is being deleted", reason, namespace)
        return
    log.warning("could not record event %s in namespace %s: %s", reason, namespace, brief(exc))
