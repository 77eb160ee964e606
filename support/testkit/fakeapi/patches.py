"""The fake's three patch types: RFC 7386 merge patches, RFC 6902 JSON patches (with the
product's applier, ``schemas.pointer``, in its strict mode: an op that does not apply is
refused, as the API server refuses it) and server-side apply, simplified: the fields a
manager applied (map keys; lists are atomic) are recorded in ``managedFields``, a field
applied before and left out now is removed unless another manager owns it, and a
different value for a field another applier owns is a conflict unless ``force``."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from schemas.pointer import PatchError, apply_patch

from .errors import api_error

Obj = dict[str, Any]
Path = tuple[str, ...]


class PatchFailed(Exception):
    """The patch does not apply (the API server answers 422 Invalid)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


def json_patch(target: Obj, ops: Any) -> Obj:
    """RFC 6902: ``target`` with ``ops`` applied, sharing nothing with either. The
    applier copies only the containers it changes and adds the ops' values as they
    are, and the fake goes on to edit and store the result: a deep copy keeps the stored
    object apart from ``target`` and from the caller's patch, as a server's is."""
    if not isinstance(ops, list):
        raise PatchFailed("a JSON patch must be a list of operations")
    try:
        patched = apply_patch(target, ops, strict=True)
    except PatchError as exc:
        raise PatchFailed(str(exc)) from None
    if not isinstance(patched, dict):
        raise PatchFailed("the patched object is not an object")
    return copy.deepcopy(patched)


# ---------------------------------------------------------------- server-side apply


@dataclass(frozen=True)
class Apply:
    """One apply request: what ``manager`` sends, to the object or its ``subresource``;
    ``status_part``: the kind's status is a subresource (the object's apply leaves it)."""

    body: Obj
    manager: str
    subresource: str
    force: bool
    status_part: bool


def apply_fields(current: Obj, request: Apply, *, api_version: str, time: str) -> Obj:
    """``current`` with ``request`` applied (not stored): its fields merged in, the
    fields its manager no longer applies and nobody else owns removed, and
    ``managedFields`` updated; a conflict is a 409 unless forced."""
    applied = _applied_paths(request)
    entries = list(current["metadata"].get("managedFields") or [])
    mine = [e for e in entries if e.get("manager") == request.manager
            and e.get("operation") == "Apply" and e.get("subresource", "") == request.subresource]
    kept_others = [kept for entry in entries if entry not in mine
                   for kept in _what_they_keep(entry, current=current, request=request,
                                                   applied=applied)]
    owned_before = set().union(*(_paths_of(e.get("fieldsV1") or {}) for e in mine))
    owned_by_others = set().union(*(_paths_of(e["fieldsV1"]) for e in kept_others))
    new = copy.deepcopy(current)
    for path in sorted(owned_before - applied - owned_by_others, reverse=True):
        _remove_at(new, path)
    _deep_merge(new, {k: v for k, v in request.body.items() if k not in ("apiVersion", "kind")})
    entry = {"manager": request.manager, "operation": "Apply", "apiVersion": api_version,
             "time": time, "fieldsType": "FieldsV1", "fieldsV1": _fields_of(applied)}
    if request.subresource:
        entry["subresource"] = request.subresource
    new["metadata"]["managedFields"] = [*kept_others, entry] if applied else kept_others
    if request.status_part and not request.subresource:
        new.pop("status", None)
        if "status" in current:
            new["status"] = copy.deepcopy(current["status"])
    return new


def _what_they_keep(entry: Obj, *, current: Obj, request: Apply,
                    applied: set[Path]) -> list[Obj]:
    """Another manager's entry without the fields this apply takes from it (none or
    one entry); a 409 for a field another applier owns, set to a different value,
    unless the apply is forced."""
    theirs = _paths_of(entry.get("fieldsV1") or {})
    clash = {p for p in theirs & applied
             if entry.get("operation") == "Apply" and _at(current, p) != _at(request.body, p)}
    if clash and not request.force:
        raise api_error(409, "Conflict", "Apply failed with "
                        f"{len(clash)} conflict(s): conflicts with {entry['manager']!r}: "
                        + ", ".join(".".join(p) for p in sorted(clash)))
    theirs -= clash
    return [{**entry, "fieldsV1": _fields_of(theirs)}] if theirs else []


def _leaves(value: Any, prefix: Path = ()) -> set[Path]:
    """The paths of ``value``'s leaves: a list is one leaf (lists are atomic here)."""
    if isinstance(value, dict) and value:
        return set().union(*(_leaves(v, (*prefix, k)) for k, v in value.items()))
    return {prefix} if prefix else set()


def _applied_paths(request: Apply) -> set[Path]:
    """The fields an apply sets: every leaf of the body but the type and the metadata
    the server owns (and, to the main resource, a status subresource's status)."""
    body = request.body
    if request.subresource == "status":
        return _leaves({"status": body.get("status")}) if "status" in body else set()
    top = {k: v for k, v in body.items() if k not in ("apiVersion", "kind", "metadata")
           and not (request.status_part and k == "status")}
    meta = body.get("metadata") or {}
    top["metadata"] = {k: v for k, v in meta.items()
                       if k in ("labels", "annotations", "finalizers", "ownerReferences")}
    if not top["metadata"]:
        del top["metadata"]
    return _leaves(top)


def _fields_of(paths: set[Path]) -> Obj:
    """``fieldsV1`` of ``paths``."""
    out: Obj = {}
    for path in paths:
        node = out
        for part in path:
            node = node.setdefault(f"f:{part}", {})
    return out


def _paths_of(fields_v1: Obj, prefix: Path = ()) -> set[Path]:
    """The paths of a ``fieldsV1``."""
    children = {k: v for k, v in fields_v1.items() if k.startswith("f:")}
    if not children:
        return {prefix} if prefix else set()
    return set().union(*(_paths_of(v, (*prefix, k[2:])) for k, v in children.items()))


def _at(obj: Any, path: Path) -> Any:
    """The value at ``path`` (``None`` where it is missing), to compare two appliers'."""
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def _remove_at(obj: Obj, path: Path) -> None:
    """Drop the field at ``path`` in place, if it is there (a field its manager
    no longer applies)."""
    node: Any = obj
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
    if isinstance(node, dict):
        node.pop(path[-1], None)


def _deep_merge(dst: Obj, src: Obj) -> None:
    """Merge ``src`` into ``dst`` in place: maps merge key by key, anything else
    (lists too) replaces, as an apply of atomic lists does."""
    for key, value in src.items():
        if isinstance(value, dict) and isinstance(dst.get(key), dict):
            _deep_merge(dst[key], value)
        else:
            dst[key] = copy.deepcopy(value)
