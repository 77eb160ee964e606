"""Reading objects handled as plain JSON (DESIGN.md: every object is a dict), for every
layer: a field that is missing or of the wrong type reads as empty instead of raising,
because admission input and other controllers' objects can hold anything."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def as_dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def meta_of(obj: object) -> dict[str, Any]:
    """``obj.metadata``, or {} when ``obj`` or its metadata is not an object."""
    return as_dict(as_dict(obj).get("metadata"))
