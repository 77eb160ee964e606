"""The errors the fake raises, shaped as ``kubekit.rest.Rest`` raises the API server's."""

from __future__ import annotations

import http
import json

from kubernetes.client.exceptions import ApiException

from kubekit.kinds import Resource


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


def not_found(resource: Resource, name: str) -> ApiException:
    """404 in the API server's words, which a controller may log or match."""
    return api_error(404, "NotFound", f'{group_resource(resource)} "{name}" not found')


def conflict(resource: Resource, name: str) -> ApiException:
    """409 for a stale resourceVersion, in the API server's words."""
    return api_error(409, "Conflict", f"Operation cannot be fulfilled on "
                     f'{group_resource(resource)} "{name}": the object has been modified; '
                     "please apply your changes to the latest version and try again")


def invalid(resource: Resource, name: str, why: str) -> ApiException:
    """422 for a write the API server refuses as a whole (``why``: the field and cause)."""
    return api_error(422, "Invalid", f'{resource.kind} "{name}" is invalid: {why}')


def bad_request(message: str) -> ApiException:
    """400 for a body the API server cannot take at all."""
    return api_error(400, "BadRequest", message)


def group_resource(resource: Resource) -> str:
    """``plural.group`` (``plural`` for the core group), as the API server's messages
    name a resource."""
    return f"{resource.plural}.{resource.group}" if resource.group else resource.plural
