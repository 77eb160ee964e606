"""One object against its CRD's OpenAPI v3 schema, in the API server's order and words.

What the API server does with a create or an apply of a custom resource, as far as the
schema decides it (kube-apiserver v1.35, tried against it: tests/e2e/test_crd_verdicts.py):

1. strict decoding: every field the schema does not declare is an error, anywhere
   (``unknown field "spec.promotionMechanisms"``), ``status`` included, unless
   ``x-kubernetes-preserve-unknown-fields`` keeps it; ``metadata`` is ObjectMeta;
2. pruning: a ``null`` object field or map value whose schema is not ``nullable`` is
   dropped (so it counts as absent: ``Required value`` if required); a ``null`` list
   item is not dropped and fails its type;
3. validation: types (``x-kubernetes-int-or-string`` is integer or string; an integral
   float is an integer), enums, patterns, lengths, item counts, bounds, required fields
   (one with a ``default`` is never missing), ``x-kubernetes-list-type`` map/set
   duplicates and the ``x-kubernetes-validations`` rules that ``cel`` can evaluate;
   ``status`` is not validated for a kind with a status subresource (the API server
   ignores it on create and update).

Every finding is an error on the field's path, worded as the API server words it;
field paths render map keys as ``labels.key`` as the API server does.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from schemas.crdschema import cel, patterns
from schemas.crdschema.load import CrdSchemas, VersionSchema, as_dict
from schemas.crdschema.replaced import replacement
from schemas.findings import Finding, Path, render_path
from schemas.translate import quote, short

# ObjectMeta's fields (k8s.io/apimachinery metav1.ObjectMeta, JSON names).
OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
    "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
    "labels", "annotations", "ownerReferences", "finalizers", "managedFields",
})
_EMBEDDED_FIELDS = frozenset({"apiVersion", "kind", "metadata"})


def _json_type(value: object) -> str:
    """The JSON type name the API server's messages use for ``value``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "integer" if value.is_integer() else "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object" if isinstance(value, dict) \
        else type(value).__name__


def _fits(value: object, schema: Mapping[str, Any]) -> str | None:
    """The expected type when ``value`` does not have it, else None."""
    actual = _json_type(value)
    if schema.get("x-kubernetes-int-or-string"):
        return None if actual in ("integer", "string") else "integer,string"
    expected = schema.get("type")
    if not isinstance(expected, str) or actual == expected:
        return None
    if expected == "number" and actual == "integer":
        return None
    return expected


def _echo(value: object) -> str:
    """A value in a message as the API server echoes it (strings quoted)."""
    if isinstance(value, str):
        return short(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value) if isinstance(value, int | float) else short(value)


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


@dataclass
class _Walk:
    """One object's walk: its kind (for the replaced-field messages) and the findings."""

    kind: str
    out: list[Finding] = field(default_factory=list)

    def error(self, path: Path, message: str) -> None:
        self.out.append(Finding(path=path, message=message))

    # ------------------------------------------------------------ dispatch

    def node(self, value: object, schema: Mapping[str, Any], path: Path, *,
             values: bool) -> None:
        """Check ``value`` (never a pruned null) against ``schema`` at ``path``."""
        if value is None and schema.get("nullable"):
            return
        expected = _fits(value, schema)
        if expected is not None:
            if values:
                actual = _json_type(value)
                self.error(path, f'Invalid value: "{actual}": {render_path(path)} in body '
                           f'must be of type {expected}: "{actual}"')
            return
        if isinstance(value, dict):
            self.mapping(value, schema, path, values=values)
        elif isinstance(value, list):
            self.sequence(value, schema, path, values=values)
        elif values:
            self.scalar(value, schema, path)
        if values:
            self.rules(value, schema, path)

    # ------------------------------------------------------------ scalars

    def scalar(self, value: object, schema: Mapping[str, Any], path: Path) -> None:
        enum = schema.get("enum")
        if isinstance(enum, list) and value not in enum:
            supported = ", ".join(_compact(item) for item in enum)
            self.error(path, f"Unsupported value: {_echo(value)}: supported values: "
                       f"{supported}")
        if isinstance(value, str):
            self.string(value, schema, path)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self.number(value, schema, path)

    def string(self, value: str, schema: Mapping[str, Any], path: Path) -> None:
        """The first of maxLength, minLength and pattern that fails, as the API server
        reports only that one."""
        where = render_path(path)
        pattern = schema.get("pattern")
        regex = patterns.compiled(pattern) if isinstance(pattern, str) else None
        low, high = schema.get("minLength"), schema.get("maxLength")
        if isinstance(high, int) and len(value) > high:
            self.error(path, f"Too long: may not be more than {high} bytes")
        elif isinstance(low, int) and len(value) < low:
            self.error(path, f"Invalid value: {short(value)}: {where} in body should be at "
                       f"least {low} chars long")
        elif regex is not None and regex.search(value) is None:
            self.error(path, f"Invalid value: {short(value)}: {where} in body should match "
                       f"'{pattern}'")

    def number(self, value: float, schema: Mapping[str, Any], path: Path) -> None:
        where = render_path(path)
        low, high = schema.get("minimum"), schema.get("maximum")
        if isinstance(low, int | float) and schema.get("exclusiveMinimum") and value <= low:
            self.error(path, f"Invalid value: {_echo(value)}: {where} in body should be "
                       f"greater than {low}")
        elif isinstance(low, int | float) and value < low:
            self.error(path, f"Invalid value: {_echo(value)}: {where} in body should be "
                       f"greater than or equal to {low}")
        if isinstance(high, int | float) and schema.get("exclusiveMaximum") and value >= high:
            self.error(path, f"Invalid value: {_echo(value)}: {where} in body should be "
                       f"less than {high}")
        elif isinstance(high, int | float) and value > high:
            self.error(path, f"Invalid value: {_echo(value)}: {where} in body should be "
                       f"less than or equal to {high}")

    # ------------------------------------------------------------ lists

    def sequence(self, value: list[Any], schema: Mapping[str, Any], path: Path, *,
                 values: bool) -> None:
        if values:
            self.counts(value, schema, path)
            self.duplicates(value, schema, path)
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return
        for index, item in enumerate(value):
            self.node(item, items, (*path, index), values=values)

    def counts(self, value: list[Any], schema: Mapping[str, Any], path: Path) -> None:
        low, high = schema.get("minItems"), schema.get("maxItems")
        if isinstance(low, int) and len(value) < low:
            self.error(path, f"Invalid value: {len(value)}: {render_path(path)} in body "
                       f"should have at least {low} items")
        if isinstance(high, int) and len(value) > high:
            self.error(path, f"Too many: {len(value)}: must have at most {high} items")

    def duplicates(self, value: list[Any], schema: Mapping[str, Any], path: Path) -> None:
        list_type = schema.get("x-kubernetes-list-type")
        keys = schema.get("x-kubernetes-list-map-keys") or []
        if list_type not in ("map", "set"):
            return
        seen: set[str] = set()
        for index, item in enumerate(value):
            if list_type == "map":
                if not isinstance(item, dict):
                    continue
                identity = _compact({k: item.get(k) for k in keys if item.get(k) is not None})
            else:
                identity = _compact(item)
            if identity in seen:
                self.error((*path, index), f"Duplicate value: {identity}")
            seen.add(identity)

    # ------------------------------------------------------------ objects

    def mapping(self, value: dict[str, Any], schema: Mapping[str, Any], path: Path, *,
                values: bool) -> None:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        additional = schema.get("additionalProperties")
        keeps_unknown = bool(schema.get("x-kubernetes-preserve-unknown-fields")) or \
            additional is True
        embedded = bool(schema.get("x-kubernetes-embedded-resource"))
        for key, item in value.items():
            sub = properties.get(key)
            if sub is None and isinstance(additional, Mapping):
                sub = additional
            if sub is None and embedded and key in _EMBEDDED_FIELDS:
                self.embedded_field(key, item, (*path, key))
            elif sub is None:
                if not keeps_unknown:
                    self.unknown((*path, key), sorted(properties))
            elif item is not None or sub.get("nullable"):
                self.node(item, sub, (*path, key), values=values)
            # else: a null the API server prunes, the same as absent
        if values:
            self.properties_count(value, schema, path)
            self.required(value, schema, properties, path)
            if embedded:
                self.required(value, {"required": ["apiVersion", "kind"]}, {}, path)

    def embedded_field(self, key: str, item: object, path: Path) -> None:
        """apiVersion, kind and metadata of an embedded resource: strings and ObjectMeta."""
        if key == "metadata":
            _object_meta(self, item, path)
        elif item is not None and not isinstance(item, str):
            self.error(path, f"Invalid value: {_echo(item)}: must be a string")

    def properties_count(self, value: dict[str, Any], schema: Mapping[str, Any],
                         path: Path) -> None:
        low, high = schema.get("minProperties"), schema.get("maxProperties")
        if isinstance(low, int) and len(value) < low:
            self.error(path, f"Invalid value: {len(value)}: {render_path(path)} in body "
                       f"should have at least {low} properties")
        if isinstance(high, int) and len(value) > high:
            self.error(path, f"Too many: {len(value)}: must have at most {high} items")

    def unknown(self, path: Path, known: Sequence[str]) -> None:
        message = f"unknown field {quote(render_path(path))}"
        instead = replacement(self.kind, path)
        if instead:
            message += f": {instead}"
        else:
            name = path[-1]
            guess = difflib.get_close_matches(name, known, n=1) if isinstance(name, str) \
                else []
            if guess:
                message += f"; did you mean {quote(guess[0])}?"
        self.error(path, message)

    def required(self, value: dict[str, Any], schema: Mapping[str, Any],
                 properties: Mapping[str, Any], path: Path) -> None:
        for name in schema.get("required") or []:
            sub = properties.get(name)
            if value.get(name) is None and not (isinstance(sub, Mapping) and "default" in sub):
                self.error((*path, name), "Required value")

    def rules(self, value: object, schema: Mapping[str, Any], path: Path) -> None:
        """The ``x-kubernetes-validations`` rules ``cel`` evaluates (on objects); a
        warning for each other rule, so a user knows it was not checked."""
        for rule in schema.get("x-kubernetes-validations") or []:
            text = rule.get("rule") if isinstance(rule, Mapping) else None
            predicate = cel.parse(text) if isinstance(text, str) else None
            if predicate is None or rule.get("fieldPath") or not isinstance(value, dict):
                self.out.append(Finding(path=path, warning=True, message=(
                    f"not checked offline: the CRD rule {short(text)} is outside the CEL "
                    "that validate evaluates (README); the API server checks it")))
            elif not predicate(value):
                message = rule.get("message") or f"failed rule: {text}"
                self.error(path, f"Invalid value: {message}")


def _object_meta(walk: _Walk, metadata: object, path: Path) -> None:
    """ObjectMeta, not the CRD's schema: only its unknown fields here (names and labels
    are rollgate's own checks)."""
    if not isinstance(metadata, dict):
        return
    for key in metadata:
        if key not in OBJECT_META_FIELDS:
            walk.unknown((*path, key), sorted(OBJECT_META_FIELDS))


def _version(obj: dict[str, Any], kind: str, schemas: CrdSchemas
             ) -> tuple[VersionSchema | None, list[Finding]]:
    api_version = obj.get("apiVersion")
    group, _, version = api_version.rpartition("/") if isinstance(api_version, str) \
        else ("", "", "")
    versions = schemas.lookup(group, kind)
    if not versions:
        return None, []  # no CRD for it among those read: nothing to say
    if version in versions:
        return versions[version], []
    served = ", ".join(sorted(versions))
    return None, [Finding(path=("apiVersion",), message=(
        f"no matches for kind {quote(kind)} in version {short(api_version)}: the CRD "
        f"serves {group}/{served}"))]


def check_against_crds(obj: dict[str, Any], *, schemas: CrdSchemas) -> list[Finding]:
    """Every error the API server's schema stage gives ``obj`` (a Stage or a
    RolloutManager), or ``[]`` when none of ``schemas`` defines its kind."""
    kind = obj.get("kind")
    if not isinstance(kind, str):
        return []
    found, refused = _version(obj, kind, schemas)
    if found is None:
        return refused
    walk = _Walk(kind)
    root = found.schema
    properties: Mapping[str, Any] = as_dict(root.get("properties"))
    for key, value in obj.items():
        if key == "metadata":
            _object_meta(walk, value, ("metadata",))
        elif key in properties:
            if value is not None:
                values = not (key == "status" and found.status_subresource)
                walk.node(value, properties[key], (key,), values=values)
        elif not root.get("x-kubernetes-preserve-unknown-fields"):
            walk.unknown((key,), sorted(properties))
    walk.required(obj, root, properties, ())
    return walk.out
