"""A real ``kubekit.rest.Rest`` answered by the fake at the HTTP level: its requests'
paths and query parameters are recorded and routed to the fake's verbs (interceptors
apply), and a watch answers with the lines a real one streams; for tests of what
``Rest`` sends."""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from kubekit.kinds import Resource
from kubekit.rest import JSON, Rest

from .errors import api_error, not_found

if TYPE_CHECKING:
    from .api import FakeApi

Obj = dict[str, Any]
_PATH = re.compile(r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
                   r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)"
                   r"(?:/(?P<name>[^/]+)(?:/(?P<sub>[^/]+))?)?$")
_LIST_QUERY = ("labelSelector", "fieldSelector", "limit", "continue")


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


@dataclass(frozen=True)
class _Route:
    """What a request's path names."""

    resource: Resource
    namespace: str | None
    name: str | None
    subresource: str


class WireRest(Rest):
    """``Rest`` whose every request goes to ``fake`` instead of a server."""

    def __init__(self, api: FakeApi) -> None:
        super().__init__(api=None)  # type: ignore[arg-type]
        self.fake = api

    def raw(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
            body: Any = None, content_type: str = JSON, timeout: Any = None,
            stream: bool = False) -> Any:
        sent = {k: v for k, v in (query or {}).items() if v is not None}
        with self.fake._lock:
            self.fake.wire.append((method, path, dict(sent)))
        route = self._route(path)
        if method == "GET" and route.name is None:
            return self._collection(route, sent=sent, timeout=timeout)
        if method == "POST":
            return self.fake.create(route.resource, route.namespace or "", body, timeout=timeout)
        if route.name is None or method not in _OBJECT_VERBS:
            raise api_error(405, "MethodNotAllowed", f"{method} {path}")
        return _OBJECT_VERBS[method](self.fake, route, route.name, body=body, sent=sent,
                                     content_type=content_type, timeout=timeout)

    def _route(self, path: str) -> _Route:
        found = _PATH.match(path)
        if found is None:
            raise api_error(404, "NotFound", f"no route for {path}")
        resource = self.fake._kinds.get((found["group"] or "", found["plural"]))
        if resource is None:
            raise api_error(404, "NotFound", f"the server could not find {path}")
        return _Route(resource, unquote(found["ns"]) if found["ns"] else None,
                      unquote(found["name"]) if found["name"] else None, found["sub"] or "")

    def _collection(self, route: _Route, *, sent: dict[str, Any], timeout: Any) -> Any:
        """A list, or with ``watch=true`` a watch stream."""
        if str(sent.get("watch")).lower() != "true":
            params = {k: sent[k] for k in _LIST_QUERY if k in sent}
            return self.fake.list(route.resource, route.namespace, timeout=timeout, **params)
        # The fake's watch takes the selectors on the resource.
        resource = dataclasses.replace(route.resource, field_selector=sent.get("fieldSelector"),
                                       label_selector=sent.get("labelSelector"))
        return _Stream(iter(self.fake.watch(
            resource, route.namespace, resource_version=str(sent.get("resourceVersion", "")),
            timeout_seconds=int(sent.get("timeoutSeconds", 300)))))


# Each verb on one object: (fake, route, name, body=, sent=, content_type=, timeout=).


def _get(fake: FakeApi, route: _Route, name: str, *, timeout: Any, **_: Any) -> Obj:
    obj = fake.get(route.resource, route.namespace or "", name, timeout=timeout)
    if obj is None:
        raise not_found(route.resource, name)
    return obj


def _put(fake: FakeApi, route: _Route, name: str, *, body: Any, timeout: Any,
         **_: Any) -> Obj:
    return fake.replace(route.resource, route.namespace or "", name, body,
                        subresource=route.subresource, timeout=timeout)


def _patch(fake: FakeApi, route: _Route, name: str, *, body: Any, sent: dict[str, Any],
           content_type: str, **_: Any) -> Obj:
    return fake.patch(route.resource, route.namespace or "", name, body,
                      content_type=content_type, subresource=route.subresource,
                      field_manager=sent.get("fieldManager"), force=sent.get("force"))


def _delete(fake: FakeApi, route: _Route, name: str, *, sent: dict[str, Any],
            **_: Any) -> None:
    if fake.direct.get(route.resource, route.namespace or "", name) is None:
        raise not_found(route.resource, name)
    fake.delete(route.resource, route.namespace or "", name, **sent)


_OBJECT_VERBS: dict[str, Callable[..., Any]] = {
    "GET": _get, "PUT": _put, "PATCH": _patch, "DELETE": _delete}
