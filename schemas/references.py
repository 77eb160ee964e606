"""Cross-object warnings for a Stage: what its AnalysisRun would look like today.

Templates are looked up through a callable the caller passes in (``schemas`` does no
I/O). These are warnings, never errors: templates may legitimately be created after the
Stage, and the reconciler reports the real outcome as a verification ``Error``. The walk
mirrors the builder (DESIGN.md): depth-first, a template before the ones it nests, each
template once (a diamond is not a duplicate), a nested reference without
``clusterScope: true`` resolves in the Stage's namespace, and cycles are detected.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from schemas.constants import KIND_ANALYSIS_TEMPLATE, KIND_CLUSTER_ANALYSIS_TEMPLATE
from schemas.findings import Finding, Path
from schemas.lookups import LookupUnavailable, TemplateLookup
from schemas.normalize import AnalysisSpec, TemplateRef, normalize_analysis
from schemas.translate import short

TemplateKey = tuple[str, str, str]  # (kind, namespace, name); namespace "" = cluster

_LIST_FIELD = {"analysis": "templates", "verification": "analysisTemplates"}
_NAME_FIELD = {"analysis": "templateName", "verification": "name"}


def _key(*, name: str, cluster_scope: bool, namespace: str) -> TemplateKey:
    if cluster_scope:
        return (KIND_CLUSTER_ANALYSIS_TEMPLATE, "", name)
    return (KIND_ANALYSIS_TEMPLATE, namespace, name)


def describe(key: TemplateKey) -> str:
    kind, namespace, name = key
    where = f" in namespace {short(namespace)}" if namespace else ""
    return f"{kind} {short(name)}{where}"


def _spec(template: dict[str, Any]) -> dict[str, Any]:
    spec = template.get("spec")
    return spec if isinstance(spec, dict) else {}


def _entries(template: dict[str, Any], field_name: str) -> list[dict[str, Any]]:
    value = _spec(template).get(field_name)
    return [e for e in value if isinstance(e, dict)] if isinstance(value, list) else []


def nested_refs(template: dict[str, Any], *, namespace: str) -> list[TemplateKey]:
    """The ``spec.templates`` references of a template, as look-up keys."""
    return [
        _key(name=ref["templateName"], cluster_scope=ref.get("clusterScope") is True,
             namespace=namespace)
        for ref in _entries(template, "templates")
        if isinstance(ref.get("templateName"), str) and ref["templateName"]
    ]


@dataclass
class _Walk:
    lookup: TemplateLookup
    namespace: str
    cache: dict[TemplateKey, dict[str, Any] | None] = field(default_factory=dict)
    visited: set[TemplateKey] = field(default_factory=set)
    # (index of the Stage's reference that reached it, key, template), in build order.
    found: list[tuple[int, TemplateKey, dict[str, Any]]] = field(default_factory=list)
    missing: bool = False

    def fetch(self, key: TemplateKey) -> dict[str, Any] | None:
        if key not in self.cache:
            result = self.lookup(*key)
            # Anything but a dict or None is a broken look-up; treat it as an empty
            # template rather than guessing that it does not exist.
            self.cache[key] = result if isinstance(result, dict) or result is None else {}
        return self.cache[key]

    def walk(self, index: int, root: TemplateKey, ref_path: Path) -> Iterator[Finding]:
        # Iterative so that a long chain of nested templates cannot hit the recursion
        # limit; each stack entry carries its ancestors for cycle detection.
        stack: list[tuple[TemplateKey, tuple[TemplateKey, ...]]] = [(root, ())]
        while stack:
            key, ancestors = stack.pop()
            if key in ancestors:
                chain = " -> ".join(short(k[2]) for k in (*ancestors[ancestors.index(key):], key))
                yield Finding(
                    path=ref_path,
                    message=f"templates reference each other in a cycle ({chain}); "
                    "the AnalysisRun cannot be built",
                    warning=True,
                )
                continue
            if key in self.visited:
                continue
            self.visited.add(key)
            template = self.fetch(key)
            if template is None:
                self.missing = True
                via = f" (referenced by {describe(ancestors[-1])})" if ancestors else ""
                yield Finding(
                    path=ref_path,
                    message=f"{describe(key)}{via} does not exist; the verification will end "
                    "in Error until it is created",
                    warning=True,
                )
                continue
            self.found.append((index, key, template))
            nested = nested_refs(template, namespace=self.namespace)
            stack.extend((child, (*ancestors, key)) for child in reversed(nested))


def _metric_collisions(walk: _Walk, list_path: Path) -> Iterator[Finding]:
    owner: dict[str, TemplateKey] = {}
    for index, key, template in walk.found:
        for name in dict.fromkeys(
            m["name"] for m in _entries(template, "metrics") if isinstance(m.get("name"), str)
        ):
            first = owner.setdefault(name, key)
            if first != key:
                yield Finding(
                    path=(*list_path, index),
                    message=f"metric {short(name)} is defined by both {describe(first)} and "
                    f"{describe(key)}; an AnalysisRun cannot have two metrics with one name",
                    warning=True,
                )


def _arg_warnings(walk: _Walk, spec: AnalysisSpec, args_path: Path) -> Iterator[Finding]:
    declared: dict[str, tuple[bool, TemplateKey]] = {}
    for _, key, template in walk.found:
        for arg in _entries(template, "args"):
            name = arg.get("name")
            if not isinstance(name, str):
                continue
            has_value = arg.get("value") is not None or arg.get("valueFrom") is not None
            supplied, first = declared.get(name, (False, key))
            declared[name] = (supplied or has_value, first)
    given = set()
    for index, arg in enumerate(spec["args"]):
        given.add(arg["name"])
        if arg["name"] not in declared:
            yield Finding(
                path=(*args_path, index, "name"),
                message=f"no referenced template declares arg {short(arg['name'])}; "
                "it is passed to the AnalysisRun anyway",
                warning=True,
            )
    for name, (supplied, key) in declared.items():
        if not supplied and name not in given:
            yield Finding(
                path=args_path,
                message=f"{describe(key)} declares arg {short(name)} without a value; set it "
                "here (value or valueFrom), or the verification will end in Error",
                warning=True,
            )


def template_warnings(stage: dict[str, Any], *, lookup: TemplateLookup) -> list[Finding]:
    """Warnings about the templates a (valid) Stage references; [] if look-ups fail."""
    spec = normalize_analysis(stage)
    if spec is None:
        return []
    metadata = stage.get("metadata")
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    walk = _Walk(lookup=lookup, namespace=namespace if isinstance(namespace, str) else "")
    spelling = spec["spelling"]
    base: Path = ("spec", spelling)
    list_path: Path = (*base, _LIST_FIELD[spelling])
    findings: list[Finding] = []
    try:
        for index, ref in enumerate(spec["templates"]):
            findings.extend(
                walk.walk(
                    index,
                    _root_key(ref, walk.namespace),
                    (*list_path, index, _NAME_FIELD[spelling]),
                )
            )
    except LookupUnavailable:
        # Unknown is not the same as missing: say nothing rather than something wrong.
        return []
    findings.extend(_metric_collisions(walk, list_path))
    if not walk.missing:
        # With a template missing, its args are unknown: these would be guesses.
        findings.extend(_arg_warnings(walk, spec, (*base, "args")))
    return findings


def _root_key(ref: TemplateRef, namespace: str) -> TemplateKey:
    return _key(name=ref["name"], cluster_scope=ref["clusterScope"], namespace=namespace)
