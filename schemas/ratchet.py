"""Validation ratcheting on UPDATE: an error in a value nobody changed is a warning.

Objects that predate the webhook (or a rule) must stay editable and deletable, so an
error only denies when the user touched the value it is about. Both objects are compared
in their defaulted form: the mutating webhook may have trimmed a sha256 in ``obj`` that
is still raw in ``old_obj``, and that is not a change the user made. Likewise a template
reference with ``kind: AnalysisTemplate`` (or ``clusterScope: false``) is the same
reference without it: earlier releases of rollgate wrote those defaults into stored
Stages, and a manifest without them changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from schemas.constants import KIND_ANALYSIS_TEMPLATE
from schemas.defaults import default_patch
from schemas.findings import Finding, Path
from schemas.pointer import apply_patch

RATCHET_NOTE = "allowed because the value is unchanged from the existing object"
_MISSING = object()


def _resolve(obj: Any, path: Path) -> tuple[int, Any]:
    """The value at ``path``, or at its nearest existing parent, with its depth."""
    node = obj
    for depth, part in enumerate(path):
        if isinstance(part, int):
            exists = isinstance(node, list) and 0 <= part < len(node)
        else:
            exists = isinstance(node, dict) and part in node
        if not exists:
            return depth, node
        node = node[part]
    return len(path), node


def _canonical(resolved: tuple[int, Any]) -> object:
    """A value as canonical JSON, so that equality follows JSON types: in Python
    ``1 == True == 1.0``, but changing ``value: 1`` to ``value: true`` is a change."""
    depth, value = resolved
    try:
        return depth, json.dumps(value, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return object()  # not comparable: count it as changed (the error stays an error)


def _unchanged(finding: Finding, obj: Any, old_obj: Any) -> bool:
    return all(
        _canonical(_resolve(obj, path)) == _canonical(_resolve(old_obj, path))
        for path in finding.compare_paths
    )


# (stanza, list, field, the value that means the same as absent)
_IMPLIED: tuple[tuple[str, str, str, object], ...] = (
    ("verification", "analysisTemplates", "kind", KIND_ANALYSIS_TEMPLATE),
    ("analysis", "templates", "clusterScope", False),
)


def _comparable(obj: Any) -> Any:
    """``obj`` defaulted, with template-reference fields that only restate what absence
    means removed (copy-on-write: the caller's object is never modified)."""
    obj = apply_patch(obj, default_patch(obj))
    spec = obj.get("spec") if isinstance(obj, dict) else None
    if not isinstance(spec, dict):
        return obj
    new_spec = dict(spec)
    for stanza, list_field, field_name, implied in _IMPLIED:
        body = spec.get(stanza)
        refs = body.get(list_field) if isinstance(body, dict) else None
        if not isinstance(body, dict) or not isinstance(refs, list):
            continue
        new_spec[stanza] = {**body, list_field: [_drop_implied(r, field_name, implied)
                                                 for r in refs]}
    return {**obj, "spec": new_spec}


def _drop_implied(ref: object, field_name: str, implied: object) -> object:
    if not isinstance(ref, dict) or field_name not in ref:
        return ref
    value = ref[field_name]
    # `is` for the boolean: 0 == False in Python, but clusterScope: 0 is not false.
    same = value is None or (value is implied if isinstance(implied, bool) else value == implied)
    return {k: v for k, v in ref.items() if k != field_name} if same else ref


def ratchet(findings: Iterable[Finding], *, obj: Any, old_obj: Any) -> list[Finding]:
    """``findings`` with each error whose compared values are unchanged made a warning."""
    findings = list(findings)
    if old_obj is None or all(f.warning for f in findings):
        return findings
    obj, old_obj = _comparable(obj), _comparable(old_obj)
    return [
        replace(f, warning=True, message=f"{f.message} ({RATCHET_NOTE})")
        if not f.warning and _unchanged(f, obj, old_obj)
        else f
        for f in findings
    ]
