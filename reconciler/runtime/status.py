"""The one way controllers write status: only what differs, once, with a precondition.

A controller computes the whole new value of the status fields it owns and hands them
here. Nothing is sent when they equal what the object has (a pass that changes
nothing writes nothing). Otherwise one JSON merge patch of the status subresource
carries exactly the changed fields, whole (lists are replaced, as Kargo itself writes
Stage status), and ``metadata.resourceVersion``, so a write based on a stale read is
refused with 409 instead of overwriting someone else's change. That refusal is
``Conflict``; the runtime's policy for it is to reconcile the key again soon, from a
cache that by then holds the newer object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubernetes.client.exceptions import ApiException

from kubekit.kinds import Resource
from kubekit.rest import MERGE_PATCH, is_conflict, is_not_found
from schemas.objects import Obj, meta_of

from .types import Cache, Client


class Conflict(Exception):
    """Our view of an object was stale; reconcile again from fresher state."""


def changed_fields(current: Mapping[str, Any] | None, wanted: Mapping[str, Any]) -> Obj:
    """The fields of ``wanted`` whose value differs from ``current`` (None = remove)."""
    current = current or {}
    return {k: v for k, v in wanted.items() if current.get(k) != v}


def write_status(
    client: Client,
    cache: Cache | None,
    resource: Resource,
    obj: Mapping[str, Any],
    wanted: Mapping[str, Any],
) -> Obj | None:
    """Write the ``wanted`` status fields of ``obj`` if any differ; the updated object,
    or None when nothing was written (no change, or the object is gone).

    A field whose wanted value is None is removed. Raises ``Conflict`` when ``obj`` was
    stale.
    """
    changes = changed_fields(obj.get("status"), wanted)
    changes = {k: v for k, v in changes.items()
               if not (v is None and k not in (obj.get("status") or {}))}
    if not changes:
        return None
    meta = meta_of(obj)
    body = {"metadata": {"resourceVersion": meta.get("resourceVersion")}, "status": changes}
    try:
        updated = client.patch(resource, meta.get("namespace") or "", meta["name"], body,
                               content_type=MERGE_PATCH, subresource="status")
    except ApiException as exc:
        if is_conflict(exc):
            raise Conflict(f"{resource.kind} {meta.get('name')} changed meanwhile") from exc
        if is_not_found(exc):
            return None
        raise
    if cache is not None:
        cache.observe(resource, updated)
    return updated
