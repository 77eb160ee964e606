"""JSON Pointer (RFC 6901) and a minimal JSON Patch (RFC 6902) applier.

The applier only exists so ratcheting can compare objects in their defaulted form; it
supports the ops rollgate's default patches use (add, replace, remove) and copies only
the containers along each path, so the caller's objects are never modified.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from schemas.findings import PathPart


def escape(token: PathPart) -> str:
    # Order matters: "~" first, or the "~1" produced for "/" would be escaped again.
    return str(token).replace("~", "~0").replace("/", "~1")


def unescape(token: str) -> str:
    return token.replace("~1", "/").replace("~0", "~")


def to_pointer(path: Iterable[PathPart]) -> str:
    """``("spec", "plugins", "metric", 0)`` -> ``/spec/plugins/metric/0``."""
    return "".join("/" + escape(part) for part in path)


def _copy(container: Any) -> Any:
    if isinstance(container, dict):
        return dict(container)
    if isinstance(container, list):
        return list(container)
    return container


def _index(container: Any, token: str) -> Any:
    return int(token) if isinstance(container, list) else token


def apply_patch(doc: Any, ops: Sequence[dict[str, Any]]) -> Any:
    """Apply add/replace/remove ops copy-on-write; ops that do not fit are skipped."""
    for op in ops:
        tokens = [unescape(t) for t in str(op.get("path", "")).split("/")[1:]]
        if not tokens:
            continue
        root = _copy(doc)
        node = root
        try:
            for token in tokens[:-1]:
                key = _index(node, token)
                node[key] = _copy(node[key])
                node = node[key]
            last = _index(node, tokens[-1])
            if op.get("op") == "remove":
                del node[last]
            elif isinstance(node, list) and op.get("op") == "add":
                node.insert(last, op.get("value"))
            else:
                node[last] = op.get("value")
        except (KeyError, IndexError, TypeError, ValueError):
            continue
        doc = root
    return doc
