"""JSON Pointer (RFC 6901) and a minimal JSON Patch (RFC 6902) applier.

The applier exists so ratcheting can compare objects in their defaulted form; rollgate's
default patches use add, replace, remove and test, and move and copy are there too so a
patch applied strictly here applies as the API server applies it, whatever its ops. It
copies only the containers along each path, so the caller's objects are never modified
(the result may share the rest with them, and a copied value with its source). Ratcheting
applies leniently (an op that does not fit is skipped); ``strict=True`` refuses such an
op as the API server refuses a patch that does not apply, which is how the tests apply
the webhook's answers.
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


class PatchError(ValueError):
    """An op that does not apply to the document (strict mode)."""


def _index(container: Any, token: str, *, end: bool = False) -> Any:
    """A list index (``-`` past the end, for add) or a member name."""
    if not isinstance(container, list):
        return token
    if end and token == "-":
        return len(container)
    if not token.isdigit():
        raise ValueError(f"{token!r} is not an array index")
    return int(token)


def _tokens(pointer: Any) -> list[str]:
    """The unescaped reference tokens of a JSON Pointer (none: the whole document)."""
    return [unescape(t) for t in str(pointer).split("/")[1:]]


def _read(doc: Any, tokens: Sequence[str]) -> Any:
    """The value ``tokens`` name; a missing member or index raises, as for any op."""
    node = doc
    for token in tokens:
        node = node[_index(node, token)]
    return node


def _relocate(doc: Any, op: dict[str, Any]) -> Any:
    """``move`` and ``copy`` (RFC 6902 4.4 and 4.5) as the ops they are defined by: the
    value at ``from`` added at ``path``, a move removing it first (so an index in
    ``path`` counts in the list without it)."""
    source, target = str(op["from"]), str(op.get("path", ""))
    value = _read(doc, _tokens(source))
    if op.get("op") == "move":
        if target.startswith(source + "/"):
            raise ValueError("a value cannot move into one of its own children")
        doc = _apply_op(doc, {"op": "remove", "path": source})
    return _apply_op(doc, {"op": "add", "path": target, "value": value})


def _apply_op(doc: Any, op: dict[str, Any]) -> Any:
    kind = op.get("op")
    if kind in ("move", "copy"):
        return _relocate(doc, op)
    tokens = _tokens(op.get("path", ""))
    if not tokens:
        raise ValueError("the path names the whole document")
    root = _copy(doc)
    node = root
    for token in tokens[:-1]:
        key = _index(node, token)
        node[key] = _copy(node[key])
        node = node[key]
    last = _index(node, tokens[-1], end=kind == "add")
    if kind == "test":
        if node[last] != op.get("value"):
            raise ValueError(f"the value is {node[last]!r}")
        return doc
    _write(node, last, op)
    return root


def _write(node: Any, last: Any, op: dict[str, Any]) -> None:
    """The op's change to its parent container (copied already)."""
    kind = op.get("op")
    if kind == "remove":
        del node[last]
    elif isinstance(node, list) and kind == "add":
        if last > len(node):
            raise IndexError(f"index {last} past the end ({len(node)})")
        node.insert(last, op.get("value"))
    elif kind in ("add", "replace"):
        if kind == "replace" and isinstance(node, dict) and last not in node:
            raise KeyError(f"no member {last!r} to replace")
        node[last] = op.get("value")
    else:
        raise ValueError(f"op {kind!r} is not supported")


def apply_patch(doc: Any, ops: Sequence[dict[str, Any]], *, strict: bool = False) -> Any:
    """Apply ``ops`` copy-on-write; an op that does not fit is skipped, or with
    ``strict`` raises :class:`PatchError` naming it."""
    for op in ops:
        try:
            doc = _apply_op(doc, op)
        except (KeyError, IndexError, TypeError, ValueError) as err:
            if strict:
                raise PatchError(f"{op} does not apply: {err!r}") from err
    return doc
