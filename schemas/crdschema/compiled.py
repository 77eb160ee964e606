"""A CRD's OpenAPI v3 schema compiled once into :class:`Node` trees: every keyword the
walk reads taken out of the dicts and checked for its type up front, patterns and CEL
rules compiled, the declared field names sorted for the did-you-mean. The walk
(``structural``) then reads attributes only; schemas shared through YAML anchors stay
shared nodes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from schemas.crdschema import cel, patterns


def _number(value: object) -> float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _count(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class Rule:
    """One ``x-kubernetes-validations`` entry: the predicate when ``cel`` evaluates it."""

    text: str
    message: str
    predicate: cel.Rule | None


@dataclass(slots=True)
class Node:
    """One schema node, its keywords as the walk needs them."""

    type: str | None = None
    int_or_string: bool = False
    nullable: bool = False
    enum: tuple[Any, ...] | None = None
    enum_text: str = ""
    pattern: str | None = None
    regex: re.Pattern[str] | None = None
    min_length: int | None = None
    max_length: int | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False
    min_items: int | None = None
    max_items: int | None = None
    list_type: str | None = None
    map_keys: tuple[str, ...] = ()
    min_properties: int | None = None
    max_properties: int | None = None
    properties: dict[str, Node] = field(default_factory=dict)
    known: list[str] = field(default_factory=list)
    additional: Node | None = None
    keeps_unknown: bool = False
    embedded: bool = False
    required: tuple[str, ...] = ()
    defaulted: frozenset[str] = frozenset()
    items: Node | None = None
    rules: tuple[Rule, ...] = ()


def _rules(schema: Mapping[str, Any]) -> tuple[Rule, ...]:
    out: list[Rule] = []
    for rule in schema.get("x-kubernetes-validations") or []:
        if not isinstance(rule, Mapping) or not isinstance(rule.get("rule"), str):
            continue
        text = rule["rule"]
        # A rule with fieldPath reports elsewhere: not evaluated (README).
        predicate = None if rule.get("fieldPath") else cel.parse(text)
        message = rule.get("message")
        out.append(Rule(text, message if isinstance(message, str) and message
                        else f"failed rule: {text}", predicate))
    return tuple(out)


def _scalars(node: Node, schema: Mapping[str, Any]) -> None:
    enum = schema.get("enum")
    if isinstance(enum, list):
        node.enum = tuple(enum)
        node.enum_text = ", ".join(json.dumps(item, ensure_ascii=False, separators=(",", ":"))
                                   for item in enum)
    pattern = schema.get("pattern")
    if isinstance(pattern, str):
        node.pattern, node.regex = pattern, patterns.compiled(pattern)
    node.min_length, node.max_length = _count(schema.get("minLength")), _count(
        schema.get("maxLength"))
    node.minimum, node.maximum = _number(schema.get("minimum")), _number(schema.get("maximum"))
    node.exclusive_minimum = schema.get("exclusiveMinimum") is True
    node.exclusive_maximum = schema.get("exclusiveMaximum") is True


def _collections(node: Node, schema: Mapping[str, Any], memo: dict[int, Node]) -> None:
    node.min_items, node.max_items = _count(schema.get("minItems")), _count(
        schema.get("maxItems"))
    list_type = schema.get("x-kubernetes-list-type")
    node.list_type = list_type if list_type in ("map", "set") else None
    node.map_keys = tuple(k for k in schema.get("x-kubernetes-list-map-keys") or []
                          if isinstance(k, str))
    node.min_properties, node.max_properties = _count(schema.get("minProperties")), _count(
        schema.get("maxProperties"))
    items = schema.get("items")
    node.items = compile_schema(items, memo) if isinstance(items, Mapping) else None
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        node.properties = {k: compile_schema(v, memo) for k, v in properties.items()
                           if isinstance(v, Mapping)}
        node.known = sorted(node.properties)
        node.defaulted = frozenset(k for k, v in properties.items()
                                   if isinstance(v, Mapping) and "default" in v)
    additional = schema.get("additionalProperties")
    node.additional = compile_schema(additional, memo) if isinstance(additional, Mapping) \
        else None
    node.keeps_unknown = schema.get("x-kubernetes-preserve-unknown-fields") is True or \
        additional is True
    node.embedded = schema.get("x-kubernetes-embedded-resource") is True
    required = schema.get("required")
    node.required = tuple(r for r in required or [] if isinstance(r, str)) \
        if isinstance(required, list) else ()


def compile_schema(schema: Mapping[str, Any], memo: dict[int, Node] | None = None) -> Node:
    """``schema`` as a :class:`Node` tree (``memo``: nodes already compiled, by id)."""
    memo = {} if memo is None else memo
    found = memo.get(id(schema))
    if found is not None:
        return found
    node = Node()
    memo[id(schema)] = node
    expected = schema.get("type")
    node.type = expected if isinstance(expected, str) else None
    node.int_or_string = schema.get("x-kubernetes-int-or-string") is True
    node.nullable = schema.get("nullable") is True
    _scalars(node, schema)
    _collections(node, schema, memo)
    node.rules = _rules(schema)
    return node
