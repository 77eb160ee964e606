"""The nodes of a parsed expression: the subset of expr-lang's ``ast`` that the checks and
the evaluator look at. Every node keeps its rune offset for messages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Node:
    position: int = field(default=0, kw_only=True)


@dataclass(frozen=True, slots=True)
class Literal(Node):
    """``kind``: int, float, string, bytes, bool or nil."""

    kind: str
    value: Any


@dataclass(frozen=True, slots=True)
class Identifier(Node):
    name: str


@dataclass(frozen=True, slots=True)
class Pointer(Node):
    """``#`` / ``#acc`` / ``.field`` inside a predicate."""

    name: str


@dataclass(frozen=True, slots=True)
class Unary(Node):
    operator: str
    operand: Node


@dataclass(frozen=True, slots=True)
class Binary(Node):
    operator: str
    left: Node
    right: Node


@dataclass(frozen=True, slots=True)
class Member(Node):
    target: Node
    key: Node
    optional: bool = False


@dataclass(frozen=True, slots=True)
class Call(Node):
    """A call of a function or method (``callee`` is an Identifier or a Member)."""

    callee: Node
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Builtin(Node):
    name: str
    args: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Predicate(Node):
    body: Node


@dataclass(frozen=True, slots=True)
class Slice(Node):
    target: Node
    start: Node | None
    stop: Node | None


@dataclass(frozen=True, slots=True)
class ArrayLiteral(Node):
    items: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class MapLiteral(Node):
    pairs: tuple[tuple[Node, Node], ...]


@dataclass(frozen=True, slots=True)
class Conditional(Node):
    condition: Node
    then: Node
    otherwise: Node


@dataclass(frozen=True, slots=True)
class Let(Node):
    name: str
    value: Node
    body: Node


@dataclass(frozen=True, slots=True)
class Sequence(Node):
    items: tuple[Node, ...]


def children(node: Node) -> tuple[Node, ...]:
    """The direct sub-nodes of ``node``, for walks that need no per-kind logic."""
    out: list[Node] = []
    for name in node.__dataclass_fields__:
        value = getattr(node, name)
        if isinstance(value, Node):
            out.append(value)
        elif isinstance(value, tuple):
            for item in value:
                if isinstance(item, Node):
                    out.append(item)
                elif isinstance(item, tuple):
                    out.extend(part for part in item if isinstance(part, Node))
    return tuple(out)
