"""One in-memory fake of the Kubernetes API for unit tests, with per-call fault injection.

The e2e tests run against a real kube-apiserver; this fake exists so a unit test can make
one particular request fail, hang or race with another write, which a real server
cannot be told to do on cue. The model is controller-runtime's fake client with
``interceptor.Funcs``: :class:`FakeApi` is a complete client (the ``kubekit.rest.Rest``
surface, which ``reconciler.runtime.types.Client`` is a part of), and each verb can be
overridden per test by a hook in :class:`Interceptors`, which receives the fake without
interceptors and may raise, wait, write something else first, or delegate::

    api = FakeApi()
    api.put(STAGE, stage)                                   # set-up, no hook runs
    api.fail("create", 503, when=lambda r: r.resource == ANALYSIS_RUN)   # once
    api.interceptors.get = lambda client, *a, **k: client.get(*a, **k)   # any hook
    api.interceptors.delete = never("the controller never deletes")      # a guard

What it keeps of the API's semantics (where it is simpler, it says so):

- objects by (group, plural), namespace and name; one resourceVersion counter for all
  (etcd's), bumped by every change; a write that changes nothing is not a change (no new
  resourceVersion, no watch event), as the API server skips it;
- ``create``: 409 AlreadyExists; ``generateName``; uid, creationTimestamp (from
  ``clock``), generation 1; a resourceVersion in the body is refused as the API server
  refuses it;
- ``replace`` and the merge patch: 404 NotFound; 409 Conflict on a stale
  ``metadata.resourceVersion`` (none: unconditional); the status subresource (Stage,
  Freight, RolloutManager, Deployment): ``subresource="status"`` writes only status and
  the main resource ignores it; generation bumped when anything but metadata (and
  status) changed; uid, creationTimestamp and deletionTimestamp cannot be changed;
- ``patch``: merge patches (RFC 7386), JSON patches (RFC 6902, all six ops; a failed
  ``test`` or a missing path is 422 Invalid), and server-side apply, simplified: the
  fields a manager applied (map keys; lists are atomic) are recorded in
  ``managedFields``, a field applied before and left out now is removed unless another
  manager owns it, and a different value for a field another applier owns is 409
  Conflict unless ``force``; an apply creates a missing object. Other content types
  are 415;
- ``delete``: idempotent (a missing object is no error, as ``Rest.delete``); with
  finalizers only ``deletionTimestamp`` is set, and the object goes when the last
  finalizer is removed; a finalizer cannot be added while deleting (422);
- ``list``: ``labelSelector`` (=, ==, !=, exists, !exists, in, notin), ``fieldSelector``
  (=, ==, != on any dotted field), ``limit`` and ``continue``; a ``Resource.named`` or
  ``Resource.labelled`` applies its own selector (to watches and caches too, as an
  informer sends it on both requests); items come without apiVersion and kind, like the
  API server's lists of built-in kinds;
- ``watch``: the events after ``resource_version`` (ADDED, MODIFIED, DELETED; an object
  leaving a selector is DELETED for that watch), ``""``/``"0"`` starting with ADDED for
  every object; after :meth:`FakeApi.compact` an older resourceVersion gets an ERROR
  event with code 410. The stream then ends with a BOOKMARK at the current
  resourceVersion, at once (``follow=False``, the default: deterministic tests that run
  an informer's loop on the test's thread) or, with ``follow=True``, after waiting for
  new events until ``timeout_seconds`` pass or :meth:`FakeApi.close_watches`.

Every call made through the fake (not the calls a hook makes on the client it is
given) is recorded in :attr:`FakeApi.requests`; :meth:`FakeApi.writes` lists the
writes that succeeded. A live cache (:meth:`FakeApi.cache`) follows every change at
once, unless :meth:`FakeApi.hold` makes it lag until :meth:`FakeApi.deliver` (a
watch that has not delivered yet). :meth:`FakeApi.rest` is a real ``kubekit.rest.Rest`` answered by
this fake at the HTTP level (paths, query parameters, watch lines), for tests of what
``Rest`` sends. :class:`Events` records what a controller emits; :func:`context`
builds a controller's ``Context`` whose cache follows the fake.
"""

from __future__ import annotations

import builtins
import copy
import dataclasses
import datetime as dt
import functools
import http
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from kubernetes.client.exceptions import ApiException

from kubekit import kinds
from kubekit.kinds import Resource
from kubekit.rest import APPLY_PATCH, JSON, JSON_PATCH, MERGE_PATCH, Rest
from reconciler.runtime.cache import CacheView, IndexFunc, Store, Transform
from reconciler.runtime.options import RuntimeOptions
from reconciler.runtime.types import Context

Obj = dict[str, Any]
Hook = Callable[..., Any]
VERBS = ("get", "list", "create", "replace", "patch", "delete", "watch")
WRITES = ("create", "replace", "patch", "delete")

# Kinds whose status is a subresource (their CRDs in manifests/crds, and Deployment).
STATUS_SUBRESOURCE = frozenset({
    (r.group, r.plural)
    for r in (kinds.STAGE, kinds.FREIGHT, kinds.ROLLOUT_MANAGER, kinds.DEPLOYMENT)
})
# Kinds without metadata.generation.
NO_GENERATION = frozenset({
    (r.group, r.plural) for r in (kinds.CONFIG_MAP, kinds.EVENT, kinds.LEASE)})
KNOWN = tuple(v for v in vars(kinds).values() if isinstance(v, Resource))


# ---------------------------------------------------------------- errors


def api_error(status: int, reason: str = "", message: str = "") -> ApiException:
    """An ``ApiException`` as ``Rest`` raises it: the HTTP phrase as ``reason`` and a
    metav1.Status body (``kubekit.rest.status_of`` and ``reason_of`` read it); status
    0 is a transport error (no body)."""
    if status == 0:
        return ApiException(status=0, reason=reason or "ConnectionError: injected")
    try:
        phrase = http.HTTPStatus(status).phrase
    except ValueError:
        phrase = reason or "injected"
    exc = ApiException(status=status, reason=phrase)
    exc.body = json.dumps({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message or f"injected {status}", "reason": reason, "code": status,
    })
    return exc


def _not_found(resource: Resource, name: str) -> ApiException:
    return api_error(404, "NotFound", f'{_gr(resource)} "{name}" not found')


def _conflict(resource: Resource, name: str) -> ApiException:
    return api_error(409, "Conflict", f'Operation cannot be fulfilled on {_gr(resource)} '
                     f'"{name}": the object has been modified; please apply your changes '
                     "to the latest version and try again")


def _invalid(resource: Resource, name: str, why: str) -> ApiException:
    return api_error(422, "Invalid", f'{resource.kind} "{name}" is invalid: {why}')


def _gr(resource: Resource) -> str:
    return f"{resource.plural}.{resource.group}" if resource.group else resource.plural


# ---------------------------------------------------------------- hooks and records


@dataclass
class Interceptors:
    """Per-verb hooks, each ``hook(client, *args, **kwargs)`` with the verb's own
    arguments (``kubekit.rest.Rest``'s signatures); ``client`` is the fake without
    interceptors (:attr:`FakeApi.direct`), so a hook delegates with e.g.
    ``client.get(*args, **kwargs)``, and may also call other verbs or set-up methods on
    it (a concurrent write). A hook for ``watch`` returns an iterator of events. None:
    the fake's own behaviour."""

    get: Hook | None = None
    list: Hook | None = None
    create: Hook | None = None
    replace: Hook | None = None
    patch: Hook | None = None
    delete: Hook | None = None
    watch: Hook | None = None


def never(why: str) -> Hook:
    """A hook for a verb the code under test must never call: the call fails the test
    with ``why`` (an ``AssertionError``, which no ``except ApiException`` swallows)."""

    def hook(client: _Direct, *args: Any, **kwargs: Any) -> Any:
        raise AssertionError(why)

    return hook


@dataclass
class Request:
    """One call made through the fake: the verb, its target and body, and the keyword
    arguments as passed (``timeout``, ``subresource``, ``content_type``, query
    parameters...); ``error`` is what it raised, if it did."""

    verb: str
    resource: Resource
    namespace: str | None
    name: str | None = None
    body: Any = None
    options: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None

    def __str__(self) -> str:
        """``verb plural[/name][/subresource]``, e.g. ``patch stages/prod/status``."""
        text = f"{self.verb} {self.resource.plural}"
        if self.name:
            text += f"/{self.name}"
        subresource = self.options.get("subresource")
        return text + f"/{subresource}" if subresource else text


class Events:
    """``types.EventRecorder`` that records: ``emitted`` as (type, reason, message),
    ``objects`` the objects they were about, in the same order."""

    def __init__(self) -> None:
        self.emitted: list[tuple[str, str, str]] = []
        self.objects: list[Mapping[str, Any]] = []
        self._lock = threading.Lock()

    def emit(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        with self._lock:
            self.emitted.append((type, reason, message))
            self.objects.append(obj)

    def reasons(self) -> list[str]:
        return [reason for _, reason, _ in self.emitted]


def _default_clock() -> Callable[[], dt.datetime]:
    """One second later at every call, from 2026-01-01: creation order is time order."""
    ticks = iter(range(1 << 62))
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return lambda: start + dt.timedelta(seconds=next(ticks))


def _stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class _Change:
    rv: int
    key: tuple[str, str]
    type: str  # ADDED, MODIFIED, DELETED
    old: Obj | None
    new: Obj


# ---------------------------------------------------------------- the fake


class FakeApi:
    """The fake API server and its client in one; see the module docstring."""

    def __init__(self, *, interceptors: Interceptors | None = None, follow: bool = False,
                 clock: Callable[[], dt.datetime] | None = None,
                 status_subresource: Iterable[Resource] | None = None) -> None:
        self.interceptors = interceptors or Interceptors()
        self.follow = follow
        self.clock = clock or _default_clock()
        self.requests: list[Request] = []
        self.wire: list[tuple[str, str, dict[str, Any]]] = []  # (method, path, query): rest()
        self._status = (STATUS_SUBRESOURCE if status_subresource is None
                        else frozenset((r.group, r.plural) for r in status_subresource))
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._kinds: dict[tuple[str, str], Resource] = {}
        self._objects: dict[tuple[str, str], dict[tuple[str, str], Obj]] = {}
        self._log: list[_Change] = []
        self._compacted = 0
        self._rv = 1
        self._serial = 0
        self._closed = 0  # close_watches() calls
        self._mirrors: list[Store] = []
        self._held: list[tuple[tuple[str, str], Obj | None, Obj]] | None = None  # hold()
        for resource in KNOWN:
            self.register(resource)

    # ------------------------------------------------------------ set-up and inspection

    def register(self, resource: Resource) -> Resource:
        """Make a resource known (every ``kubekit.kinds`` one is); the canonical form,
        without field or label selector."""
        canonical = Resource(resource.group, resource.version, resource.plural,
                             resource.kind, resource.namespaced)
        with self._lock:
            self._kinds.setdefault((resource.group, resource.plural), canonical)
            self._objects.setdefault((resource.group, resource.plural), {})
        return canonical

    @property
    def direct(self) -> _Direct:
        """This fake without interceptors and without recording: what hooks call."""
        return _Direct(self)

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
            self._store(resource, old, obj)
            return copy.deepcopy(obj)

    def remove(self, resource: Resource, namespace: str, name: str) -> None:
        """Delete outright, whatever its finalizers (set-up); watches see it."""
        resource = self.register(resource)
        with self._lock:
            old = self._get(resource, namespace, name)
            if old is not None:
                self._store(resource, old, None)

    def objects(self, resource: Resource, namespace: str | None = None) -> builtins.list[Obj]:
        """Copies of the stored objects, in (namespace, name) order."""
        resource = self.register(resource)
        with self._lock:
            return [copy.deepcopy(o) for o in self._scope(resource, namespace)]

    def names(self, resource: Resource, namespace: str | None = None) -> builtins.list[str]:
        return [o["metadata"]["name"] for o in self.objects(resource, namespace)]

    def writes(self) -> builtins.list[str]:
        """The writes that succeeded, in order, as ``verb plural/name[/subresource]``."""
        with self._lock:
            return [str(r) for r in self.requests if r.verb in WRITES and r.error is None]

    def fail(self, verb: str, error: ApiException | int, *, times: int = 1,
             when: Callable[[Request], bool] | None = None) -> None:
        """Make the next ``times`` calls of ``verb`` for which ``when(request)`` holds
        raise ``error`` (an ApiException, or a status for :func:`api_error`); the others,
        and those after, go to the hook that was there before (or the fake)."""
        exc = api_error(error) if isinstance(error, int) else error
        previous = getattr(self.interceptors, verb)
        left = [times]

        def hook(client: _Direct, *args: Any, **kwargs: Any) -> Any:
            request = _request(verb, args, kwargs)
            with self._lock:
                fire = left[0] > 0 and (when is None or when(request))
                if fire:
                    left[0] -= 1
            if fire:
                raise copy.copy(exc)
            if previous is not None:
                return previous(client, *args, **kwargs)
            return getattr(client, verb)(*args, **kwargs)

        setattr(self.interceptors, verb, hook)

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
                self._mirror(key, new, target)

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
                self.register(resource)
                store = Store(resource, (transforms or {}).get(resource))
                for index_name, func in ((indexes or {}).get(resource) or {}).items():
                    store.add_index(index_name, func)
                for obj in self._scope(resource, None):
                    if _selected(resource, obj):
                        store.upsert(store.transform(copy.deepcopy(obj)))
                stores[resource] = store
                if live:
                    self._mirrors.append(store)
            return stores

    def cache(self, *resources: Resource, live: bool = True,
              indexes: Mapping[Resource, Mapping[str, IndexFunc]] | None = None,
              transforms: Mapping[Resource, Transform] | None = None) -> CacheView:
        """``CacheView(self.stores(*resources, live=live, indexes=indexes,
        transforms=transforms))``."""
        return CacheView(self.stores(*resources, live=live, indexes=indexes,
                                     transforms=transforms))

    def rest(self) -> Rest:
        """A real ``kubekit.rest.Rest`` answered by this fake: its ``raw`` requests are
        recorded in :attr:`wire` and routed to the fake's verbs (interceptors apply)."""
        return _WireRest(self)

    # ------------------------------------------------------------ the client surface

    def get(self, resource: Resource, namespace: str, name: str, *,
            timeout: Any = None) -> Obj | None:
        found: Obj | None = self._call("get", resource, namespace, name, timeout=timeout)
        return found

    def list(self, resource: Resource, namespace: str | None = None, *,
             timeout: Any = None, **query: Any) -> Obj:
        page: Obj = self._call("list", resource, namespace, timeout=timeout, **query)
        return page

    def create(self, resource: Resource, namespace: str, body: Obj, *,
               timeout: Any = None) -> Obj:
        created: Obj = self._call("create", resource, namespace, body, timeout=timeout)
        return created

    def replace(self, resource: Resource, namespace: str, name: str, body: Obj, *,
                subresource: str = "", timeout: Any = None) -> Obj:
        replaced: Obj = self._call("replace", resource, namespace, name, body,
                                   subresource=subresource, timeout=timeout)
        return replaced

    def patch(self, resource: Resource, namespace: str, name: str, body: Any, *,
              content_type: str = MERGE_PATCH, subresource: str = "",
              field_manager: str | None = None, force: bool | None = None) -> Obj:
        patched: Obj = self._call("patch", resource, namespace, name, body,
                                  content_type=content_type, subresource=subresource,
                                  field_manager=field_manager, force=force)
        return patched

    def delete(self, resource: Resource, namespace: str, name: str, **query: Any) -> None:
        self._call("delete", resource, namespace, name, **query)

    def watch(self, resource: Resource, namespace: str | None, *, resource_version: str,
              timeout_seconds: int, on_open: Callable[[], None] | None = None,
              ) -> Iterator[Obj]:
        """The events (``{"type", "object"}``); like ``Rest.watch``, the request (and a
        hook raising) happens when the iteration starts, but it is recorded at once.
        ``on_open`` (as ``Rest.watch``'s): called once the hook (or the fake) has taken
        the request, before the first event; a hook that is a plain function and raises
        is a request the server never answered."""
        request = _request("watch", (resource, namespace),
                           {"resource_version": resource_version,
                            "timeout_seconds": timeout_seconds})
        with self._lock:
            self.requests.append(request)
        return self._watching(request, resource, namespace, resource_version=resource_version,
                              timeout_seconds=timeout_seconds, on_open=on_open)

    def _watching(self, request: Request, resource: Resource, namespace: str | None, *,
                  resource_version: str, timeout_seconds: int,
                  on_open: Callable[[], None] | None = None) -> Iterator[Obj]:
        hook = self.interceptors.watch
        client = self.direct
        try:
            if hook is None:
                events = client.watch(resource, namespace, resource_version=resource_version,
                                      timeout_seconds=timeout_seconds)
            else:
                events = hook(client, resource, namespace, resource_version=resource_version,
                              timeout_seconds=timeout_seconds)
            if on_open is not None:
                on_open()
            yield from events
        except BaseException as exc:
            if not isinstance(exc, GeneratorExit):
                request.error = exc
            raise

    def _call(self, verb: str, *args: Any, **kwargs: Any) -> Any:
        # Keyword arguments left at None were not passed (the hook sees what was).
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        request = _request(verb, args, kwargs)
        with self._lock:
            self.requests.append(request)
        hook = getattr(self.interceptors, verb)
        client = self.direct
        try:
            if hook is not None:
                return hook(client, *args, **kwargs)
            return getattr(client, verb)(*args, **kwargs)
        except BaseException as exc:
            request.error = exc
            raise

    # ------------------------------------------------------------ the fake's behaviour

    def _get_verb(self, resource: Resource, namespace: str, name: str, *,
                  timeout: Any = None) -> Obj | None:
        with self._lock:
            found = self._get(self.register(resource), namespace, name)
            return copy.deepcopy(found) if found is not None else None

    def _list_verb(self, resource: Resource, namespace: str | None = None, *,
                   timeout: Any = None, **query: Any) -> Obj:
        canonical = self.register(resource)
        selector = query.get("fieldSelector") or resource.field_selector
        labels = query.get("labelSelector") or resource.label_selector
        with self._lock:
            items = [o for o in self._scope(canonical, namespace)
                     if _fields_match(selector, o) and _labels_match(labels, o)]
            offset = int(query.get("continue") or 0)
            limit = int(query.get("limit") or 0)
            page = items[offset:offset + limit] if limit else items[offset:]
            meta: Obj = {"resourceVersion": str(self._rv)}
            if limit and offset + limit < len(items):
                meta["continue"] = str(offset + limit)
            out = []
            for obj in page:
                item = copy.deepcopy(obj)
                item.pop("apiVersion", None)
                item.pop("kind", None)
                out.append(item)
        return {"apiVersion": canonical.api_version, "kind": f"{canonical.kind}List",
                "metadata": meta, "items": out}

    def _create_verb(self, resource: Resource, namespace: str, body: Obj, *,
                     timeout: Any = None) -> Obj:
        resource = self.register(resource)
        with self._lock:
            obj = self._prepare_create(resource, namespace, body)
            self._store(resource, None, obj)
            return copy.deepcopy(obj)

    def _prepare_create(self, resource: Resource, namespace: str, body: Obj) -> Obj:
        """``body`` as the API server would store it on create (lock held), or raise."""
        obj = copy.deepcopy(body)
        obj["apiVersion"], obj["kind"] = resource.api_version, resource.kind
        meta = obj.setdefault("metadata", {})
        with self._lock:
            if meta.get("resourceVersion"):
                raise api_error(500, "InternalError",
                                "resourceVersion should not be set on objects to be created")
            if not meta.get("name"):
                if not meta.get("generateName"):
                    raise _invalid(resource, "", "metadata.name: Required value")
                self._serial += 1
                meta["name"] = f"{meta['generateName']}{self._serial:05x}"
            ns = namespace if resource.namespaced else ""
            if resource.namespaced:
                meta["namespace"] = namespace
            if self._get(resource, ns, meta["name"]) is not None:
                raise api_error(409, "AlreadyExists",
                                f'{_gr(resource)} "{meta["name"]}" already exists')
            self._serial += 1
            meta["uid"] = str(uuid.UUID(int=self._serial))
            meta["creationTimestamp"] = _stamp(self.clock())
            for server_set in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                meta.pop(server_set, None)
            if self._key(resource) not in NO_GENERATION:
                meta["generation"] = 1
            if self._key(resource) in self._status:
                obj.pop("status", None)
            return obj

    def _replace_verb(self, resource: Resource, namespace: str, name: str, body: Obj, *,
                      subresource: str = "", timeout: Any = None) -> Obj:
        resource = self.register(resource)
        with self._lock:
            current = self._existing(resource, namespace, name, subresource)
            if (body.get("metadata") or {}).get("name", name) != name:
                raise api_error(400, "BadRequest", "the name of the object does not "
                                "match the name on the URL")
            self._precondition(resource, current, body)
            return self._update(resource, current, copy.deepcopy(body), subresource)

    def _patch_verb(self, resource: Resource, namespace: str, name: str, body: Any, *,
                    content_type: str = MERGE_PATCH, subresource: str = "",
                    field_manager: str | None = None, force: bool | None = None) -> Obj:
        resource = self.register(resource)
        if content_type == APPLY_PATCH:
            return self._apply(resource, namespace, name, body, subresource=subresource,
                               field_manager=field_manager, force=bool(force))
        if content_type not in (MERGE_PATCH, JSON_PATCH):
            raise api_error(415, "UnsupportedMediaType",
                            f"the body of the request was in an unknown format: {content_type}")
        with self._lock:
            current = self._existing(resource, namespace, name, subresource)
            if content_type == JSON_PATCH:
                try:
                    patched = _json_patch(current, body)
                except _PatchFailed as exc:
                    raise _invalid(resource, name, f"patch: {exc}") from None
            else:
                if not isinstance(body, dict):
                    raise api_error(400, "BadRequest", "a merge patch must be an object")
                self._precondition(resource, current, body)
                patched = _merge_patch(current, body)
            return self._update(resource, current, patched, subresource)

    def _delete_verb(self, resource: Resource, namespace: str, name: str,
                     **query: Any) -> None:
        resource = self.register(resource)
        with self._lock:
            current = self._get(resource, namespace, name)
            if current is None:
                return
            if current["metadata"].get("finalizers"):
                if not current["metadata"].get("deletionTimestamp"):
                    marked = copy.deepcopy(current)
                    marked["metadata"]["deletionTimestamp"] = _stamp(self.clock())
                    marked["metadata"]["deletionGracePeriodSeconds"] = 0
                    self._store(resource, current, marked)
                return
            self._store(resource, current, None)

    def _watch_verb(self, resource: Resource, namespace: str | None, *,
                    resource_version: str, timeout_seconds: int) -> Iterator[Obj]:
        canonical = self.register(resource)
        key = self._key(canonical)
        namespace = namespace if canonical.namespaced else None
        deadline = time.monotonic() + timeout_seconds
        with self._lock:
            closed_at_start = self._closed
            if resource_version in ("", "0"):
                start = self._rv
                backlog: list[Obj] = [
                    {"type": "ADDED", "object": copy.deepcopy(o)}
                    for o in self._scope(canonical, namespace) if _selected(resource, o)]
            else:
                start = int(resource_version)
                if start < self._compacted:
                    backlog = [{"type": "ERROR", "object": {
                        "kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "code": 410, "reason": "Expired",
                        "message": f"too old resource version: {start} ({self._compacted})"}}]
                    start = -1
                else:
                    backlog = []
        yield from backlog
        if start < 0:
            return
        seen = start
        while True:
            with self._changed:
                events = [e for c in self._log if c.rv > seen and c.key == key
                          for e in _seen_by(c, namespace, resource)]
                seen = self._rv
                if not events and self.follow and self._closed == closed_at_start:
                    left = deadline - time.monotonic()
                    if left > 0:
                        self._changed.wait(left)
                        continue
                bookmark = {"type": "BOOKMARK", "object": {
                    "apiVersion": canonical.api_version, "kind": canonical.kind,
                    "metadata": {"resourceVersion": str(self._rv)}}}
            yield from events
            if events and self.follow:
                continue
            yield bookmark
            return

    # ------------------------------------------------------------ internals

    @staticmethod
    def _key(resource: Resource) -> tuple[str, str]:
        return resource.group, resource.plural

    def _get(self, resource: Resource, namespace: str, name: str) -> Obj | None:
        ns = namespace if resource.namespaced else ""
        return self._objects[self._key(resource)].get((ns or "", name))

    def _scope(self, resource: Resource, namespace: str | None) -> builtins.list[Obj]:
        objs = self._objects[self._key(resource)]
        return [objs[k] for k in sorted(objs)
                if not namespace or not resource.namespaced or k[0] == namespace]

    def _existing(self, resource: Resource, namespace: str, name: str,
                  subresource: str) -> Obj:
        if subresource and (subresource != "status" or self._key(resource) not in self._status):
            raise api_error(404, "NotFound", f"the server could not find the requested "
                            f"resource ({resource.plural}/{subresource})")
        current = self._get(resource, namespace, name)
        if current is None:
            raise _not_found(resource, name)
        return current

    def _precondition(self, resource: Resource, current: Obj, body: Obj) -> None:
        expected = (body.get("metadata") or {}).get("resourceVersion")
        if expected and expected != current["metadata"].get("resourceVersion"):
            raise _conflict(resource, current["metadata"]["name"])

    def _update(self, resource: Resource, current: Obj, new: Obj, subresource: str, *,
                managed_fields: Any = None) -> Obj:
        """Store ``new`` in place of ``current`` as the API server would take it (lock
        held); ``managed_fields``: set by an apply, also to the status subresource."""
        key = self._key(resource)
        if key in self._status:
            if subresource == "status":
                status = new.get("status")
                new = copy.deepcopy(current)
                new.pop("status", None)
                if status is not None:
                    new["status"] = status
                if managed_fields is not None:
                    new["metadata"]["managedFields"] = managed_fields
            else:
                new.pop("status", None)
                if "status" in current:
                    new["status"] = copy.deepcopy(current["status"])
        meta = new.setdefault("metadata", {})
        old_meta = current["metadata"]
        for fixed in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generation"):
            if fixed in old_meta:
                meta[fixed] = old_meta[fixed]
            else:
                meta.pop(fixed, None)
        if "managedFields" not in meta and "managedFields" in old_meta:
            meta["managedFields"] = old_meta["managedFields"]
        meta["resourceVersion"] = old_meta.get("resourceVersion")
        new["apiVersion"], new["kind"] = resource.api_version, resource.kind
        if old_meta.get("deletionTimestamp") and not set(meta.get("finalizers") or ()) <= set(
                old_meta.get("finalizers") or ()):
            raise _invalid(resource, meta["name"], "metadata.finalizers: Forbidden: no new "
                           "finalizers can be added if the object is being deleted")
        if new == current:
            return copy.deepcopy(current)  # nothing changed: no write, no event
        if key not in NO_GENERATION and "generation" in old_meta and _spec_of(
                new, key in self._status) != _spec_of(current, key in self._status):
            meta["generation"] = old_meta["generation"] + 1
        if old_meta.get("deletionTimestamp") and not meta.get("finalizers"):
            self._store(resource, current, None, last=new)  # the last finalizer is gone
        else:
            self._store(resource, current, new)
        return copy.deepcopy(new)

    def _apply(self, resource: Resource, namespace: str, name: str, body: Any, *,
               subresource: str, field_manager: str | None, force: bool) -> Obj:
        if not field_manager:
            raise api_error(400, "BadRequest", "PATCH requests of type apply must set "
                            "the fieldManager parameter")
        if not isinstance(body, dict):
            raise api_error(400, "BadRequest", "an apply patch must be an object")
        with self._lock:
            current = self._get(resource, namespace, name)
            if current is None:
                if subresource:
                    raise _not_found(resource, name)
                # Created by the apply, in one write: the object with its managedFields.
                base = self._prepare_create(resource, namespace, {
                    "metadata": {"name": name}})
                new = self._apply_fields(resource, base, body, subresource, field_manager,
                                         force)
                self._store(resource, None, new)
                return copy.deepcopy(new)
            self._existing(resource, namespace, name, subresource)
            new = self._apply_fields(resource, current, body, subresource, field_manager,
                                     force)
            # Like a replace (status rules, generation), without the resourceVersion check.
            return self._update(resource, current, new, subresource,
                                managed_fields=new["metadata"].get("managedFields"))

    def _apply_fields(self, resource: Resource, current: Obj, body: Obj, subresource: str,
                      manager: str, force: bool) -> Obj:
        """``current`` with ``body`` applied by ``manager`` (not stored)."""
        status_part = self._key(resource) in self._status
        applied = _applied_paths(body, subresource=subresource, status_part=status_part)
        entries = [e for e in current["metadata"].get("managedFields") or []]
        mine = [e for e in entries if e.get("manager") == manager
                and e.get("operation") == "Apply" and e.get("subresource", "") == subresource]
        others = [e for e in entries if e not in mine]
        owned_before = set().union(*(_paths_of(e.get("fieldsV1") or {}) for e in mine))
        new = copy.deepcopy(current)
        kept_others = []
        for entry in others:
            theirs = _paths_of(entry.get("fieldsV1") or {})
            clash = {p for p in theirs & applied
                     if entry.get("operation") == "Apply"
                     and _at(current, p) != _at(body, p)}
            if clash and not force:
                raise api_error(409, "Conflict", "Apply failed with "
                                f"{len(clash)} conflict(s): conflicts with {entry['manager']!r}: "
                                + ", ".join(".".join(p) for p in sorted(clash)))
            theirs -= clash
            if theirs:
                kept_others.append({**entry, "fieldsV1": _fields_of(theirs)})
        owned_by_others = set().union(*(_paths_of(e["fieldsV1"]) for e in kept_others))
        for path in sorted(owned_before - applied - owned_by_others, reverse=True):
            _remove_at(new, path)
        _deep_merge(new, {k: v for k, v in body.items() if k not in ("apiVersion", "kind")})
        entry = {"manager": manager, "operation": "Apply", "apiVersion": resource.api_version,
                 "time": _stamp(self.clock()), "fieldsType": "FieldsV1",
                 "fieldsV1": _fields_of(applied)}
        if subresource:
            entry["subresource"] = subresource
        new["metadata"]["managedFields"] = [*kept_others, entry] if applied else kept_others
        if self._key(resource) in self._status and not subresource:
            new.pop("status", None)
            if "status" in current:
                new["status"] = copy.deepcopy(current["status"])
        return new

    def _store(self, resource: Resource, old: Obj | None, new: Obj | None, *,
               last: Obj | None = None) -> None:
        """Commit a change (lock held): the new resourceVersion, the event, the mirrors.
        ``new`` None: a deletion, whose event carries ``last`` (default ``old``)."""
        key = self._key(resource)
        self._rv += 1
        target = new if new is not None else copy.deepcopy(last if last is not None else old)
        assert target is not None
        meta = target["metadata"]
        meta["resourceVersion"] = str(self._rv)
        ns = (meta.get("namespace") or "") if resource.namespaced else ""
        if new is None:
            self._objects[key].pop((ns, meta["name"]), None)
            change = _Change(self._rv, key, "DELETED", old, copy.deepcopy(target))
        else:
            self._objects[key][(ns, meta["name"])] = new
            change = _Change(self._rv, key, "MODIFIED" if old is not None else "ADDED",
                             copy.deepcopy(old), copy.deepcopy(new))
        self._log.append(change)
        if self._held is not None:
            self._held.append((key, copy.deepcopy(new), copy.deepcopy(target)))
        else:
            self._mirror(key, new, target)
        self._changed.notify_all()

    def _mirror(self, key: tuple[str, str], new: Obj | None, target: Obj) -> None:
        """One change into the live caches (lock held), as their informers take a watch
        event: a newer version replaces, an object leaving the selector goes."""
        for store in self._mirrors:
            if self._key(store.resource) != key:
                continue
            if new is None or not _selected(store.resource, new):
                store.remove(target)
            else:
                store.upsert_if_newer(store.transform(copy.deepcopy(new)))


class _Direct:
    """The fake's own behaviour for each verb, without interceptors or recording; every
    other attribute is the fake's (set-up methods, ``objects``...)."""

    def __init__(self, api: FakeApi) -> None:
        self._api = api

    def __getattr__(self, name: str) -> Any:
        if name in VERBS:
            return functools.partial(getattr(FakeApi, f"_{name}_verb"), self._api)
        return getattr(self._api, name)


def _request(verb: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Request:
    resource, namespace, *rest = args
    name = body = None
    if verb == "create":
        body = rest[0]
        name = (body.get("metadata") or {}).get("name") if isinstance(body, dict) else None
    elif verb in ("replace", "patch"):
        name, body = rest[0], rest[1]
    elif verb in ("get", "delete"):
        name = rest[0]
    return Request(verb, resource, namespace, name, copy.deepcopy(body), dict(kwargs))


def _seen_by(change: _Change, namespace: str | None, resource: Resource) -> list[Obj]:
    """The event a watch of ``namespace`` with ``resource``'s selectors gets for
    ``change``."""
    obj = change.new
    if namespace and (obj["metadata"].get("namespace") or "") != namespace:
        return []
    now = change.type != "DELETED" and _selected(resource, obj)
    before = change.old is not None and _selected(resource, change.old)
    if change.type == "DELETED":
        return [{"type": "DELETED", "object": copy.deepcopy(obj)}] if before else []
    if now:
        kind = "MODIFIED" if before else "ADDED"
        return [{"type": kind, "object": copy.deepcopy(obj)}]
    return [{"type": "DELETED", "object": copy.deepcopy(obj)}] if before else []


# ---------------------------------------------------------------- selectors


def _split(selector: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts


def _field(obj: Obj, dotted: str) -> Any:
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _fields_match(selector: str | None, obj: Obj) -> bool:
    for term in _split(selector or ""):
        negate = "!=" in term
        name, _, value = term.partition("!=" if negate else "=")
        value = value.removeprefix("=")
        actual = _field(obj, name.strip())
        equal = ("" if actual is None else str(actual)) == value.strip()
        if equal == negate:
            return False
    return True


def _selected(resource: Resource, obj: Obj) -> bool:
    """Whether ``obj`` is in what ``resource`` selects (its field and label selectors)."""
    return (_fields_match(resource.field_selector, obj)
            and _labels_match(resource.label_selector, obj))


_SET = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s*\(([^)]*)\)\s*$")


def _labels_match(selector: str | None, obj: Obj) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in _split(selector or ""):
        found = _SET.match(term)
        if found:
            key, op, values = found.groups()
            inside = labels.get(key) in {v.strip() for v in values.split(",")}
            if inside != (op == "in") or (op == "in" and key not in labels):
                return False
        elif "!=" in term:
            key, _, value = term.partition("!=")
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, _, value = term.partition("=")
            if labels.get(key.strip()) != value.removeprefix("=").strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif term not in labels:
            return False
    return True


# ---------------------------------------------------------------- patches


class _PatchFailed(Exception):
    pass


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge_patch(out.get(key), value)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _PatchFailed(f"invalid JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise _PatchFailed(f"path /{'/'.join(parts)}: {part!r} does not exist")
    return node, parts[-1]


def _read(doc: Any, parts: list[str]) -> Any:
    if not parts:
        return doc
    node, last = _parent(doc, parts)
    if isinstance(node, dict) and last in node:
        return node[last]
    if isinstance(node, list) and last.isdigit() and int(last) < len(node):
        return node[int(last)]
    raise _PatchFailed(f"path /{'/'.join(parts)} does not exist")


def _add(doc: Any, parts: list[str], value: Any) -> Any:
    if not parts:
        return value
    node, last = _parent(doc, parts)
    if isinstance(node, dict):
        node[last] = value
    elif isinstance(node, list) and (last == "-" or (last.isdigit() and int(last) <= len(node))):
        node.insert(len(node) if last == "-" else int(last), value)
    else:
        raise _PatchFailed(f"cannot add at /{'/'.join(parts)}")
    return doc


def _take(doc: Any, parts: list[str]) -> Any:
    value = _read(doc, parts)
    node, last = _parent(doc, parts)
    if isinstance(node, dict):
        del node[last]
    else:
        del node[int(last)]
    return value


def _json_patch(target: Obj, ops: Any) -> Obj:
    """RFC 6902 on a copy of ``target``."""
    if not isinstance(ops, list):
        raise _PatchFailed("a JSON patch must be a list of operations")
    doc: Any = copy.deepcopy(target)
    for op in ops:
        kind, parts = op.get("op"), _pointer(op.get("path", ""))
        if kind == "test":
            if _read(doc, parts) != op.get("value"):
                raise _PatchFailed(f"test failed at {op['path']}")
        elif kind == "remove":
            _take(doc, parts)
        elif kind == "add":
            doc = _add(doc, parts, copy.deepcopy(op.get("value")))
        elif kind == "replace":
            _read(doc, parts)  # it must exist
            value = copy.deepcopy(op.get("value"))
            if not parts:
                doc = value
            else:
                node, last = _parent(doc, parts)
                node[last if isinstance(node, dict) else int(last)] = value
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = _take(doc, source) if kind == "move" else copy.deepcopy(_read(doc, source))
            doc = _add(doc, parts, value)
        else:
            raise _PatchFailed(f"unknown op {kind!r}")
    if not isinstance(doc, dict):
        raise _PatchFailed("the patched object is not an object")
    return doc


# ---------------------------------------------------------------- server-side apply

Path = tuple[str, ...]


def _leaves(value: Any, prefix: Path = ()) -> set[Path]:
    if isinstance(value, dict) and value:
        return set().union(*(_leaves(v, (*prefix, k)) for k, v in value.items()))
    return {prefix} if prefix else set()


def _applied_paths(body: Obj, *, subresource: str, status_part: bool) -> set[Path]:
    meta = body.get("metadata") or {}
    if subresource == "status":
        return _leaves({"status": body.get("status")}) if "status" in body else set()
    top = {k: v for k, v in body.items() if k not in ("apiVersion", "kind", "metadata")
           and not (status_part and k == "status")}
    top["metadata"] = {k: v for k, v in meta.items()
                       if k in ("labels", "annotations", "finalizers", "ownerReferences")}
    if not top["metadata"]:
        del top["metadata"]
    return _leaves(top)


def _fields_of(paths: set[Path]) -> Obj:
    out: Obj = {}
    for path in paths:
        node = out
        for part in path:
            node = node.setdefault(f"f:{part}", {})
    return out


def _paths_of(fields_v1: Obj, prefix: Path = ()) -> set[Path]:
    children = {k: v for k, v in fields_v1.items() if k.startswith("f:")}
    if not children:
        return {prefix} if prefix else set()
    return set().union(*(_paths_of(v, (*prefix, k[2:])) for k, v in children.items()))


def _at(obj: Any, path: Path) -> Any:
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def _remove_at(obj: Obj, path: Path) -> None:
    node: Any = obj
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(path[-1], None)


def _deep_merge(dst: Obj, src: Obj) -> None:
    for key, value in src.items():
        if isinstance(value, dict) and isinstance(dst.get(key), dict):
            _deep_merge(dst[key], value)
        else:
            dst[key] = copy.deepcopy(value)


def _spec_of(obj: Obj, without_status: bool) -> Obj:
    return {k: v for k, v in obj.items()
            if k not in ("metadata", "apiVersion", "kind")
            and not (without_status and k == "status")}


# ---------------------------------------------------------------- the wire


class _Stream:
    """The part of a urllib3 response that ``Rest.watch`` reads."""

    def __init__(self, events: Iterator[Obj]) -> None:
        self.events = events

    def stream(self, amt: int, decode_content: bool) -> Iterator[bytes]:
        for event in self.events:
            yield json.dumps(event).encode() + b"\n"

    def release_conn(self) -> None:
        close = getattr(self.events, "close", None)
        if close is not None:
            close()


_PATH = re.compile(r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
                   r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)"
                   r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$")


class _WireRest(Rest):
    def __init__(self, api: FakeApi) -> None:
        super().__init__(api=None)  # type: ignore[arg-type]
        self.fake = api

    def raw(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
            body: Any = None, content_type: str = JSON, timeout: Any = None,
            stream: bool = False) -> Any:
        sent = {k: v for k, v in (query or {}).items() if v is not None}
        with self.fake._lock:
            self.fake.wire.append((method, path, dict(sent)))
        found = _PATH.match(path)
        if found is None:
            raise api_error(404, "NotFound", f"no route for {path}")
        group = found["group"] or ""
        resource = self.fake._kinds.get((group, found["plural"]))
        if resource is None:
            raise api_error(404, "NotFound", f"the server could not find {path}")
        namespace = unquote(found["ns"]) if found["ns"] else None
        name = unquote(found["name"]) if found["name"] else None
        sub = found["sub"] or ""
        if method == "GET" and name is None:
            if str(sent.get("watch")).lower() == "true":
                # The fake's watch takes the selectors on the resource.
                resource = dataclasses.replace(resource,
                                               field_selector=sent.get("fieldSelector"),
                                               label_selector=sent.get("labelSelector"))
                return _Stream(iter(self.fake.watch(
                    resource, namespace, resource_version=str(sent.get("resourceVersion", "")),
                    timeout_seconds=int(sent.get("timeoutSeconds", 300)))))
            params = {k: sent[k] for k in ("labelSelector", "fieldSelector", "limit", "continue")
                      if k in sent}
            return self.fake.list(resource, namespace, timeout=timeout, **params)
        assert name is not None or method == "POST", (method, path)
        ns = namespace or ""
        if method == "GET":
            obj = self.fake.get(resource, ns, name or "", timeout=timeout)
            if obj is None:
                raise _not_found(resource, name or "")
            return obj
        if method == "POST":
            return self.fake.create(resource, ns, body, timeout=timeout)
        if method == "PUT":
            return self.fake.replace(resource, ns, name or "", body, subresource=sub,
                                     timeout=timeout)
        if method == "PATCH":
            return self.fake.patch(resource, ns, name or "", body, content_type=content_type,
                                   subresource=sub, field_manager=sent.get("fieldManager"),
                                   force=sent.get("force"))
        if method == "DELETE":
            if self.fake.direct.get(resource, ns, name or "") is None:
                raise _not_found(resource, name or "")
            self.fake.delete(resource, ns, name or "", **sent)
            return None
        raise api_error(405, "MethodNotAllowed", f"{method} {path}")


# ---------------------------------------------------------------- controllers


def context(api: FakeApi, *, controller: Any = None, cache: Any = None,
            events: Events | None = None, metrics: Any = None,
            options: RuntimeOptions | None = None) -> Context:
    """A controller's ``Context`` over ``api``: by default a live cache of the
    resources the controller watches (every registered one without a controller),
    with the indexes and cache transforms it declares (so every scenario runs on the
    objects as the cache keeps them); a new :class:`Events`; ``options`` as the runtime's
    (its defaults without). A controller's own options are given to the controller."""
    if cache is None:
        watched = tuple(w.resource for w in getattr(controller, "watches", ()) or ())
        cache = api.cache(*watched, indexes=getattr(controller, "indexes", None),
                          transforms=getattr(controller, "transforms", None))
    return Context(cache=cache, client=api, events=events or Events(),
                   options=options if options is not None else RuntimeOptions(),
                   metrics=metrics)


__all__ = ["VERBS", "Events", "FakeApi", "Interceptors", "Request", "api_error", "context",
           "never"]
