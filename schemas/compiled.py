"""The two JSON Schemas, loaded and compiled once at import and then reused.

Compiling a validator (and checking the schema against the 2020-12 meta-schema) costs
far more than validating one object, and admission has a latency budget, so this
happens exactly once per process. No ``format`` keywords are used: every string whose
format matters (names, URLs, digests, label keys) is checked by a rule in Python that
can say what is wrong, which ``format`` failures cannot.

Each schema is compiled twice (:class:`SchemaValidator`): jsonschema-rs decides and
locates the errors, which ``translate`` turns into messages; jsonschema is the reference
it is tested against and the fallback for what jsonschema-rs cannot take. jsonschema's
walk costs about a hundred times jsonschema-rs's, on valid and invalid objects alike
(docs/benchmarks.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
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


# How every pattern of rollgate's schemas ends, for jsonschema (Python's ``re``, where a
# bare ``$`` also matches before a final newline; the schema files' descriptions say so).
_RE_END = "$(?!\\n)"


def rust_pattern(pattern: str) -> str:
    """``pattern`` as jsonschema-rs is given it: Rust's regex engines read a bare ``$``
    as the end of the text already, and a look-ahead sends jsonschema-rs to its
    backtracking engine, which costs a Stage's validation a fifth of its time when the
    CPU caches are cold (docs/benchmarks.md "Inside the webhook server")."""
    return pattern[: -len(_RE_END)] + "$" if pattern.endswith(_RE_END) else pattern


def rust_patterns(node: Any) -> Any:
    """A schema with every ``pattern`` keyword through :func:`rust_pattern` (not the
    ``x-`` annotations, whose ``pattern`` entries are messages)."""
    if isinstance(node, list):
        return [rust_patterns(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: value if key.startswith("x-") else rust_patterns(value)
           for key, value in node.items()}
    if isinstance(out.get("pattern"), str):
        out["pattern"] = rust_pattern(out["pattern"])
    return out


@dataclass(frozen=True, slots=True)
class SchemaError:
    """One jsonschema-rs error, carrying what ``translate`` reads from jsonschema's
    ``ValidationError`` under the same names: the failing keyword (``validator``), its
    value in the schema, the (sub)schema holding it, the failing value, and its path."""

    validator: str
    validator_value: Any
    schema: Mapping[str, Any]
    instance: Any
    absolute_path: tuple[str | int, ...]
    message: str


class SchemaValidator:
    """One schema behind two validators: ``fast`` (jsonschema-rs) gives the verdict and
    the errors, ``jsonschema`` stands in only for an object ``fast`` cannot take.

    Findings must not depend on which of the two answered. That needs them to agree on
    every verdict and on every error's keyword, place and values;
    tests/unit/schemas/test_fastpath.py checks both on generated objects (and every
    pattern on every code point). What they are asked about is JSON as ``json.loads``
    and the YAML loader give it: dicts with string keys, lists, strings, numbers,
    booleans and null. What jsonschema-rs cannot take (a lone surrogate, a non-string
    key, a date) makes it raise, and then jsonschema answers as before. A tuple, which
    neither parser produces, would be an array to jsonschema-rs and not to jsonschema.
    """

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema
        self.jsonschema = Draft202012Validator(schema)
        # Same verdicts, same schema paths: only the patterns' spelling differs.
        self.fast = jsonschema_rs.Draft202012Validator(rust_patterns(schema))

    def _fast_verdict(self, instance: object) -> bool | None:
        try:
            return bool(self.fast.is_valid(instance))
        except Exception:  # whatever jsonschema-rs cannot take, jsonschema decides
            return None

    def is_valid(self, instance: object) -> bool:
        verdict = self._fast_verdict(instance)
        return self.jsonschema.is_valid(instance) if verdict is None else verdict

    def iter_errors(self, instance: object) -> Iterator[SchemaError | ValidationError]:
        """Every schema error in ``instance``, from one jsonschema-rs pass (which costs a
        valid object no more than ``is_valid``)."""
        try:
            return iter([self._located(error, instance)
                         for error in self.fast.iter_errors(instance)])
        except Exception:  # jsonschema-rs refused the object, or named a place we lack
            return self.jsonschema.iter_errors(instance)

    def _located(self, error: Any, root: object) -> SchemaError:
        """jsonschema-rs's error with its place checked and its value looked up.

        The schema path ends in the failing keyword; the steps before it name the
        subschema (in the inlined schema fast was compiled from) and, one by one, the
        steps into the instance. jsonschema-rs's instance path is not always exact (it
        drops an empty key and turns a key like "0" into an index), so each of its parts
        is checked against the step it must match; a mismatch raises, and jsonschema
        answers for the whole object. The value comes from the caller's object, so it is
        the very object jsonschema would name (an int stays an int).
        """
        *where, keyword = error.schema_path
        path = tuple(error.instance_path)
        schema: Any = self.schema
        value: Any = root
        steps = iter(where)
        depth = 0
        for step in steps:
            if step == "properties":
                name = next(steps)
                schema = schema["properties"][name]
            elif step in ("items", "additionalProperties"):
                schema = schema[step]
                name = None
            else:  # an applicator rollgate's schemas do not use
                raise LookupError(f"unexpected schema step {step!r}")
            part = path[depth]
            if step == "items":
                if not isinstance(value, list) or type(part) is not int:
                    raise LookupError(f"{part!r} is not an index into a list")
            elif not isinstance(value, dict) or type(part) is not str or (
                    name is not None and part != name):
                raise LookupError(f"{part!r} is not the key schema step {step!r} names")
            value = value[part]
            depth += 1
        if depth != len(path):
            raise LookupError(f"instance path {path!r} is longer than its schema path")
        return SchemaError(validator=keyword, validator_value=schema[keyword], schema=schema,
                           instance=value, absolute_path=path, message=error.message)


def _compile(name: str) -> SchemaValidator:
    schema = load_schema(name)
    # A broken schema file should fail at import (and in CI), not on the first request.
    Draft202012Validator.check_schema(schema)
    return SchemaValidator(inline_refs(schema, schema.get("$defs", {})))


STAGE_VALIDATOR: SchemaValidator = _compile(STAGE_SCHEMA_FILE)
PLUGINS_VALIDATOR: SchemaValidator = _compile(PLUGINS_SCHEMA_FILE)
