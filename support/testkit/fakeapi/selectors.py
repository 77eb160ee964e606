"""Label and field selectors as the API server reads them: ``=``, ``==``, ``!=``,
exists, ``!exists``, ``in`` and ``notin`` for labels; ``=``, ``==`` and ``!=`` on any
dotted field."""

from __future__ import annotations

import re
from typing import Any

from kubekit.kinds import Resource

Obj = dict[str, Any]
_SET = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s*\(([^)]*)\)\s*$")


def selected(resource: Resource, obj: Obj) -> bool:
    """Whether ``obj`` is in what ``resource`` selects (its field and label selectors)."""
    return (fields_match(resource.field_selector, obj)
            and labels_match(resource.label_selector, obj))


def fields_match(selector: str | None, obj: Obj) -> bool:
    """Whether ``obj`` meets every term of a field selector; a missing field reads as
    ``""`` (so ``f!=x`` selects an object without ``f``)."""
    for term in _terms(selector or ""):
        negate = "!=" in term
        name, _, value = term.partition("!=" if negate else "=")
        value = value.removeprefix("=")
        actual = _field(obj, name.strip())
        equal = ("" if actual is None else str(actual)) == value.strip()
        if equal == negate:
            return False
    return True


def labels_match(selector: str | None, obj: Obj) -> bool:
    """Whether ``obj``'s labels meet every term of a label selector."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(_label_term(term, labels) for term in _terms(selector or ""))


def _label_term(term: str, labels: dict[str, str]) -> bool:
    """Whether ``labels`` satisfy one term of a label selector."""
    found = _SET.match(term)
    if found:
        key, op, values = found.groups()
        inside = labels.get(key) in {v.strip() for v in values.split(",")}
        return inside == (op == "in") and (op != "in" or key in labels)
    if "!=" in term:
        key, _, value = term.partition("!=")
        return labels.get(key.strip()) != value.strip()
    if "=" in term:
        key, _, value = term.partition("=")
        return labels.get(key.strip()) == value.removeprefix("=").strip()
    if term.startswith("!"):
        return term[1:].strip() not in labels
    return term in labels


def _terms(selector: str) -> list[str]:
    """The comma-separated terms, commas inside ``(...)`` (a set's values) kept."""
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
    """The value at a field selector's dotted path (``None`` where it is missing)."""
    value: Any = obj
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value
