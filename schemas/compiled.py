"""The two JSON Schemas, loaded and compiled once at import and then reused.

Compiling a validator (and checking the schema against the 2020-12 meta-schema) costs
far more than validating one object, and admission has a latency budget, so this
happens exactly once per process. No ``format`` keywords are used: every string whose
format matters (names, URLs, digests, label keys) is checked by a rule in Python that
can say what is wrong, which ``format`` failures cannot.

Each schema is compiled twice (:class:`SchemaValidator`): jsonschema-rs decides, and
jsonschema, whose error objects ``translate`` turns into messages, runs only when the
object is invalid. Most objects an admission webhook sees are valid, and jsonschema's
walk costs about a hundred times jsonschema-rs's (docs/benchmarks.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib import resources
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator, ValidationError

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


class SchemaValidator:
    """One schema behind two validators: ``fast`` (jsonschema-rs) gives the verdict,
    ``jsonschema`` gives the errors, and only for an object ``fast`` finds invalid.

    Findings therefore stay exactly jsonschema's. That needs the two to agree on every
    verdict; tests/unit/test_schemas_fastpath.py checks it on generated objects and every
    pattern on every code point. What they are asked about is JSON as ``json.loads``
    and the YAML loader give it: dicts with string keys, lists, strings, numbers,
    booleans and null. What jsonschema-rs cannot take (a lone surrogate, a non-string
    key, a date) makes it raise, and then jsonschema decides as before. A tuple, which
    neither parser produces, would be an array to jsonschema-rs and not to jsonschema.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self.jsonschema = Draft202012Validator(schema)
        self.fast = jsonschema_rs.Draft202012Validator(schema)

    def _fast_verdict(self, instance: object) -> bool | None:
        try:
            return bool(self.fast.is_valid(instance))
        except Exception:  # whatever jsonschema-rs cannot take, jsonschema decides
            return None

    def is_valid(self, instance: object) -> bool:
        verdict = self._fast_verdict(instance)
        return self.jsonschema.is_valid(instance) if verdict is None else verdict

    def iter_errors(self, instance: object) -> Iterator[ValidationError]:
        """jsonschema's errors for ``instance``; none, without asking it, when valid."""
        if self._fast_verdict(instance):
            return iter(())
        return self.jsonschema.iter_errors(instance)


def _compile(name: str) -> SchemaValidator:
    schema = load_schema(name)
    # A broken schema file should fail at import (and in CI), not on the first request.
    Draft202012Validator.check_schema(schema)
    return SchemaValidator(inline_refs(schema, schema.get("$defs", {})))


STAGE_VALIDATOR: SchemaValidator = _compile(STAGE_SCHEMA_FILE)
PLUGINS_VALIDATOR: SchemaValidator = _compile(PLUGINS_SCHEMA_FILE)
