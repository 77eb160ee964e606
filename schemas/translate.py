"""Turn jsonschema errors into findings a person can act on.

jsonschema's own messages (``'x' does not match '^...$'``, ``Additional properties are
not allowed``) describe the schema, not the mistake. The schema files carry rollgate
annotations instead: ``x-messages`` (failing keyword -> message), ``x-did-you-mean``
(a known wrong field name -> the intended one), ``x-unknown`` (a field that has no
equivalent here -> why, and what to do instead) and ``x-quote`` (a string field where
YAML's implicit typing is the usual cause of a type error). This module reads them, and
keeps one finding per field path so that a field is never reported twice.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Protocol, cast

from schemas.findings import Finding, Key, Path, PathPart

# Lower wins when two keywords fail on the same field: the type is the root cause, and a
# length complaint is more useful than a pattern complaint about the same string.
_PRIORITY: dict[str, int] = {
    "type": 0,
    "required": 1,
    "enum": 2,
    "minItems": 3,
    "minLength": 3,
    "maxLength": 4,
    "pattern": 5,
}
# Map-valued fields whose keys are user data (rendered ``labels[key]``, not ``.key``).
_MAP_FIELDS = frozenset({"labels", "annotations"})
_MAX_ECHO = 80

_JSON_TYPES: dict[str, str] = {
    "null": "null",
    "boolean": "a boolean",
    "integer": "an integer",
    "number": "a number",
    "string": "a string",
    "array": "a list",
    "object": "an object",
}


def short(value: object, limit: int = _MAX_ECHO) -> str:
    """Quote a user value for a message, truncated: input may be huge or hostile."""
    if isinstance(value, list | dict):
        # Never stringify a container: it may be megabytes of nested JSON.
        return json_type(value)
    text = value if isinstance(value, str) else str(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return quote(text)


def quote(text: str) -> str:
    """``text`` in double quotes, JSON-escaped only where it cannot be shown as is.

    Printable non-ASCII stays readable (``"succès-rate"``, not ``"succ\\u00e8s-rate"``);
    control, format (bidi overrides, zero-width) and separator characters are escaped,
    because they would hide or reorder what the user reads, and the API server drops a
    warning that contains a control character.
    """
    out = json.dumps(text, ensure_ascii=False)
    if out.isprintable():
        return out
    return "".join(ch if ch.isprintable() else json.dumps(ch)[1:-1] for ch in out)


def json_type(value: object) -> str:
    """The JSON type name of a decoded value, as a user would read it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def keyify(path: Iterable[Any]) -> Path:
    """Make a jsonschema path a findings path: label/annotation keys become ``Key``."""
    out: list[PathPart] = []
    previous: object = None
    for part in path:
        if previous in _MAP_FIELDS:
            out.append(Key(str(part)))
        elif isinstance(part, int) and not isinstance(part, bool):
            out.append(part)
        else:
            out.append(str(part))
        previous = part
    return tuple(out)


class ErrorLike(Protocol):
    """What is read from one schema error: jsonschema's ``ValidationError`` and
    ``compiled.SchemaError`` (jsonschema-rs's, located) both have it."""

    @property
    def validator(self) -> Any: ...  # the failing keyword
    @property
    def validator_value(self) -> Any: ...
    @property
    def schema(self) -> Any: ...  # the (sub)schema holding the keyword
    @property
    def instance(self) -> Any: ...
    @property
    def absolute_path(self) -> Iterable[Any]: ...
    @property
    def message(self) -> str: ...


def _messages(schema: Mapping[str, Any]) -> Mapping[str, str]:
    found = schema.get("x-messages")
    return found if isinstance(found, Mapping) else {}


def _required_message(parent: Mapping[str, Any], prop: str) -> str:
    # The property's own message first (schemas are compiled with $refs inlined, so it
    # is right there), then the object's.
    prop_schema = parent.get("properties", {}).get(prop, {})
    for candidate in (prop_schema, parent):
        message = _messages(candidate).get("required")
        if message:
            return message
    return "required field is missing"


def quote_hint(value: object, written: str | None = None) -> str | None:
    """Why a scalar is not a string, in YAML terms: the usual cause is an unquoted value.

    ``written`` is the scalar as it appears in the YAML file, when the caller has it
    (the offline CLI does; the webhook sees JSON). Without it a boolean gets a neutral
    wording: ``on``, ``yes`` and ``true`` all arrive as ``true``, and telling someone who
    wrote ``on`` to write ``"true"`` would change their value.
    """
    if not isinstance(value, bool | int | float):
        return None
    kind = json_type(value)
    if written is not None:
        quoted = quote(written)
        return f"must be a string; YAML reads {written} as {kind}, so quote it: {quoted}"
    if isinstance(value, bool):
        return (
            f"must be a string; YAML reads an unquoted true, false, yes, no, on or off as "
            f"a boolean (here {json.dumps(value)}), so quote it as written"
        )
    literal = json.dumps(value)
    return f'must be a string; YAML reads {literal} as {kind}, so quote it: "{literal}"'


def _type_message(error: ErrorLike) -> str:
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    messages = _messages(schema)
    if error.instance is None and messages.get("required"):
        return messages["required"]
    if schema.get("x-quote"):
        hint = quote_hint(error.instance)
        if hint:
            return hint
    if messages.get("type"):
        return f"{messages['type']}, not {json_type(error.instance)}"
    expected = error.validator_value  # the schema's "type": a name or a list of names
    names = [expected] if isinstance(expected, str) else list(cast("Iterable[str]", expected))
    wanted = " or ".join(_JSON_TYPES.get(n, n) for n in names if n != "null") or "null"
    return f"must be {wanted}, not {json_type(error.instance)}"


def did_you_mean(unknown: str, known: Iterable[str], aliases: Mapping[str, str]) -> str | None:
    """The field the user most likely meant: an explicit alias, else the closest name.

    Aliases cover the mistakes difflib cannot see, chiefly mixing the two Stage
    spellings (``name`` in ``spec.analysis`` means ``templateName``).
    """
    known = list(known)
    if unknown in aliases:
        return aliases[unknown]
    lowered = {k.lower(): k for k in known}
    probe = unknown[:_MAX_ECHO].lower()
    if probe in lowered:
        return lowered[probe]
    for alias, target in aliases.items():
        if alias.lower() == probe:
            return target
    close = difflib.get_close_matches(probe, list(lowered), n=1, cutoff=0.6)
    return lowered[close[0]] if close else None


def _unknown_fields(error: ErrorLike) -> list[tuple[str, str, str | None]]:
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    known = list(schema.get("properties", {}))
    aliases = schema.get("x-did-you-mean", {})
    explained = schema.get("x-unknown", {})
    instance = error.instance if isinstance(error.instance, Mapping) else {}
    out: list[tuple[str, str, str | None]] = []
    for key in instance:
        if key in known:
            continue
        name = str(key)
        if name in explained:
            # A field that belongs to another spelling: say where its meaning went.
            out.append((name, f"unknown field {short(name)}: {explained[name]}", None))
            continue
        guess = did_you_mean(name, known, aliases)
        if guess:
            message = f"unknown field {short(name)}; did you mean {quote(guess)}?"
        else:
            expected = ", ".join(quote(k) for k in known)
            message = f"unknown field {short(name)}; expected one of {expected}"
        out.append((name, message, guess))
    return out


def _keyword_message(error: ErrorLike) -> str:
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    keyword = str(error.validator)
    configured = _messages(schema).get(keyword)
    if keyword in ("pattern", "enum"):
        what = configured or (
            "must be one of " + ", ".join(
                json.dumps(v) for v in cast("Iterable[Any]", error.validator_value))
            if keyword == "enum"
            else "has an invalid format"
        )
        return f"invalid value {short(error.instance)}: {what}"
    if configured:
        return configured
    if keyword in ("minItems", "minLength"):
        return "must not be empty"
    if keyword == "maxLength":
        return f"must be at most {error.validator_value} characters"
    # Not reached with rollgate's schemas; kept so a schema change degrades to a
    # readable (if generic) message instead of an exception.
    return error.message


class ErrorSource(Protocol):
    """What ``schema_findings`` asks a validator (``compiled.SchemaValidator`` or
    jsonschema's own)."""

    def iter_errors(self, instance: object) -> Iterator[ErrorLike]: ...


def schema_findings(validator: ErrorSource, instance: object, *,
                    served: bool = False) -> list[Finding]:
    """Every schema error in ``instance`` as findings, at most one per field path, in no
    particular order (the two libraries report errors in different orders; callers sort
    the findings of all checks together).

    ``served``: the API server accepted the object, so an unknown field is a newer
    upstream's, not a misspelling (``schemas.skew``): a required field it resembles is
    still reported missing."""
    found = list(validator.iter_errors(instance))
    if not found:  # most objects: none of the bookkeeping below
        return []
    chosen: dict[Path, tuple[int, Finding]] = {}
    # A misspelt required field is one mistake, not two: when an unknown field's
    # did-you-mean names a missing required field, only the unknown field (with its
    # hint) is reported. Only then: an unrelated unknown field next to a genuinely
    # missing one (``{value: "1", description: x}``) is two mistakes, both reported.
    meant: set[Path] = set()
    missing: dict[Path, None] = {}  # ordered set: one ``required`` error per missing field

    def offer(path: Path, rank: int, message: str, *, unknown: bool = False) -> None:
        current = chosen.get(path)
        if current is None or rank < current[0]:
            chosen[path] = (rank, Finding(path=path, message=message, unknown=unknown))

    for error in found:
        base = keyify(error.absolute_path)
        keyword = str(error.validator)
        if keyword == "additionalProperties":
            for name, message, guess in _unknown_fields(error):
                offer((*base, name), 1, message, unknown=True)
                if guess and not served:
                    meant.add((*base, guess))
        elif keyword == "required":
            present = error.instance if isinstance(error.instance, Mapping) else {}
            parent = error.schema if isinstance(error.schema, Mapping) else {}
            for prop in cast("Iterable[str]", error.validator_value):  # "required": names
                if prop not in present and (*base, prop) not in missing:
                    offer((*base, prop), 1, _required_message(parent, prop))
                    missing[(*base, prop)] = None
        elif keyword == "type":
            offer(base, 0, _type_message(error))
        else:
            offer(base, _PRIORITY.get(keyword, 9), _keyword_message(error))
    for path in missing:
        if path in meant and chosen[path][0] == 1:
            del chosen[path]  # rank 1 here can only be the ``required`` finding itself
    return [finding for _, finding in chosen.values()]
