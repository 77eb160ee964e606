"""One object against its CRD's OpenAPI v3 schema, in the API server's order and words.

What the API server does with a create or an apply of a custom resource, as far as the
schema decides it (kube-apiserver v1.35, tried against it:
tests/e2e/admission/test_crd_verdicts.py):

1. strict decoding: every field the schema does not declare is an error, anywhere
   (``unknown field "spec.promotionMechanisms"``), ``status`` included, unless
   ``x-kubernetes-preserve-unknown-fields`` keeps it; ``metadata`` (also of an embedded
   resource) is ObjectMeta;
2. pruning: a ``null`` object field or map value whose schema is not ``nullable`` is
   dropped (so it counts as absent: ``Required value`` if required); a ``null`` list
   item is not dropped and fails its type;
3. validation: types (``x-kubernetes-int-or-string`` is integer or string; an integral
   float is an integer), enums, patterns, lengths, item and property counts, bounds,
   required fields (one with a ``default`` is never missing), an embedded resource's
   ``apiVersion`` and ``kind``, ``x-kubernetes-list-type`` map/set duplicates and the
   ``x-kubernetes-validations`` rules that ``cel`` evaluates (a warning for any other);
   ``status`` is not validated for a kind with a status subresource (the API server
   ignores it on create and update).

Every finding is an error on the field's path, worded as the API server words it;
field paths render map keys as ``labels.key`` as the API server does.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from schemas.crdschema.compiled import Node
from schemas.crdschema.load import CrdSchemas, VersionSchema
from schemas.crdschema.replaced import replacement
from schemas.findings import Finding, Path, render_path
from schemas.translate import quote, short

# ObjectMeta's fields (k8s.io/apimachinery metav1.ObjectMeta, JSON names).
OBJECT_META_FIELDS = frozenset({
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion",
    "generation", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
    "labels", "annotations", "ownerReferences", "finalizers", "managedFields",
})
_OBJECT_META_KNOWN = sorted(OBJECT_META_FIELDS)
_EMBEDDED_FIELDS = frozenset({"apiVersion", "kind", "metadata"})
_EMBEDDED_REQUIRED = ("apiVersion", "kind")


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


def _misfit(value: object, node: Node) -> str | None:
    """The expected type when ``value`` does not have it, else None."""
    actual = _json_type(value)
    if node.int_or_string:
        return None if actual in ("integer", "string") else "integer,string"
    if node.type is None or actual == node.type:
        return None
    if node.type == "number" and actual == "integer":
        return None
    return node.type


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

    def node(self, value: object, node: Node, path: Path, *, values: bool) -> None:
        """Check ``value`` (never a pruned null) against ``node`` at ``path``."""
        if value is None and node.nullable:
            return
        expected = _misfit(value, node)
        if expected is not None:
            if not node.keeps_unknown:
                self.unschemed(value, path)
            if values:
                actual = _json_type(value)
                self.error(path, f'Invalid value: "{actual}": {render_path(path)} in body '
                           f'must be of type {expected}: "{actual}"')
            return
        if isinstance(value, dict):
            self.mapping(value, node, path, values=values)
        elif isinstance(value, list):
            self.sequence(value, node, path, values=values)
        elif values:
            self.scalar(value, node, path)
        if values and node.rules:
            self.rules(value, node, path)

    def unschemed(self, value: object, path: Path) -> None:
        """The fields of mappings inside a value of the wrong type (a mapping where the
        schema wants a string, mappings in a list where it wants an object): pruning
        knows none of them, so strict decoding reports each, before the type is checked."""
        if isinstance(value, dict):
            for key in value:
                self.unknown((*path, key), ())
        elif isinstance(value, list):
            for index, item in enumerate(value):
                self.unschemed(item, (*path, index))

    # ------------------------------------------------------------ scalars

    def scalar(self, value: object, node: Node, path: Path) -> None:
        if node.enum is not None and value not in node.enum:
            self.error(path, f"Unsupported value: {_echo(value)}: supported values: "
                       f"{node.enum_text}")
        if isinstance(value, str):
            self.string(value, node, path)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self.number(value, node, path)

    def string(self, value: str, node: Node, path: Path) -> None:
        """The first of maxLength, minLength and pattern that fails, as the API server
        reports only that one."""
        if node.max_length is not None and len(value) > node.max_length:
            self.error(path, f"Too long: may not be more than {node.max_length} bytes")
        elif node.min_length is not None and len(value) < node.min_length:
            self.error(path, f"Invalid value: {short(value)}: {render_path(path)} in body "
                       f"should be at least {node.min_length} chars long")
        elif node.regex is not None and node.regex.search(value) is None:
            self.error(path, f"Invalid value: {short(value)}: {render_path(path)} in body "
                       f"should match '{node.pattern}'")

    def number(self, value: float, node: Node, path: Path) -> None:
        low, high = node.minimum, node.maximum
        if low is not None and (value < low or (node.exclusive_minimum and value == low)):
            relation = "greater than" if node.exclusive_minimum else \
                "greater than or equal to"
            self.bound(value, path, relation, low)
        if high is not None and (value > high or (node.exclusive_maximum and value == high)):
            relation = "less than" if node.exclusive_maximum else "less than or equal to"
            self.bound(value, path, relation, high)

    def bound(self, value: float, path: Path, relation: str, limit: float) -> None:
        self.error(path, f"Invalid value: {_echo(value)}: {render_path(path)} in body should "
                   f"be {relation} {limit}")

    # ------------------------------------------------------------ lists

    def sequence(self, value: list[Any], node: Node, path: Path, *, values: bool) -> None:
        if values:
            self.counts(value, node, path)
            if node.list_type:
                self.duplicates(value, node, path)
        if node.items is None:
            return
        for index, item in enumerate(value):
            self.node(item, node.items, (*path, index), values=values)

    def counts(self, value: list[Any], node: Node, path: Path) -> None:
        if node.min_items is not None and len(value) < node.min_items:
            self.error(path, f"Invalid value: {len(value)}: {render_path(path)} in body "
                       f"should have at least {node.min_items} items")
        if node.max_items is not None and len(value) > node.max_items:
            self.error(path, f"Too many: {len(value)}: must have at most {node.max_items} "
                       "items")

    def duplicates(self, value: list[Any], node: Node, path: Path) -> None:
        seen: set[str] = set()
        for index, item in enumerate(value):
            if node.list_type == "map":
                if not isinstance(item, dict):
                    continue
                identity = _compact({k: item[k] for k in node.map_keys
                                     if item.get(k) is not None})
            else:
                identity = _compact(item)
            if identity in seen:
                self.error((*path, index), f"Duplicate value: {identity}")
            seen.add(identity)

    # ------------------------------------------------------------ objects

    def mapping(self, value: dict[str, Any], node: Node, path: Path, *,
                values: bool) -> None:
        guessed: set[str] = set()
        for key, item in value.items():
            sub = node.properties.get(key) or node.additional
            if sub is None and node.embedded and key in _EMBEDDED_FIELDS:
                self.embedded_field(key, item, (*path, key))
            elif sub is None:
                if not node.keeps_unknown:
                    guessed.add(self.unknown((*path, key), node.known))
            elif item is not None or sub.nullable:
                self.node(item, sub, (*path, key), values=values)
            # else: a null the API server prunes, the same as absent
        if values:
            self.properties_count(value, node, path)
            self.required(value, node.required, node.defaulted | guessed, path)
            if node.embedded:
                self.required(value, _EMBEDDED_REQUIRED, frozenset(), path)

    def embedded_field(self, key: str, item: object, path: Path) -> None:
        """apiVersion, kind and metadata of an embedded resource: strings and ObjectMeta."""
        if key == "metadata":
            _object_meta(self, item, path)
        elif item is not None and not isinstance(item, str):
            self.error(path, f"Invalid value: {_echo(item)}: must be a string")

    def properties_count(self, value: dict[str, Any], node: Node, path: Path) -> None:
        if node.min_properties is not None and len(value) < node.min_properties:
            self.error(path, f"Invalid value: {len(value)}: {render_path(path)} in body "
                       f"should have at least {node.min_properties} properties")
        if node.max_properties is not None and len(value) > node.max_properties:
            self.error(path, f"Too many: {len(value)}: must have at most "
                       f"{node.max_properties} items")

    def unknown(self, path: Path, known: Sequence[str]) -> str:
        """Report an unknown field; the declared field it is a misspelling of, or ""
        (a misspelt required field is one mistake, not also a missing field)."""
        message = f"unknown field {quote(render_path(path))}"
        instead = replacement(self.kind, path)
        name = path[-1]
        guess = difflib.get_close_matches(name, known, n=1) if isinstance(name, str) \
            and not instead else []
        if instead:
            message += f": {instead}"
        elif guess:
            message += f"; did you mean {quote(guess[0])}?"
        self.error(path, message)
        return guess[0] if guess else ""

    def required(self, value: dict[str, Any], names: Sequence[str],
                 defaulted: frozenset[str], path: Path) -> None:
        for name in names:
            if value.get(name) is None and name not in defaulted:
                self.error((*path, name), "Required value")

    def rules(self, value: object, node: Node, path: Path) -> None:
        """The ``x-kubernetes-validations`` rules ``cel`` evaluates (on objects); a
        warning for each other rule, so a user knows it was not checked."""
        for rule in node.rules:
            if rule.predicate is None or not isinstance(value, dict):
                self.out.append(Finding(path=path, warning=True, message=(
                    f"not checked offline: the CRD rule {short(rule.text)} is outside the "
                    "CEL that validate evaluates (README); the API server checks it")))
            elif not rule.predicate(value):
                self.error(path, f"Invalid value: {rule.message}")


def _object_meta(walk: _Walk, metadata: object, path: Path) -> None:
    """ObjectMeta, not the CRD's schema: only its unknown fields here (names and labels
    are rollgate's own checks)."""
    if not isinstance(metadata, dict):
        return
    for key in metadata:
        if key not in OBJECT_META_FIELDS:
            walk.unknown((*path, key), _OBJECT_META_KNOWN)


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
    try:
        _walk_object(walk, obj, found)
    except RecursionError:
        # Only a cyclic schema (YAML anchors in a --crds file) lets an object go this deep.
        return [Finding(path=(), message="nested too deeply to check against the CRD")]
    return walk.out


def _walk_object(walk: _Walk, obj: dict[str, Any], found: VersionSchema) -> None:
    root = found.root
    guessed: set[str] = set()
    for key, value in obj.items():
        sub = root.properties.get(key)
        if key == "metadata":
            _object_meta(walk, value, ("metadata",))
        elif sub is not None:
            if value is not None or sub.nullable:
                values = not (key == "status" and found.status_subresource)
                walk.node(value, sub, (key,), values=values)
        elif not root.keeps_unknown:
            guessed.add(walk.unknown((key,), root.known))
    walk.required(obj, root.required, root.defaulted | guessed, ())


def declares(obj: dict[str, Any], path: Path, *, schemas: CrdSchemas) -> bool:
    """Whether the CRD of ``obj``'s kind and version among ``schemas`` declares the field
    at ``path`` (or keeps unknown fields there): the API server would store it."""
    kind = obj.get("kind")
    found, _ = _version(obj, kind, schemas) if isinstance(kind, str) else (None, [])
    node = found.root if found is not None else None
    for part in path:
        if node is None:
            return False
        if node.keeps_unknown:
            return True
        node = node.items if isinstance(part, int) else (
            node.properties.get(part) or node.additional)
    return node is not None
