"""The in-memory store behind ``types.Cache``: one dict per resource.

Objects are stored as the store's ``transform`` makes them (docs/components.md, "What the cache
keeps"): a controller may declare, per kind, a pure function that keeps only what it
reads (``Controller.transforms``, like controller-runtime's cache TransformFunc); a kind
with none is stored whole. Whoever puts an object into a store (the informer,
``CacheView.observe``) applies ``Store.transform`` first, so the cache and the handlers
see one shape. Objects are handed out without copying; the ``Cache``
protocol says callers must not mutate them (copying 100s of objects per reconcile
would cost more than the discipline).
"""

from __future__ import annotations

import builtins  # builtins.list: in the classes below, ``list`` is also a method
import threading
from collections.abc import Callable, Iterable

from kubekit.kinds import Resource
from schemas.objects import Obj, meta_of

# obj -> the index values it is found under (none: not indexed)
IndexFunc = Callable[[Obj], Iterable[str]]
# obj -> what the cache keeps of it (pure: a new object, the input left alone)
Transform = Callable[[Obj], Obj]


def _keep(obj: Obj) -> Obj:
    return obj


def _ns_name(obj: Obj) -> tuple[str, str]:
    meta = meta_of(obj)
    return meta.get("namespace") or "", meta.get("name") or ""


class Store:
    """Objects of one resource by namespace, then name; thread-safe.

    Nested by namespace because controllers list one namespace per reconcile (a
    Stage's runs and Freight, a namespace's RolloutManagers): that must not cost a scan
    of every object of the kind in the cluster.
    """

    def __init__(self, resource: Resource, transform: Transform | None = None) -> None:
        self.resource = resource
        # What callers apply to an object before storing it (the module docstring).
        self.transform: Transform = transform or _keep
        self._lock = threading.Lock()
        self._items: dict[str, dict[str, Obj]] = {}
        self._index_funcs: dict[str, IndexFunc] = {}
        # index name -> value -> (namespace, name) keys
        self._indexes: dict[str, dict[str, set[tuple[str, str]]]] = {}

    def add_index(self, name: str, func: IndexFunc) -> None:
        """Keep objects findable by ``func(obj)`` values (``by_index``), like client-go's
        Indexer; objects already stored are indexed too."""
        with self._lock:
            self._index_funcs[name] = func
            self._indexes[name] = {}
            for by_name in self._items.values():
                for obj in by_name.values():
                    self._index_one(name, obj, add=True)

    def by_index(self, name: str, value: str) -> builtins.list[Obj]:
        with self._lock:
            keys = self._indexes[name].get(value, ())
            return [o for ns, n in keys if (o := self._items.get(ns, {}).get(n)) is not None]

    def _index_one(self, index: str, obj: Obj, *, add: bool) -> None:
        key = _ns_name(obj)
        table = self._indexes[index]
        for value in self._index_funcs[index](obj):
            if add:
                table.setdefault(value, set()).add(key)
            elif value in table:
                table[value].discard(key)
                if not table[value]:
                    del table[value]

    def _reindex(self, old: Obj | None, new: Obj | None) -> None:
        for index in self._index_funcs:
            if old is not None:
                self._index_one(index, old, add=False)
            if new is not None:
                self._index_one(index, new, add=True)

    def get(self, namespace: str, name: str) -> Obj | None:
        ns = namespace if self.resource.namespaced else ""
        with self._lock:
            return self._items.get(ns, {}).get(name)

    def list(self, namespace: str | None = None) -> builtins.list[Obj]:
        with self._lock:
            if namespace is None or not self.resource.namespaced:
                return [o for by_name in self._items.values() for o in by_name.values()]
            return list(self._items.get(namespace, {}).values())

    def upsert(self, obj: Obj) -> Obj | None:
        """Store ``obj``; return the previous version, if any."""
        ns, name = _ns_name(obj)
        with self._lock:
            by_name = self._items.setdefault(ns, {})
            old = by_name.get(name)
            by_name[name] = obj
            self._reindex(old, obj)
            return old

    def upsert_if_newer(self, obj: Obj) -> Obj | None:
        """Store ``obj`` unless the stored version is newer; return the version stored
        before (kept or replaced), if any.

        resourceVersions are opaque to clients in general, but etcd's are integers
        and only compared here for objects one API server returned.
        """
        ns, name = _ns_name(obj)
        with self._lock:
            old = self._items.get(ns, {}).get(name)
            if old is not None and _rv_int(old) >= _rv_int(obj):
                return old
            self._items.setdefault(ns, {})[name] = obj
            self._reindex(old, obj)
            return old

    def remove(self, obj: Obj) -> Obj | None:
        ns, name = _ns_name(obj)
        with self._lock:
            by_name = self._items.get(ns, {})
            old = by_name.pop(name, None)
            if not by_name:
                self._items.pop(ns, None)
            self._reindex(old, None)
            return old

    def replace_scope(
        self, namespace: str | None, objs: builtins.list[Obj]
    ) -> tuple[builtins.list[Obj], builtins.list[tuple[Obj | None, Obj]]]:
        """Replace everything in ``namespace`` (None = all) after a fresh list.

        Returns (deleted, changed_or_new as (previous version or None, new)) so the
        informer can notify handlers about what happened while it was not watching.
        """
        fresh: dict[str, dict[str, Obj]] = {}
        for o in objs:
            ns, name = _ns_name(o)
            fresh.setdefault(ns, {})[name] = o
        with self._lock:
            scopes = list(self._items) if namespace is None else [namespace]
            deleted = [
                o for ns in scopes for name, o in self._items.get(ns, {}).items()
                if name not in fresh.get(ns, {})
            ]
            changed: builtins.list[tuple[Obj | None, Obj]] = []
            for ns, by_name in fresh.items():
                for name, o in by_name.items():
                    old = self._items.get(ns, {}).get(name)
                    if old is None or _rv(old) != _rv(o):
                        changed.append((old, o))
            for ns in scopes:
                for o in self._items.pop(ns, {}).values():
                    self._reindex(o, None)
            for ns, by_name in fresh.items():
                self._items.setdefault(ns, {}).update(by_name)
                for o in by_name.values():
                    self._reindex(None, o)
            return deleted, changed

    def __len__(self) -> int:
        with self._lock:
            return sum(len(by_name) for by_name in self._items.values())


def _rv(obj: Obj) -> str:
    return str(meta_of(obj).get("resourceVersion", ""))


def _rv_int(obj: Obj) -> int:
    try:
        return int(_rv(obj))
    except ValueError:
        return -1


class CacheView:
    """The ``types.Cache`` implementation over the stores the runtime runs."""

    def __init__(self, stores: dict[Resource, Store]) -> None:
        self._stores = stores

    def _store(self, resource: Resource) -> Store:
        try:
            return self._stores[resource]
        except KeyError:
            raise KeyError(
                f"{resource.plural}.{resource.group or 'core'} is not cached: "
                "add it to the controller's watches"
            ) from None

    def get(self, resource: Resource, namespace: str, name: str) -> Obj | None:
        return self._store(resource).get(namespace, name)

    def list(self, resource: Resource, namespace: str | None = None) -> builtins.list[Obj]:
        return self._store(resource).list(namespace)

    def by_index(self, resource: Resource, index: str, value: str) -> builtins.list[Obj]:
        return self._store(resource).by_index(index, value)

    def observe(self, resource: Resource, obj: Obj) -> None:
        store = self._store(resource)
        store.upsert_if_newer(store.transform(obj))
