"""The in-memory store behind ``types.Cache``: one dict per resource.

Objects are stored as received and handed out without copying; the ``Cache``
protocol says callers must not mutate them (copying 100s of objects per reconcile
would cost more than the discipline).
"""

from __future__ import annotations

import threading

from .types import Obj, Resource


def _ns_name(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return meta.get("namespace") or "", meta.get("name") or ""


class Store:
    """Objects of one resource by (namespace, name); thread-safe."""

    def __init__(self, resource: Resource) -> None:
        self.resource = resource
        self._lock = threading.Lock()
        self._items: dict[tuple[str, str], Obj] = {}

    def get(self, namespace: str, name: str) -> Obj | None:
        ns = namespace if self.resource.namespaced else ""
        with self._lock:
            return self._items.get((ns, name))

    def list(self, namespace: str | None = None) -> list[Obj]:
        with self._lock:
            if namespace is None or not self.resource.namespaced:
                return list(self._items.values())
            return [o for (ns, _), o in self._items.items() if ns == namespace]

    def upsert(self, obj: Obj) -> Obj | None:
        """Store ``obj``; return the previous version, if any."""
        with self._lock:
            key = _ns_name(obj)
            old = self._items.get(key)
            self._items[key] = obj
            return old

    def remove(self, obj: Obj) -> Obj | None:
        with self._lock:
            return self._items.pop(_ns_name(obj), None)

    def replace_scope(self, namespace: str | None, objs: list[Obj]) -> tuple[list[Obj], list[Obj]]:
        """Replace everything in ``namespace`` (None = all) after a fresh list.

        Returns (deleted, changed_or_new) so the informer can notify handlers about
        what happened while it was not watching.
        """
        with self._lock:
            fresh = {_ns_name(o): o for o in objs}
            in_scope = [
                k for k in self._items if namespace is None or k[0] == namespace
            ]
            deleted = [self._items.pop(k) for k in in_scope if k not in fresh]
            changed = []
            for k, o in fresh.items():
                old = self._items.get(k)
                if old is None or _rv(old) != _rv(o):
                    changed.append(o)
                self._items[k] = o
            return deleted, changed

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


def _rv(obj: Obj) -> str:
    return (obj.get("metadata") or {}).get("resourceVersion", "")


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

    def list(self, resource: Resource, namespace: str | None = None) -> list[Obj]:
        return self._store(resource).list(namespace)
