"""Every condition reason and Event reason the product writes, found by reading its
source (no import, nothing runs), for the generated reference (docs/metrics.md).

Reasons are string literals where they are decided, not constants of one module, so the
scan looks for them where the code puts them. In the product packages:

- ``reason="X"`` in a call: a condition when the callee sets a condition
  (``set_condition``, ``_set_condition``, ...), also an Event when that call passes
  ``event_type=``; an Event for any other callee (``emit``, ``warn_on_pod``) but the
  few whose ``reason`` is no object's (``NOT_OBJECT_REASONS``);
- a literal right after a condition status (``"True"``, ``"False"``, ``"Unknown"``) in a
  tuple or a call's arguments, ``("False", "VerificationFailed", message)``: a condition;
  right after an Event type (``"Normal"``, ``"Warning"``): an Event;
- the values of a module-level dict named ``...REASONS`` (finding kind -> reason) and
  the first argument of ``Anomaly(...)``: Events;
- a literal assigned to a variable named ``reason`` (a helper that picks one): a
  condition.

A reason built at run time (an f-string where one of these expects a literal) cannot be
listed, so the scan reports it instead of missing it.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Literal, NamedTuple

from testkit.paths import REPO_ROOT

PRODUCT = ("schemas", "kubekit", "webhook", "reconciler", "certs", "rollgate")
STATUSES = frozenset({"True", "False", "Unknown"})
EVENT_TYPES = frozenset({"Normal", "Warning"})
# callees whose ``reason=`` is no condition's or Event's: an admission denial's
# metav1.Status reason, a client error's text, a requeue's log text
NOT_OBJECT_REASONS = frozenset({"deny", "ApiException", "Requeue"})
# records whose first field is an Event reason
EVENT_RECORDS = frozenset({"Anomaly"})
REASON = re.compile(r"[A-Z][A-Za-z0-9]*\Z")  # UpperCamelCase, as Kubernetes spells them

Record = Literal["condition", "event"]


class Written(NamedTuple):
    """One place the product writes a reason."""

    record: Record
    reason: str
    where: str  # path:line, for messages


class Unlisted(ValueError):
    """A reason the scan cannot read: built at run time where a literal is expected."""


def _callee(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _literal(node: ast.expr, where: str) -> str | None:
    """The reason a node spells, None when it is no literal reason; an f-string fails."""
    if isinstance(node, ast.JoinedStr):
        raise Unlisted(f"{where}: a reason built at run time ({ast.unparse(node)}); "
                       "write each reason as a literal so docs/metrics.md can list it")
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and REASON.match(
            node.value) and node.value not in STATUSES | EVENT_TYPES:
        return node.value
    return None


def _keyword(call: ast.Call, where: str) -> Iterator[tuple[Record, str]]:
    callee = _callee(call)
    if callee in NOT_OBJECT_REASONS:
        return
    given = {kw.arg: kw.value for kw in call.keywords if kw.arg}
    reason = _literal(given["reason"], where) if "reason" in given else None
    if reason is None:
        return
    if callee.lower().endswith(("condition", "conditions")):
        yield "condition", reason
        if "event_type" in given:
            yield "event", reason
    else:
        yield "event", reason


def _after_marker(items: list[ast.expr], where: str) -> Iterator[tuple[Record, str]]:
    for marker, value in itertools.pairwise(items):
        if not isinstance(marker, ast.Constant):
            continue
        record: Record | None = ("condition" if marker.value in STATUSES
                                 else "event" if marker.value in EVENT_TYPES else None)
        reason = _literal(value, where) if record is not None else None
        if record is not None and reason is not None:
            yield record, reason


def _table(node: ast.Assign | ast.AnnAssign) -> Iterator[tuple[Record, str]]:
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    names = [t.id for t in targets if isinstance(t, ast.Name)]
    if any(n.endswith("REASONS") for n in names) and isinstance(node.value, ast.Dict):
        for value in node.value.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                yield "event", value.value


def _picked(node: ast.Assign, where: str) -> Iterator[tuple[Record, str]]:
    if not any(isinstance(t, ast.Name) and t.id == "reason" for t in node.targets):
        return
    for part in ast.walk(node.value):
        if isinstance(part, ast.expr) and (reason := _literal(part, where)) is not None:
            yield "condition", reason


def _found(node: ast.AST, where: str) -> Iterator[tuple[Record, str]]:
    """The reasons one node writes (see the module docstring for the rules)."""
    if isinstance(node, ast.Call):
        yield from _keyword(node, where)
        yield from _after_marker(node.args, where)
        first = node.args[0] if node.args and _callee(node) in EVENT_RECORDS else None
        if first is not None and (reason := _literal(first, where)) is not None:
            yield "event", reason
    elif isinstance(node, ast.Tuple):
        yield from _after_marker(node.elts, where)
    if isinstance(node, ast.Assign | ast.AnnAssign):
        yield from _table(node)
    if isinstance(node, ast.Assign):
        yield from _picked(node, where)


def scan_file(path: Path, *, root: Path = REPO_ROOT) -> list[Written]:
    """Every reason one source file writes."""
    tree = ast.parse(path.read_text(), filename=str(path))
    shown = path.relative_to(root) if path.is_relative_to(root) else path
    out: list[Written] = []
    for node in ast.walk(tree):
        where = f"{shown}:{getattr(node, 'lineno', 0)}"
        out += [Written(record, reason, where) for record, reason in _found(node, where)]
    return out


def scan(*, root: Path = REPO_ROOT, packages: tuple[str, ...] = PRODUCT) -> list[Written]:
    """Every reason the product packages write, in file order."""
    return [found for package in packages
            for path in sorted((root / package).rglob("*.py"))
            for found in scan_file(path, root=root)]
