"""Stock mappers for ``types.Watch`` and the one function that applies a controller's
watches to an event (the runtime's handler and unit tests alike)."""

from __future__ import annotations

from collections.abc import Iterable

from kubekit.kinds import Resource
from schemas.objects import Obj

from .types import Cache, Key, Watch, object_key


def enqueue_self(old: Obj | None, new: Obj, cache: Cache) -> list[Key]:
    """The object's own key: for the primary resource."""
    return [object_key(new)]


def cached_only(old: Obj | None, new: Obj, cache: Cache) -> list[Key]:
    """No key: the resource is read from the cache when reconciling, and a change of it
    alone gives nothing to do."""
    return []


def keys_for(
    watches: Iterable[Watch], resource: Resource, old: Obj | None, new: Obj, cache: Cache
) -> set[Key]:
    """The keys every watch of ``resource`` maps this event to."""
    return {key for w in watches if w.resource == resource for key in w.mapper(old, new, cache)}
