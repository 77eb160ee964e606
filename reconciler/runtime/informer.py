"""List+watch of one resource (in one namespace or all) into a ``Store``.

The loop is the classic reflector: list (remember the list's resourceVersion), then
watch from it with bookmarks so the resourceVersion stays fresh even when nothing we
watch changes; when the server says 410 Gone (our resourceVersion was compacted away)
list again and diff against the store so no delete is missed.

A resource with a ``field_selector`` is listed and watched with ``fieldSelector``, so
the store holds only the selected objects and the requests stay within RBAC rules
limited by ``resourceNames``; one with a ``label_selector`` with ``labelSelector``.

Every object is passed through ``Store.transform`` before it is stored or handed to the
handler (docs/components.md, "What the cache keeps").
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable

from kubernetes.client.exceptions import ApiException

from kubekit.kinds import Resource
from kubekit.rest import Rest, brief
from schemas.objects import Obj, meta_of

from .backoff import backoff_delay
from .cache import Store
from .gc_pause import collection_paused

log = logging.getLogger("reconciler.informer")
# The informer's retry delays after a failed list or watch: 0.5 s doubling up to 30 s.
RETRY_BASE = 0.5
RETRY_CAP = 30.0
# Objects per list page. Each page is decoded whole before the store's transform keeps
# what is read of it; with Kargo's full histories 500 Stages are ~75 MB of Python objects
# at once, and the heap keeps most of that after they are freed (docs/benchmarks.md,
# "Scale": 100 keeps ~70 MB less at 10,000 Stages, for a few more requests).
LIST_PAGE_SIZE = 100

# (event type "ADDED"/"MODIFIED"/"DELETED", the version stored before or None, the
# event's object) -> None
Handler = Callable[[str, "Obj | None", Obj], None]


class Gone(Exception):
    """The watch's resourceVersion is too old; a fresh list is needed."""


class Informer:
    def __init__(
        self,
        *,
        rest: Rest,
        resource: Resource,
        namespace: str | None,
        store: Store,
        handler: Handler,
        stop: threading.Event,
        on_restart: Callable[[str], None] = lambda reason: None,
        watch_timeout: int = 300,
    ) -> None:
        self.rest = rest
        self.resource = resource
        self.namespace = namespace
        self.store = store
        self.handler = handler
        self.stop = stop
        self.on_restart = on_restart
        self.watch_timeout = watch_timeout
        self.synced = threading.Event()
        self.resource_version = ""
        # Failed list/watch attempts since the API server last answered one.
        self.failures = 0
        self._thread: threading.Thread | None = None

    @property
    def name(self) -> str:
        scope = self.namespace or "*"
        # The selectors tell apart two informers of one kind in readiness messages.
        selector = "".join(f"[{s}]" for s in (self.resource.field_selector,
                                               self.resource.label_selector) if s)
        return f"{self.resource.plural}.{self.resource.group or 'core'}/{scope}{selector}"

    @property
    def started(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"informer {self.name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        need_list = True
        while not self.stop.is_set():
            try:
                if need_list:
                    with collection_paused():
                        self._list()
                    need_list = False
                self._watch()
                self.failures = 0
                self.on_restart("closed")  # the server ended the stream; normal
            except Gone:
                log.info("watch expired, re-listing", extra={"informer": self.name})
                self.on_restart("gone")
                need_list = True
            except Exception as exc:
                if self.stop.is_set():
                    return  # shutting down: the stream was cut on purpose
                self.failures += 1
                delay = backoff_delay(self.failures, base=RETRY_BASE, cap=RETRY_CAP)
                # failures and retry_in as fields: after each outage a user (and the
                # fault tests) can see the back-off start afresh (failures 1, 0.5 s).
                log.warning(
                    "list/watch failed: %s; retrying in %.1fs", brief(exc), delay,
                    extra={"informer": self.name, "failures": self.failures,
                           "retry_in": round(delay, 3)},
                )
                self.on_restart("error")
                # After an error we cannot know whether events were lost in a way
                # the resourceVersion cannot recover, except 410, which we handle
                # on the next watch; keep the resourceVersion and just re-watch.
                if not self.resource_version:
                    need_list = True
                self.stop.wait(delay)

    def _list(self) -> None:
        items: list[Obj] = []
        cont = None
        while True:
            page = self.rest.list(
                self.resource, self.namespace, limit=LIST_PAGE_SIZE,
                **{"continue": cont},
            )
            kind = self.resource.kind
            for item in page.get("items") or []:
                # List items come without apiVersion/kind; watch events have them.
                item.setdefault("apiVersion", self.resource.api_version)
                item.setdefault("kind", kind)
                items.append(self.store.transform(item))
            meta = page.get("metadata") or {}
            cont = meta.get("continue")
            if not cont:
                rv = meta.get("resourceVersion", "")
                break
        deleted, changed = self.store.replace_scope(
            self.namespace if self.resource.namespaced else None, items
        )
        self.resource_version = rv
        # The API server answers again: the next failure starts the back-off afresh, so
        # an outage does not make the recovery from the next one slower.
        self._recovered()
        self.synced.set()
        for obj in deleted:
            self._notify("DELETED", obj, obj)
        for old, obj in changed:
            self._notify("ADDED", old, obj)

    def _watch(self) -> None:
        # A random server-side timeout spreads the re-watches of many informers.
        timeout = int(self.watch_timeout * (0.5 + random.random() / 2))
        try:
            events = self.rest.watch(
                self.resource, self.namespace,
                resource_version=self.resource_version, timeout_seconds=timeout,
                on_open=self._answered,
            )
            for event in events:
                if self.stop.is_set():
                    return
                etype = str(event.get("type") or "")
                obj = event.get("object") or {}
                if etype == "ERROR":
                    if obj.get("code") == 410:
                        raise Gone
                    raise ApiException(status=obj.get("code") or 0, reason=obj.get("message"))
                rv = meta_of(obj).get("resourceVersion")
                if etype == "BOOKMARK":
                    if rv:
                        self.resource_version = rv
                    continue
                obj = self.store.transform(obj)
                if etype == "DELETED":
                    old = self.store.remove(obj)
                else:
                    # Not over a newer version a write of ours already put there
                    # (Cache.observe); events arrive in order, so nothing else is newer.
                    old = self.store.upsert_if_newer(obj)
                if rv:
                    self.resource_version = rv
                if etype != "DELETED" and old is not None and (
                        meta_of(old).get("resourceVersion") == rv):
                    # The echo of a write of ours the cache already took in: the pass
                    # that wrote it planned with it, so there is nothing new to tell.
                    continue
                self._notify(etype, old, obj)
        except ApiException as exc:
            if exc.status == 410:
                raise Gone from exc
            raise

    def _answered(self) -> None:
        """The API server answered the watch: as after a list, the next failure starts
        the back-off afresh. Not at the first event: a quiet kind's watch carries none
        for minutes, and its failure count would survive into the next outage (seen
        as 15 s retries for templates and Freight after three short API server
        restarts, tests/faults/test_backoff.py)."""
        self._recovered()

    def _recovered(self) -> None:
        """The failure count starts afresh; after failures, one line says so (with how
        many there were), so a user sees each informer come back after an outage."""
        if self.failures:
            log.info("list/watch answered again", extra={"informer": self.name,
                                                          "failures": self.failures})
        self.failures = 0

    def _notify(self, etype: str, old: Obj | None, obj: Obj) -> None:
        try:
            self.handler(etype, old, obj)
        except Exception:
            # A faulty mapping must not kill the watch that every controller shares.
            log.exception("event handler failed", extra={"informer": self.name})
