"""What the fake holds: objects by (group, plural), namespace and name; one
resourceVersion counter for all (etcd's), bumped by every change; the log of changes
watches read; and the live caches that follow every change (or lag, between
:meth:`Tracker.hold` and :meth:`Tracker.deliver`). Set-up (``put``, ``remove``) writes
here directly: no checks, no hooks, no request recorded."""

from __future__ import annotations

import builtins
import copy
import datetime as dt
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kubekit import kinds
from kubekit.kinds import Resource
from reconciler.runtime.cache import CacheView, IndexFunc, Store, Transform

from .selectors import selected

Obj = dict[str, Any]
Key = tuple[str, str]  # (group, plural)

# Kinds whose status is a subresource (their CRDs in manifests/crds, and Deployment).
STATUS_SUBRESOURCE = frozenset({
    (r.group, r.plural)
    for r in (kinds.STAGE, kinds.FREIGHT, kinds.ROLLOUT_MANAGER, kinds.DEPLOYMENT)
})
KNOWN = tuple(v for v in vars(kinds).values() if isinstance(v, Resource))


@dataclass
class Change:
    """One committed change, as the watches see it."""

    rv: int
    key: Key
    type: str  # ADDED, MODIFIED, DELETED
    old: Obj | None
    new: Obj


def default_clock() -> Callable[[], dt.datetime]:
    """One second later at every call, from 2026-01-01: creation order is time order."""
    ticks = iter(range(1 << 62))
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return lambda: start + dt.timedelta(seconds=next(ticks))


def stamp(moment: dt.datetime) -> str:
    """A timestamp as the API server writes it."""
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def key_of(resource: Resource) -> Key:
    return resource.group, resource.plural


class Tracker:
    """The objects, their change log and the live caches; see the module docstring."""

    def __init__(self, *, follow: bool = False, clock: Callable[[], dt.datetime] | None = None,
                 status_subresource: Iterable[Resource] | None = None) -> None:
        self.follow = follow
        self.clock = clock or default_clock()
        self._status = (STATUS_SUBRESOURCE if status_subresource is None
                        else frozenset(key_of(r) for r in status_subresource))
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._kinds: dict[Key, Resource] = {}
        self._objects: dict[Key, dict[tuple[str, str], Obj]] = {}
        self._log: list[Change] = []
        self._compacted = 0
        self._rv = 1
        self._closed = 0  # close_watches() calls
        self._mirrors: list[Store] = []
        self._held: list[tuple[Key, Obj | None, Obj]] | None = None  # hold()
        for resource in KNOWN:
            self.register(resource)

    # ------------------------------------------------------------ set-up and inspection

    def register(self, resource: Resource) -> Resource:
        """Make a resource known (every ``kubekit.kinds`` one is); the canonical form,
        without field or label selector."""
        canonical = Resource(resource.group, resource.version, resource.plural,
                             resource.kind, resource.namespaced)
        with self._lock:
            self._kinds.setdefault(key_of(resource), canonical)
            self._objects.setdefault(key_of(resource), {})
        return canonical

    @property
    def resource_version(self) -> str:
        """The latest resourceVersion (of any object)."""
        with self._lock:
            return str(self._rv)

    def put(self, resource: Resource, obj: Obj) -> Obj:
        """Store ``obj`` as given (set-up: no checks, no hooks, no request recorded),
        with a new resourceVersion and apiVersion/kind when missing; watches see it."""
        obj = copy.deepcopy(obj)
        resource = self.register(resource)
        obj.setdefault("apiVersion", resource.api_version)
        obj.setdefault("kind", resource.kind)
        meta = obj.setdefault("metadata", {})
        with self._lock:
            old = self._get(resource, meta.get("namespace") or "", meta["name"])
            self._store(resource, old=old, new=obj)
            return copy.deepcopy(obj)

    def remove(self, resource: Resource, namespace: str, name: str) -> None:
        """Delete outright, whatever its finalizers (set-up); watches see it."""
        resource = self.register(resource)
        with self._lock:
            old = self._get(resource, namespace, name)
            if old is not None:
                self._store(resource, old=old, new=None)

    def objects(self, resource: Resource, namespace: str | None = None) -> builtins.list[Obj]:
        """Copies of the stored objects, in (namespace, name) order."""
        resource = self.register(resource)
        with self._lock:
            return [copy.deepcopy(o) for o in self._scope(resource, namespace)]

    def names(self, resource: Resource, namespace: str | None = None) -> builtins.list[str]:
        return [o["metadata"]["name"] for o in self.objects(resource, namespace)]

    def compact(self) -> None:
        """Forget the event history (etcd compaction): a watch from any resourceVersion
        before now gets 410 Gone."""
        with self._lock:
            self._compacted = self._rv
            self._log.clear()

    def close_watches(self) -> None:
        """End every waiting watch stream (``follow=True``) now."""
        with self._changed:
            self._closed += 1
            self._changed.notify_all()

    # ------------------------------------------------------------ live caches

    def hold(self) -> None:
        """Live caches stop following: the changes from now on (writes and set-up alike)
        reach them only at :meth:`deliver`, as a watch that lags behind the API server.
        Reads and writes through the fake see the changes at once."""
        with self._lock:
            if self._held is None:
                self._held = []

    def deliver(self) -> None:
        """Bring the live caches up to date with what :meth:`hold` kept from them, in
        order; they follow every change again."""
        with self._lock:
            held, self._held = self._held or [], None
            for key, new, target in held:
                self._mirror(key, new=new, target=target)

    def stores(self, *resources: Resource, live: bool = True,
               indexes: Mapping[Resource, Mapping[str, IndexFunc]] | None = None,
               transforms: Mapping[Resource, Transform] | None = None,
               ) -> dict[Resource, Store]:
        """One runtime ``Store`` per resource (default: every registered one) holding
        copies of what the fake holds, with ``indexes`` (a controller's ``indexes``);
        ``live``: kept up to date on every change (an informer with no lag), else a
        snapshot (a cache that lags). Objects go in through ``Store.transform``, as the
        informer puts them (managedFields stripped, then ``transforms``, a controller's,
        for the resource). For a ``CacheView`` of your own; see :meth:`cache`."""
        with self._lock:
            stores: dict[Resource, Store] = {}
            for resource in resources or tuple(self._kinds.values()):
                stores[resource] = self._store_of(resource, indexes=indexes,
                                                 transforms=transforms)
                if live:
                    self._mirrors.append(stores[resource])
            return stores

    def cache(self, *resources: Resource, live: bool = True,
              indexes: Mapping[Resource, Mapping[str, IndexFunc]] | None = None,
              transforms: Mapping[Resource, Transform] | None = None) -> CacheView:
        """``CacheView(self.stores(*resources, live=live, indexes=indexes,
        transforms=transforms))``."""
        return CacheView(self.stores(*resources, live=live, indexes=indexes,
                                     transforms=transforms))

    def _store_of(self, resource: Resource, *,
                  indexes: Mapping[Resource, Mapping[str, IndexFunc]] | None,
                  transforms: Mapping[Resource, Transform] | None) -> Store:
        """A filled ``Store`` of what ``resource`` selects (lock held)."""
        self.register(resource)
        store = Store(resource, (transforms or {}).get(resource))
        for index_name, func in ((indexes or {}).get(resource) or {}).items():
            store.add_index(index_name, func)
        for obj in self._scope(resource, None):
            if selected(resource, obj):
                store.upsert(store.transform(copy.deepcopy(obj)))
        return store

    # ------------------------------------------------------------ internals

    def _get(self, resource: Resource, namespace: str, name: str) -> Obj | None:
        ns = namespace if resource.namespaced else ""
        return self._objects[key_of(resource)].get((ns or "", name))

    def _scope(self, resource: Resource, namespace: str | None) -> builtins.list[Obj]:
        objs = self._objects[key_of(resource)]
        return [objs[k] for k in sorted(objs)
                if not namespace or not resource.namespaced or k[0] == namespace]

    def _store(self, resource: Resource, *, old: Obj | None, new: Obj | None,
               last: Obj | None = None) -> None:
        """Commit a change (lock held): the new resourceVersion, the event, the mirrors.
        ``new`` None: a deletion, whose event carries ``last`` (default ``old``)."""
        key = key_of(resource)
        self._rv += 1
        target = new if new is not None else copy.deepcopy(last if last is not None else old)
        assert target is not None
        meta = target["metadata"]
        meta["resourceVersion"] = str(self._rv)
        ns = (meta.get("namespace") or "") if resource.namespaced else ""
        if new is None:
            self._objects[key].pop((ns, meta["name"]), None)
            change = Change(self._rv, key, "DELETED", old, copy.deepcopy(target))
        else:
            self._objects[key][(ns, meta["name"])] = new
            change = Change(self._rv, key, "MODIFIED" if old is not None else "ADDED",
                            copy.deepcopy(old), copy.deepcopy(new))
        self._log.append(change)
        if self._held is not None:
            self._held.append((key, copy.deepcopy(new), copy.deepcopy(target)))
        else:
            self._mirror(key, new=new, target=target)
        self._changed.notify_all()

    def _mirror(self, key: Key, *, new: Obj | None, target: Obj) -> None:
        """One change into the live caches (lock held), as their informers take a watch
        event: a newer version replaces, an object leaving the selector goes."""
        for store in self._mirrors:
            if key_of(store.resource) != key:
                continue
            if new is None or not selected(store.resource, new):
                store.remove(target)
            else:
                store.upsert_if_newer(store.transform(copy.deepcopy(new)))
