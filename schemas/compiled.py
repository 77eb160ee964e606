"""The two JSON Schemas, loaded and compiled once at import and then reused.

Compiling a validator (and checking the schema against the 2020-12 meta-schema) costs
far more than validating one object, and admission has a latency budget, so this
happens exactly once per process. No ``format`` keywords are used: every string whose
format matters (names, URLs, digests, label keys) is checked by a rule in Python that
can say what is wrong, which ``format`` failures cannot.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator

STAGE_SCHEMA_FILE = "stage-analysis.schema.json"
PLUGINS_SCHEMA_FILE = "rolloutmanager-plugins.schema.json"


def load_schema(name: str) -> dict[str, Any]:
    """Read a schema shipped as package data (works from a wheel and a checkout)."""
    text = resources.files("schemas").joinpath(name).read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    """Replace local ``{"$ref": "#/$defs/x"}`` with the definition itself.

    The files use ``$defs`` to stay readable; validating through ``$ref`` costs a
    registry look-up per use, a large share of the per-object time. rollgate's schemas
    have no recursive definitions and no sibling keywords next to a ``$ref`` except
    ``x-messages``, which is merged (the sibling's messages win).
    """
    if isinstance(node, list):
        return [inline_refs(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: inline_refs(value, defs) for key, value in node.items() if key != "$defs"}
    ref = out.pop("$ref", None)
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        if ref is not None:
            out["$ref"] = ref
        return out
    target = dict(inline_refs(defs[ref.removeprefix("#/$defs/")], defs))
    messages = {**target.get("x-messages", {}), **out.pop("x-messages", {})}
    target.update(out)
    if messages:
        target["x-messages"] = messages
    return target


def _compile(name: str) -> Draft202012Validator:
    schema = load_schema(name)
    # A broken schema file should fail at import (and in CI), not on the first request.
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(inline_refs(schema, schema.get("$defs", {})))


STAGE_VALIDATOR: Draft202012Validator = _compile(STAGE_SCHEMA_FILE)
PLUGINS_VALIDATOR: Draft202012Validator = _compile(PLUGINS_SCHEMA_FILE)
