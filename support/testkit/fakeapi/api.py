"""The fake as a client: the ``kubekit.rest.Rest`` surface, each call recorded and passed
to its hook in :class:`Interceptors` (or to the fake's own behaviour), faults injected
per call (:meth:`FakeApi.fail`), and a controller's ``Context`` over the fake
(:func:`context`)."""

from __future__ import annotations

import builtins
import copy
import datetime as dt
import functools
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from kubernetes.client.exceptions import ApiException

from kubekit.kinds import Resource
from kubekit.rest import MERGE_PATCH, Rest
from reconciler.runtime.options import RuntimeOptions
from reconciler.runtime.types import Context

from .errors import api_error
from .records import VERBS, WRITES, Events, Interceptors, Request, request_of
from .server import Server
from .wire import WireRest

Obj = dict[str, Any]


class FakeApi(Server):
    """The fake API server and its client in one; see the package docstring."""

    def __init__(self, *, interceptors: Interceptors | None = None, follow: bool = False,
                 clock: Callable[[], dt.datetime] | None = None,
                 status_subresource: Iterable[Resource] | None = None) -> None:
        super().__init__(follow=follow, clock=clock, status_subresource=status_subresource)
        self.interceptors = interceptors or Interceptors()
        self.requests: list[Request] = []
        self.wire: list[tuple[str, str, dict[str, Any]]] = []  # (method, path, query): rest()

    @property
    def direct(self) -> _Direct:
        """This fake without interceptors and without recording: what hooks call."""
        return _Direct(self)

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
            request = request_of(verb, args=args, kwargs=kwargs)
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

    def rest(self) -> Rest:
        """A real ``kubekit.rest.Rest`` answered by this fake: its ``raw`` requests are
        recorded in :attr:`wire` and routed to the fake's verbs (interceptors apply)."""
        return WireRest(self)

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
        options = {"resource_version": resource_version, "timeout_seconds": timeout_seconds}
        request = request_of("watch", args=(resource, namespace), kwargs=options)
        with self._lock:
            self.requests.append(request)
        return self._watching(request, resource, namespace, options, on_open)

    def _watching(self, request: Request, resource: Resource, namespace: str | None,
                  options: dict[str, Any], on_open: Callable[[], None] | None,
                  ) -> Iterator[Obj]:
        hook = self.interceptors.watch
        client = self.direct
        try:
            if hook is None:
                events = client.watch(resource, namespace, **options)
            else:
                events = hook(client, resource, namespace, **options)
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
        request = request_of(verb, args=args, kwargs=kwargs)
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


class _Direct:
    """The fake's own behaviour for each verb, without interceptors or recording; every
    other attribute is the fake's (set-up methods, ``objects``...)."""

    def __init__(self, api: FakeApi) -> None:
        self._api = api

    def __getattr__(self, name: str) -> Any:
        if name in VERBS:
            return functools.partial(getattr(Server, f"_{name}_verb"), self._api)
        return getattr(self._api, name)


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
