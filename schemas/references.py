"""Cross-object warnings for a Stage: what its AnalysisRun would look like today.

Templates are looked up through a callable the caller passes in (``schemas`` does no
I/O). These are warnings, never errors: templates may legitimately be created after the
Stage, and the reconciler reports the real outcome as a verification ``Error``.

``walk_templates`` is the one template walk: the builder
(reconciler/verification/analysis_run.py) uses it too, so a Stage the webhook lets
through silently can never make the builder fail in a different way (docs/verification.md, "Engine
mode", *The run*).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeGuard

from schemas.constants import KIND_ANALYSIS_TEMPLATE, KIND_CLUSTER_ANALYSIS_TEMPLATE
from schemas.findings import Finding, Path
from schemas.lookups import LookupUnavailable, TemplateLookup
from schemas.normalize import AnalysisArg, Spelling, analysis_args, stanza, template_refs
from schemas.translate import short

# Bound on the distinct templates one run may reference (nested ones included). Each is a
# look-up (an API call in the webhook, within its admission timeout) and adds to the run's
# size; far more than any real Stage uses, and it bounds a runaway chain of templates.
MAX_TEMPLATES = 200
# Bounds on the did-you-mean for undeclared Stage args (see _arg_warnings).
_MAX_ARG_NAME = 253
_MAX_HINT_CANDIDATES = 100
_MAX_HINTS = 20

_LIST_FIELD = {"analysis": "templates", "verification": "analysisTemplates"}
_NAME_FIELD = {"analysis": "templateName", "verification": "name"}


class TemplateKey(NamedTuple):
    """What a template is looked up by; a tuple so ``lookup(*key)`` works."""

    kind: str
    namespace: str  # "" for a ClusterAnalysisTemplate
    name: str

    @property
    def cluster(self) -> bool:
        return self.kind == KIND_CLUSTER_ANALYSIS_TEMPLATE


def template_key(*, name: str, cluster_scope: bool, namespace: str) -> TemplateKey:
    if cluster_scope:
        return TemplateKey(KIND_CLUSTER_ANALYSIS_TEMPLATE, "", name)
    return TemplateKey(KIND_ANALYSIS_TEMPLATE, namespace, name)


def describe(key: TemplateKey) -> str:
    where = f" in namespace {short(key.namespace)}" if key.namespace else ""
    return f"{key.kind} {short(key.name)}{where}"


def _is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    # Templates come from JSON: a dict is answered without the ABC's instance check,
    # which a walk would otherwise run for every entry of every template (admission
    # time, docs/benchmarks.md "Stage create overhead").
    return type(value) is dict or isinstance(value, Mapping)


def _entries(template: Mapping[str, Any], field_name: str) -> list[Mapping[str, Any]]:
    spec = template.get("spec")
    value = spec.get(field_name) if _is_mapping(spec) else None
    if not isinstance(value, list):
        return []
    # The test inline, not through _is_mapping: this runs for every entry.
    return [e for e in value if type(e) is dict or isinstance(e, Mapping)]


@dataclass(frozen=True, slots=True)
class _Facts:
    """What the walk and the warnings read from one template."""

    nested: tuple[tuple[str, bool], ...]  # spec.templates: (templateName, clusterScope)
    metrics: tuple[str, ...]  # the metrics' names, each once, in order
    args: tuple[tuple[str, bool], ...]  # spec.args: (name, whether it supplies a value)


# The facts of the templates read lately, by the template object's identity: the
# webhook's look-ups answer every request with the same cached object (a refresh brings
# a new one), so each template is read once, not once per admission request; with the
# CPU caches cold, that reading is a tenth of a review (docs/benchmarks.md "Inside the
# webhook server"). The template is held with its facts, so its id cannot be reused
# while it is here; templates are never changed in place (look-up caches, informers and
# the run builder copy what they change). Cleared when full, as many entries at most as
# the webhook's look-up cache holds templates.
_FACTS: dict[int, tuple[Mapping[str, Any], _Facts]] = {}
_MAX_FACTS = 1024


def _facts(template: Mapping[str, Any]) -> _Facts:
    held = _FACTS.get(id(template))
    if held is not None and held[0] is template:
        return held[1]
    facts = _Facts(
        nested=tuple((ref["templateName"], ref.get("clusterScope") is True)
                     for ref in _entries(template, "templates")
                     if isinstance(ref.get("templateName"), str) and ref["templateName"]),
        metrics=tuple(dict.fromkeys(_names(_entries(template, "metrics")))),
        args=tuple((arg["name"], has_value(arg)) for arg in _entries(template, "args")
                   if isinstance(arg.get("name"), str)),
    )
    if len(_FACTS) >= _MAX_FACTS:
        _FACTS.clear()
    _FACTS[id(template)] = (template, facts)
    return facts


def has_value(arg: Mapping[str, Any]) -> bool:
    """Whether an arg entry supplies a value (``value`` or ``valueFrom``)."""
    return arg.get("value") is not None or arg.get("valueFrom") is not None


def nested_refs(template: Mapping[str, Any], *, namespace: str) -> list[TemplateKey]:
    """The ``spec.templates`` references of a template, as look-up keys."""
    return [template_key(name=name, cluster_scope=cluster, namespace=namespace)
            for name, cluster in _facts(template).nested]


# ---------------------------------------------------------------- the walk
# What walk_templates reports, in walk order. ``root`` is the index of the Stage's
# reference the walk was following, so a finding can point at it.


@dataclass(frozen=True, slots=True)
class Found:
    root: int
    key: TemplateKey
    template: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Missing:
    root: int
    key: TemplateKey
    referrer: TemplateKey | None  # None: the Stage itself references it


@dataclass(frozen=True, slots=True)
class Cycle:
    root: int
    chain: tuple[TemplateKey, ...]  # starts and ends with the same template


@dataclass(frozen=True, slots=True)
class TooMany:
    root: int
    limit: int


Step = Found | Missing | Cycle | TooMany


def walk_templates(
    roots: Sequence[TemplateKey], lookup: TemplateLookup, *, namespace: str,
    limit: int = MAX_TEMPLATES,
) -> Iterator[Step]:
    """Visit the templates of a run depth-first, a template before the ones it nests.

    Each template is looked up and reported once (a diamond is not a duplicate); one
    reached again on its own path is a Cycle. A nested reference without
    ``clusterScope: true`` resolves in ``namespace``. After ``limit`` look-ups a TooMany
    ends the walk. Lazy, so a caller that stops at the first problem makes no further
    look-ups; exceptions from ``lookup`` pass through. Iterative, so a long chain
    cannot hit the recursion limit.
    """
    visited: set[TemplateKey] = set()
    for index, root in enumerate(roots):
        # Each entry carries its ancestors (the recursion path) for cycle detection.
        stack: list[tuple[TemplateKey, tuple[TemplateKey, ...]]] = [(root, ())]
        while stack:
            key, ancestors = stack.pop()
            if key in ancestors:
                yield Cycle(index, (*ancestors[ancestors.index(key):], key))
                continue
            if key in visited:
                continue
            if len(visited) >= limit:
                yield TooMany(index, limit)
                return
            visited.add(key)
            result = lookup(*key)
            if result is None:
                yield Missing(index, key, ancestors[-1] if ancestors else None)
                continue
            # Anything but a mapping is a broken look-up; treat it as an empty template
            # rather than guessing that it does not exist.
            template: Mapping[str, Any] = result if _is_mapping(result) else {}
            yield Found(index, key, template)
            nested = nested_refs(template, namespace=namespace)
            if nested:
                # Reversed so the first nested reference is popped (visited) first.
                path = (*ancestors, key)
                stack.extend((child, path) for child in reversed(nested))


def build_order(found: Iterable[Found]) -> list[Found]:
    """Namespaced templates before cluster ones, walk order kept within each group
    (docs/verification.md "Engine mode", "The run"): the order the run's metrics and args are merged
    in."""
    return sorted(found, key=_cluster_scoped)  # sorted() is stable


def _cluster_scoped(step: Found) -> bool:
    return step.key.kind == KIND_CLUSTER_ANALYSIS_TEMPLATE


def _names(entries: list[Mapping[str, Any]]) -> list[str]:
    names = []
    for entry in entries:
        name = entry.get("name")
        if isinstance(name, str):
            names.append(name)
    return names


def _metric_collisions(
    found: Sequence[Found], list_path: Path, name_field: str
) -> list[Finding]:
    owner: dict[str, TemplateKey] = {}
    out: list[Finding] = []
    for step in found:
        # A template that defines a name twice is told about once (Argo Rollouts'
        # own validation reports that duplicate).
        for name in _facts(step.template).metrics:
            first = owner.setdefault(name, step.key)
            if first != step.key:
                out.append(Finding(
                    # On the reference's name, like a missing template: the same kind of
                    # finding (about the template a reference leads to) at the same path.
                    path=(*list_path, step.root, name_field),
                    message=f"metric {short(name)} is defined by both {describe(first)} and "
                    f"{describe(step.key)}; an AnalysisRun cannot have two metrics with one "
                    "name",
                    warning=True,
                ))
    return out


def _declared_args(found: Sequence[Found]) -> dict[str, tuple[bool, TemplateKey]]:
    """Each arg the templates declare: whether one of them supplies its value, and the
    first template that declares it."""
    declared: dict[str, tuple[bool, TemplateKey]] = {}
    for step in found:
        for name, supplies in _facts(step.template).args:
            supplied, first = declared.get(name, (False, step.key))
            declared[name] = (supplied or supplies, first)
    return declared


def _arg_warnings(
    found: Sequence[Found], args: list[AnalysisArg], spelling: Spelling, args_path: Path
) -> list[Finding]:
    declared = _declared_args(found)
    out: list[Finding] = []
    given = {arg["name"] for arg in args}
    undeclared = [(index, arg["name"]) for index, arg in enumerate(args)
                  if arg["name"] not in declared]
    if undeclared:
        # The declared args the Stage does not set are what a misspelt Stage arg most
        # likely meant (one it sets was not misspelt there). Bounded: difflib is
        # quadratic, and this runs inside an admission request.
        unset = [n for n in declared if n not in given and len(n) <= _MAX_ARG_NAME]
        candidates = unset[:_MAX_HINT_CANDIDATES]
        for shown, (index, name) in enumerate(undeclared):
            hint = _closest_arg(name, candidates) if shown < _MAX_HINTS else None
            out.append(Finding(
                path=(*args_path, index, "name"),
                message=f"no referenced template declares arg {short(name)}"
                f"{f' (did you mean {short(hint)}?)' if hint else ''}; it is passed to the "
                "AnalysisRun anyway",
                warning=True,
            ))
    how = "value or valueFrom" if spelling == "analysis" else "name and value"
    for name, (supplied, key) in declared.items():
        if not supplied and name not in given:
            out.append(Finding(
                path=args_path,
                message=f"{describe(key)} declares arg {short(name)} without a value; set it "
                f"here ({how}), or the verification will end in Error",
                warning=True,
            ))
    return out


def _closest_arg(name: object, candidates: list[str]) -> str | None:
    if not isinstance(name, str) or len(name) > _MAX_ARG_NAME:
        return None
    close = difflib.get_close_matches(name, candidates, n=1, cutoff=0.75)
    return close[0] if close else None


def _step_finding(step: Missing | Cycle | TooMany, ref_path: Path) -> Finding:
    if isinstance(step, Cycle):
        chain = " -> ".join(short(k.name) for k in step.chain)
        message = (f"templates reference each other in a cycle ({chain}); "
                   "the AnalysisRun cannot be built")
    elif isinstance(step, Missing):
        via = f" (referenced by {describe(step.referrer)})" if step.referrer else ""
        message = (f"{describe(step.key)}{via} does not exist; the verification will end "
                   "in Error until it is created")
    else:
        message = (f"the AnalysisRun would need more than {step.limit} templates (nested "
                   "ones included); the verification will end in Error")
    return Finding(path=ref_path, message=message, warning=True)


def template_warnings(stage: dict[str, Any], *, lookup: TemplateLookup) -> list[Finding]:
    """Warnings about the templates a (valid) Stage references; [] if look-ups fail."""
    stanza_found = stanza(stage)
    if stanza_found is None:
        return []
    spelling, body = stanza_found
    metadata = stage.get("metadata")
    namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
    namespace = namespace if isinstance(namespace, str) else ""
    base: Path = ("spec", spelling)
    list_path: Path = (*base, _LIST_FIELD[spelling])
    roots = [template_key(name=ref["name"], cluster_scope=ref["clusterScope"],
                          namespace=namespace) for ref in template_refs(spelling, body)]
    findings: list[Finding] = []
    found: list[Found] = []
    complete = True
    try:
        for step in walk_templates(roots, lookup, namespace=namespace):
            if isinstance(step, Found):
                found.append(step)
                continue
            if not isinstance(step, Cycle):
                complete = False
            findings.append(
                _step_finding(step, (*list_path, step.root, _NAME_FIELD[spelling]))
            )
    except LookupUnavailable:
        # Unknown is not the same as missing: say nothing rather than something wrong.
        return []
    # The builder's order, so that "first" and "second" definitions agree with its errors.
    found = build_order(found)
    findings.extend(_metric_collisions(found, list_path, _NAME_FIELD[spelling]))
    if complete:
        # With a template missing (or not looked up), its args are unknown: these would
        # be guesses.
        findings.extend(_arg_warnings(found, analysis_args(body), spelling, (*base, "args")))
    return findings
