"""Plain-JSON access to any resource through the official client's ApiClient.

rollgate handles every object as unstructured JSON (docs/development.md "Code layout and checks":
the plain-JSON REST helper), so instead of the typed models we send raw requests built
from a ``Resource``. This also keeps watch streams under our control (bookmarks,
resourceVersion, 410 handling) and lets the controllers use merge patches, JSON patches
and server-side apply uniformly.

Errors are ``kubernetes.client.exceptions.ApiException`` (status 0 for transport
errors), classified by the helpers at the bottom.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes.client import ApiClient
from kubernetes.client.exceptions import ApiException

from kubekit.kinds import Resource
from schemas.objects import Obj

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

DEFAULT_TIMEOUT = (5.0, 30.0)  # (connect, read) seconds for ordinary requests


def resource_path(
    resource: Resource,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """URL path of a collection or object; ``namespace`` None/"" = all namespaces."""
    prefix = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    parts = [prefix]
    if resource.namespaced and namespace:
        parts.append(f"namespaces/{quote(namespace, safe='')}")
    parts.append(resource.plural)
    if name is not None:
        parts.append(quote(name, safe=""))
        if subresource:
            parts.append(subresource)
    return "/".join(parts)



def _selected(resource: Resource, query: Mapping[str, Any]) -> dict[str, Any]:
    """``query`` narrowed by the resource's field and label selectors, if it has them.

    Done here, for every list and watch, so that a resource declared with
    ``Resource.named`` can never be read wider than RBAC ``resourceNames`` allow, and one
    declared with ``Resource.labelled`` never holds objects outside its selector.
    """
    out = dict(query)
    if resource.field_selector:
        out["fieldSelector"] = resource.field_selector
    if resource.label_selector:
        out["labelSelector"] = resource.label_selector
    return out

class Rest:
    """Thin JSON client; safe to share between threads (urllib3 pools are)."""

    def __init__(self, api: ApiClient) -> None:
        self.api = api

    def raw(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        timeout: Any = DEFAULT_TIMEOUT,
        stream: bool = False,
    ) -> Any:
        """Send one request; return the parsed JSON body (or the raw response if stream)."""
        headers = {"Accept": JSON}
        if body is not None:
            # The client serializes dict/list bodies itself for JSON and YAML content
            # types (apply patches are JSON, which is valid YAML).
            headers["Content-Type"] = content_type
        query_params = [(k, _query_value(v)) for k, v in (query or {}).items() if v is not None]
        try:
            req = self.api.param_serialize(
                method=method,
                resource_path=path,
                query_params=query_params,
                header_params=headers,
                body=body,
                auth_settings=["BearerToken"],
            )
            resp = self.api.call_api(*req, _request_timeout=timeout)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiException(status=0, reason=f"{type(exc).__name__}: {exc}") from exc
        if not 200 <= resp.status <= 299:
            try:
                resp.read()
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise ApiException(status=0, reason=f"{type(exc).__name__}: {exc}") from exc
            raise ApiException.from_response(http_resp=resp, body=None, data=None)
        if stream:
            return resp.response
        try:
            data = resp.read()
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiException(status=0, reason=f"{type(exc).__name__}: {exc}") from exc
        return json.loads(data) if data else None

    # -- conveniences -----------------------------------------------------------
    # ``timeout`` on the single-object calls lets a caller with a deadline (leader
    # election) bound a request by the time it has left, not by DEFAULT_TIMEOUT.
    def get(
        self, resource: Resource, namespace: str, name: str, *, timeout: Any = DEFAULT_TIMEOUT
    ) -> Obj | None:
        """The object, or None when it does not exist."""
        try:
            found: Obj = self.raw(
                "GET", resource_path(resource, namespace, name), timeout=timeout)
            return found
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def list(
        self, resource: Resource, namespace: str | None = None, *,
        timeout: Any = DEFAULT_TIMEOUT, **query: Any,
    ) -> Obj:
        result: Obj = self.raw(
            "GET", resource_path(resource, namespace), query=_selected(resource, query),
            timeout=timeout,
        )
        return result

    def create(
        self, resource: Resource, namespace: str, body: Obj, *, timeout: Any = DEFAULT_TIMEOUT
    ) -> Obj:
        result: Obj = self.raw(
            "POST", resource_path(resource, namespace), body=body, timeout=timeout)
        return result

    def replace(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        body: Obj,
        *,
        subresource: str = "",
        timeout: Any = DEFAULT_TIMEOUT,
    ) -> Obj:
        """PUT; ``body.metadata.resourceVersion`` makes it an optimistic-concurrency write."""
        result: Obj = self.raw(
            "PUT", resource_path(resource, namespace, name, subresource or None), body=body,
            timeout=timeout,
        )
        return result

    def patch(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        body: Any,
        *,
        content_type: str = MERGE_PATCH,
        subresource: str = "",
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> Obj:
        query: dict[str, Any] = {"fieldManager": field_manager, "force": force}
        result: Obj = self.raw(
            "PATCH",
            resource_path(resource, namespace, name, subresource or None),
            body=body,
            content_type=content_type,
            query=query,
        )
        return result

    def delete(self, resource: Resource, namespace: str, name: str, **query: Any) -> None:
        """Delete; a missing object is not an error (deletion is idempotent)."""
        try:
            self.raw("DELETE", resource_path(resource, namespace, name), query=query)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def watch(
        self,
        resource: Resource,
        namespace: str | None,
        *,
        resource_version: str,
        timeout_seconds: int,
        on_open: Callable[[], None] | None = None,
    ) -> Iterator[Obj]:
        """Yield watch events (``{"type", "object"}``) until the server ends the stream.

        ``on_open`` is called once the server has answered the request (2xx): a quiet
        watch may carry no event for minutes, and a caller that counts failures needs
        to know the server answered before the first one (the informer's back-off)."""
        query = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_seconds,
        }
        query = _selected(resource, query)
        # The read timeout must outlast the server-side timeout, or quiet watches
        # would be cut by the client and counted as errors.
        resp = self.raw(
            "GET", resource_path(resource, namespace), query=query,
            timeout=(5.0, timeout_seconds + 30), stream=True,
        )
        if on_open is not None:
            on_open()
        try:
            buf = b""
            for chunk in resp.stream(amt=65536, decode_content=True):
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        yield json.loads(line)
            if buf.strip():
                yield json.loads(buf)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ApiException(status=0, reason=f"{type(exc).__name__}: {exc}") from exc
        finally:
            resp.release_conn()


def _query_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def is_not_found(exc: BaseException) -> bool:
    return isinstance(exc, ApiException) and exc.status == 404


def is_conflict(exc: BaseException) -> bool:
    return isinstance(exc, ApiException) and exc.status == 409


def is_already_exists(exc: BaseException) -> bool:
    """409 with reason AlreadyExists (a create), as opposed to a stale-write Conflict."""
    return isinstance(exc, ApiException) and is_conflict(exc) and reason_of(exc) == "AlreadyExists"


def status_of(exc: ApiException) -> dict[str, Any]:
    """The metav1.Status the API server sent with an error; {} when there is none."""
    try:
        body = json.loads(exc.body or "{}")
    except (ValueError, TypeError):
        return {}
    return body if isinstance(body, dict) else {}


def brief(exc: BaseException) -> str:
    """One log line for an error: an API error's status, reason and the API server's
    message, never the response headers and body ``str(ApiException)`` prints (they
    would land, escaped, inside a JSON log line's ``msg``). Whitespace in the message,
    newlines too, is folded, so the line stays one line."""
    if isinstance(exc, ApiException):
        message = status_of(exc).get("message")
        head = f"HTTP {exc.status} {exc.reason}" if exc.status else str(exc.reason)
        if isinstance(message, str) and message.strip():
            return f"{head}: {' '.join(message.split())}"
        return head
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def namespace_terminating(exc: BaseException) -> bool:
    """A 403 because the namespace is being deleted (the API server's cause
    ``NamespaceTerminating``: "unable to create new content in namespace X because it is
    being terminated"). Nothing is wrong then: what was to be written goes away with the
    namespace, so callers log it at debug level, not as a warning."""
    if not isinstance(exc, ApiException) or exc.status != 403:
        return False
    details = status_of(exc).get("details")
    causes = details.get("causes") if isinstance(details, dict) else None
    return isinstance(causes, list) and any(
        isinstance(c, dict) and c.get("reason") == "NamespaceTerminating" for c in causes)


def reason_of(exc: ApiException) -> str:
    return str(status_of(exc).get("reason", ""))


def is_transient(exc: BaseException) -> bool:
    """Errors worth retrying with backoff: transport, timeouts, throttling, 5xx.

    Anything else (403, 404, 422...) is a definite answer from the API server.
    """
    if isinstance(exc, ApiException):
        return exc.status in (0, 408, 429) or exc.status >= 500
    return isinstance(exc, (urllib3.exceptions.HTTPError, OSError, TimeoutError))
