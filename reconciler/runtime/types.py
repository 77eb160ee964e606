"""The contract between the runtime and the controllers that run on it.

A controller declares its ``watches``: each resource it needs cached, with the mapper
that turns a change of one of its objects into keys of the controller's primary
objects. It reconciles one key at a time (``reconcile``). The runtime owns list+watch,
the work queue with de-duplication and per-key backoff, worker threads, resync and
leader election, so a controller is plain code over a read-only cache and an API
client.
"""

from __future__ import annotations

import abc
import builtins  # builtins.list: in the classes below, ``list`` is also a method
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from prometheus_client.registry import Collector

from kubekit.kinds import Resource
from schemas.objects import Obj, meta_of

from .cache import IndexFunc, Transform
from .health import Metrics
from .options import RuntimeOptions


@dataclass(frozen=True, slots=True, order=True)
class Key:
    """Identity of a primary object in the work queue."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


class Requeue(Exception):
    """Raised by ``reconcile`` to run the key again after ``after`` seconds.

    Any other exception counts as a failure and is retried with the queue's
    per-key exponential backoff.
    """

    def __init__(self, after: float, reason: str = "") -> None:
        super().__init__(reason)
        self.after = after


class Cache(Protocol):
    """Read-only view of the informer caches. Returned objects must not be mutated."""

    def get(self, resource: Resource, namespace: str, name: str) -> Obj | None: ...

    def list(self, resource: Resource, namespace: str | None = None) -> builtins.list[Obj]: ...

    def by_index(self, resource: Resource, index: str, value: str) -> builtins.list[Obj]:
        """Objects whose index function (``Store.add_index``) returned ``value``."""
        ...

    def observe(self, resource: Resource, obj: Obj) -> None:
        """Take in an object a write of ours just returned, unless the cache already
        holds a newer version: the next reconcile then sees its own write even before
        the watch delivers it (client-go's MutationCache)."""
        ...


class Client(Protocol):
    """The API calls a controller makes: plain JSON in and out, errors as
    ``kubernetes.client.exceptions.ApiException``. ``kubekit.rest.Rest`` implements it;
    unit tests use one in-memory fake of it."""

    def get(self, resource: Resource, namespace: str, name: str) -> Obj | None: ...

    def create(self, resource: Resource, namespace: str, body: Obj) -> Obj: ...

    def replace(
        self, resource: Resource, namespace: str, name: str, body: Obj, *, subresource: str = ""
    ) -> Obj: ...

    def patch(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        body: Any,
        *,
        content_type: str = ...,
        subresource: str = "",
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> Obj: ...

    def delete(self, resource: Resource, namespace: str, name: str) -> None: ...


class EventRecorder(Protocol):
    def emit(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        """Record a core/v1 Event about ``obj`` (type ``Normal`` or ``Warning``)."""
        ...


@dataclass(slots=True)
class Context:
    """What a controller gets to do its work; built once by the runtime."""

    cache: Cache
    client: Client
    events: EventRecorder
    # The runtime's own options (namespaces, identity...); a controller's feature options
    # are its own, given at construction (``controllers.load``).
    options: RuntimeOptions
    metrics: Metrics | None = None  # the runtime's; None in unit tests that do not look


# (old, new, cache) -> keys of primary objects to reconcile. ``new`` is the object the
# event carries (for a deletion: its last state); ``old`` the version the cache held
# before (None for a new object), so a mapper can act on what changed only. Runs on
# the informer's thread: read the cache, never the API.
Mapper = Callable[["Obj | None", Obj, Cache], Iterable[Key]]


@dataclass(frozen=True, slots=True)
class Watch:
    """A resource a controller reads from the cache, and how its events map to keys
    (``runtime.watches`` has the stock mappers)."""

    resource: Resource
    mapper: Mapper


# resource -> index name -> function, added to the cache's stores (``Cache.by_index``).
Indexes = Mapping[Resource, Mapping[str, IndexFunc]]
# resource -> what the cache keeps of an object (``runtime.cache``).
Transforms = Mapping[Resource, Transform]


class Controller(abc.ABC):
    """A controller run by the runtime; every controller subclasses it.

    ``controllers.load`` builds it from its feature's typed options, so watches that
    depend on a flag (a resource narrowed with ``Resource.named`` to a name given on the
    command line) are fixed at construction.

    ``name``, ``primary`` and ``watches`` have no default: each controller sets them (on
    the class, or in ``__init__`` when they depend on its options). The rest is declared
    here with an empty default, so the runtime reads every member directly and a
    controller sets only those it has.
    """

    name: str  # e.g. "stage-verification"; also the --controllers value
    primary: Resource
    # Every resource it reads from the cache, the primary among them.
    watches: tuple[Watch, ...]
    # Named indexes for ``Cache.by_index``.
    indexes: Indexes = MappingProxyType({})
    # A pure function per resource returning what the cache keeps of an object: the
    # fields the controller reads (docs/components.md, "What the cache keeps").
    transforms: Transforms = MappingProxyType({})
    # The feature's Prometheus collectors, registered with no registry; the runtime
    # registers them with its own and serves them on /metrics.
    collectors: Sequence[Collector] = ()

    def resync_keys(self, cache: Cache) -> Iterable[Key]:
        """Keys to queue on every periodic resync besides each primary object's: e.g.
        leftovers of deleted primaries, which no watch event points at. None here."""
        return ()

    @abc.abstractmethod
    def reconcile(self, key: Key, ctx: Context) -> None:
        """Bring the world in line for ``key``; idempotent; raise to retry."""


def object_key(obj: Mapping[str, Any]) -> Key:
    meta = meta_of(obj)
    return Key(meta.get("namespace") or "", meta["name"])
