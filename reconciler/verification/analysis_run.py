"""Build the AnalysisRun for a Stage's verification: a pure function of the Stage,
the templates it references (through ``lookup``) and the freight. The engine gathers
those templates first (``referenced_templates``), so its planner builds from data.

Pure so that the rules (docs/verification.md, "Engine mode", *The run*) are tested
without an API server and so the same inputs always give the same run — which is what
makes creating it by a deterministic name safe across reconciler crashes.

Templates are handled as plain JSON: every field of a template's spec that the merge
does not know about is copied into the run unchanged, so a metric provider added to
Argo Rollouts next year survives without a rollgate release.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

import schemas
from kubekit.kinds import ANALYSIS_RUN, STAGE
from schemas.constants import ANNOTATION_FREIGHT, ANNOTATION_REQUEST
from schemas.expressions.evaluate import (
    EVALUATED_FUNCTIONS,
    EvaluationFailed,
    NotEvaluated,
    arg_value,
    build_environment,
)
from schemas.lookups import TemplateLookup
from schemas.objects import Obj, meta_of
from schemas.references import (
    Cycle,
    Found,
    Missing,
    TemplateKey,
    build_order,
    has_value,
    template_key,
    walk_templates,
)

from .naming import (
    freight_annotation,
    freight_collection_id,
    full_run_labels,
    run_labels,
    run_name,
)

# Spec fields the merge combines; everything else is copied as it is.
MERGED_FIELDS = frozenset({"metrics", "args", "dryRun", "measurementRetention", "templates"})


class AnalysisBuildError(ValueError):
    """The run cannot be built; the message says what to fix and where.

    A user error, final until the Stage or a template changes (unlike an API error
    raised by ``lookup``, which passes through unchanged so it can be retried).
    """


class TemplateNotFound(AnalysisBuildError):
    def __init__(self, message: str, *, kind: str, namespace: str, name: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.namespace = namespace
        self.name = name


# ---------------------------------------------------------------- template graph
# The walk itself is schemas.references.walk_templates, shared with the webhook's
# warnings so that the two can never disagree about a Stage's templates.


def _show(key: TemplateKey) -> str:
    """How the builder's messages name a template (``Kind ns/name`` or ``Kind 'name'``)."""
    return f"{key.kind} {key.name!r}" if key.cluster else f"{key.kind} {key.namespace}/{key.name}"


def resolve_templates(
    roots: Sequence[TemplateKey], lookup: TemplateLookup, *, namespace: str, where: str
) -> list[tuple[TemplateKey, Mapping[str, Any]]]:
    """The templates of a run in build order (``schemas.references.walk_templates``,
    then namespaced before cluster), or AnalysisBuildError at the first problem.

    A missing template raises TemplateNotFound; ``where`` names the Stage field that
    references the roots. The walk is lazy, so nothing is looked up after the first
    problem; exceptions from ``lookup`` pass through unchanged.
    """
    found: list[Found] = []
    for step in walk_templates(roots, lookup, namespace=namespace):
        if isinstance(step, Found):
            found.append(step)
        elif isinstance(step, Cycle):
            cycle = " -> ".join(_show(k) for k in step.chain)
            raise AnalysisBuildError(f"template references form a cycle: {cycle}")
        elif isinstance(step, Missing):
            referrer = f"spec.templates of {_show(step.referrer)}" if step.referrer else where
            key = step.key
            raise TemplateNotFound(
                f"{_show(key)} not found (referenced by {referrer})",
                kind=key.kind, namespace=key.namespace, name=key.name,
            )
        else:
            raise AnalysisBuildError(
                f"the run would need more than {step.limit} templates (nested ones "
                f"included, starting from {where}); reduce the templates it references"
            )
    ordered = [(f.key, f.template) for f in build_order(found)]
    for key, template in ordered:
        _check_shape(key, template)
    return ordered


# The list fields the builder merges, and the key that names each entry.
_NAMED_LISTS = {"metrics": "name", "dryRun": "metricName",
                "measurementRetention": "metricName", "args": "name"}


def _check_shape(key: TemplateKey, template: Mapping[str, Any]) -> None:
    """AnalysisBuildError for a template the merge cannot read.

    Argo's own CRD schema keeps such templates out of a real cluster, but a template
    stored under a looser schema must give a verification Error naming it, not an
    exception the controller would retry for ever.
    """
    spec = template.get("spec")
    if spec is None:
        return
    if not isinstance(spec, dict):
        raise AnalysisBuildError(f"{_show(key)}: spec must be an object")
    for field, name_key in _NAMED_LISTS.items():
        entries = spec.get(field)
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise AnalysisBuildError(f"{_show(key)}: spec.{field} must be a list")
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get(name_key), str):
                raise AnalysisBuildError(
                    f"{_show(key)}: spec.{field}[{i}] must be an object with a string "
                    f"{name_key}"
                )


# ---------------------------------------------------------------- merging


def _merge_named(
    field: str, key: str, sources: Sequence[tuple[TemplateKey, Mapping[str, Any]]]
) -> list[Any]:
    """Concatenate list ``field`` of every template; a repeated ``key`` is an error."""
    out: list[Any] = []
    owner: dict[Any, TemplateKey] = {}
    for tid, template in sources:
        for entry in (template.get("spec") or {}).get(field) or []:
            name = entry.get(key) if isinstance(entry, dict) else None
            if name is not None and name in owner:
                first = owner[name]
                where = f"both {_show(first)} and {_show(tid)}" if first != tid else (
                    f"{_show(tid)} twice")
                raise AnalysisBuildError(
                    f"{field}: {key} {name!r} is defined by {where}; "
                    f"{key}s must be unique across the templates of a run"
                )
            if name is not None:
                owner[name] = tid
            out.append(copy.deepcopy(entry))
    return out


def _merge_template_args(
    sources: Sequence[tuple[TemplateKey, Mapping[str, Any]]],
) -> tuple[dict[str, Obj], dict[str, TemplateKey]]:
    """Template args by name; the same name with two different values is an error."""
    args: dict[str, Obj] = {}
    declared_by: dict[str, TemplateKey] = {}
    for tid, template in sources:
        for arg in (template.get("spec") or {}).get("args") or []:
            if not isinstance(arg, dict) or not arg.get("name"):
                continue
            name = arg["name"]
            if name not in args:
                args[name] = copy.deepcopy(arg)
                declared_by[name] = tid
                continue
            current = args[name]
            if has_value(arg) and has_value(current):
                if (arg.get("value"), arg.get("valueFrom")) != (
                    current.get("value"), current.get("valueFrom")
                ):
                    raise AnalysisBuildError(
                        f"arg {name!r} has conflicting values in {_show(declared_by[name])} "
                        f"and {_show(tid)}; give it the same default in both or set it in the Stage"
                    )
            elif has_value(arg):
                # A declaration without a default is satisfied by another's default.
                args[name] = copy.deepcopy(arg)
                declared_by[name] = tid
    return args, declared_by


def _apply_stage_args(
    args: dict[str, Obj], stage_args: Sequence[Mapping[str, Any]]
) -> dict[str, Obj]:
    out = {k: copy.deepcopy(v) for k, v in args.items()}
    for arg in stage_args:
        name = arg["name"]
        entry = out.setdefault(name, {"name": name})  # undeclared: passed through
        entry.pop("value", None)
        entry.pop("valueFrom", None)
        if arg.get("valueFrom") is not None:
            entry["valueFrom"] = copy.deepcopy(arg["valueFrom"])
        else:
            entry["value"] = arg.get("value")
    return out


def _stage_vars(stage: Mapping[str, Any]) -> list[tuple[str, str]]:
    entries = (stage.get("spec") or {}).get("vars")
    return [(str(v.get("name")), v.get("value") or "") for v in entries or []
            if isinstance(v, dict) and v.get("name")]


def _evaluated_args(
    stage: Mapping[str, Any], stage_args: Sequence[Mapping[str, Any]], *, stanza_path: str
) -> list[Obj]:
    """The Stage's args with their Kargo expressions evaluated as Kargo would (docs/verification.md,
    "Kargo expressions in verification args"): ``spec.vars`` first, in order, then each
    non-empty value. What Kargo fails on, and what rollgate does not evaluate, is an
    AnalysisBuildError naming the arg and the expression, never a literal pass-through."""
    meta = meta_of(stage)
    try:
        env = build_environment(project=meta.get("namespace") or "",
                                stage=meta.get("name") or "", stage_vars=_stage_vars(stage))
    except ValueError as err:
        raise AnalysisBuildError(f"spec.vars: Kargo cannot evaluate it: {err}") from None
    out: list[Obj] = []
    for index, arg in enumerate(stage_args):
        value = arg.get("value")
        entry = dict(arg)
        if isinstance(value, str) and value:
            where = f"{stanza_path}.args[{index}] ({arg['name']!r}) value {value!r}"
            try:
                entry["value"] = arg_value(arg["name"], value, env)
            except NotEvaluated as err:
                raise AnalysisBuildError(
                    f"{where}: rollgate does not evaluate this expression ({err}); engine mode "
                    "evaluates literals, ctx and vars members, string + and "
                    f"{', '.join(EVALUATED_FUNCTIONS)}: write it with those") from None
            except (EvaluationFailed, ValueError) as err:
                raise AnalysisBuildError(f"{where}: Kargo fails this arg: {err}") from None
        out.append(entry)
    return out


def _merge_other_fields(sources: Sequence[tuple[TemplateKey, Mapping[str, Any]]]) -> Obj:
    out: Obj = {}
    owner: dict[str, TemplateKey] = {}
    for tid, template in sources:
        for field, value in (template.get("spec") or {}).items():
            if field in MERGED_FIELDS:
                continue
            if field in out and out[field] != value:
                raise AnalysisBuildError(
                    f"spec.{field} differs between {_show(owner[field])} and {_show(tid)}; "
                    "a run can have only one value: make them equal or remove it from one template"
                )
            if field not in out:
                out[field] = copy.deepcopy(value)
                owner[field] = tid
    return out


# ---------------------------------------------------------------- the run


def check_stanza(stage: Mapping[str, Any]) -> schemas.AnalysisSpec:
    """The normalized stanza; AnalysisBuildError naming every invalid field."""
    problems = schemas.errors(schemas.check_stage(stage, served=True))
    if problems:
        raise AnalysisBuildError(
            "invalid analysis stanza: " + "; ".join(f"{f.field}: {f.message}" for f in problems)
        )
    spec = schemas.normalize_analysis(stage)
    if spec is None:
        raise AnalysisBuildError("the Stage has no spec.analysis or spec.verification stanza")
    return spec


def _roots(spec: schemas.AnalysisSpec, namespace: str) -> list[TemplateKey]:
    """The templates the stanza references itself, as look-up keys."""
    return [template_key(name=t["name"], cluster_scope=t["clusterScope"], namespace=namespace)
            for t in spec["templates"]]


def referenced_templates(stage: Mapping[str, Any],
                         lookup: TemplateLookup) -> dict[TemplateKey, Mapping[str, Any]]:
    """Every template the run of ``stage`` may read (nested ones included, up to the
    walk's bound), as ``lookup`` finds them; one it does not find is left out, and
    building with a look-up of the result (``templates_lookup``) reports it missing.
    Exceptions from ``lookup`` pass through."""
    spec = schemas.normalize_analysis(stage)
    if spec is None:
        return {}
    namespace = str(meta_of(stage).get("namespace") or "")
    # A reference without a name is the stanza's error, which the build reports.
    roots = [k for k in _roots(spec, namespace) if isinstance(k.name, str) and k.name]
    return {step.key: step.template for step in walk_templates(roots, lookup, namespace=namespace)
            if isinstance(step, Found)}


def templates_lookup(templates: Mapping[TemplateKey, Mapping[str, Any]]) -> TemplateLookup:
    """A look-up answered from ``templates`` (None: not among them)."""

    def lookup(kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return templates.get(TemplateKey(kind, namespace, name))

    return lookup


def build_analysis_run(
    stage: Mapping[str, Any],
    lookup: TemplateLookup,
    *,
    freight: Sequence[str],
    collection: str | None = None,
    attempt: int = 1,
    request: str | None = None,
) -> Obj:
    """The AnalysisRun for verifying ``freight`` in ``stage`` (attempt ``attempt``).

    ``collection`` is the freight collection id as Kargo recorded it (computed with
    Kargo's rule when None); ``request`` is the value of the reverify request that
    starts this attempt, kept on the run so the request is acted on only once.

    Raises AnalysisBuildError (TemplateNotFound for a missing template) for anything
    the user must fix; exceptions from ``lookup`` pass through unchanged.
    """
    meta = meta_of(stage)
    stage_name: str = meta.get("name") or ""
    namespace: str = meta.get("namespace") or ""
    if not freight:
        raise AnalysisBuildError("no freight to verify")
    if attempt < 1:
        raise AnalysisBuildError(f"attempt must be at least 1, got {attempt}")
    collection = collection or freight_collection_id(freight)
    spec = check_stanza(stage)
    stanza_path = f"spec.{spec['spelling']}"
    list_field = "templates" if spec["spelling"] == "analysis" else "analysisTemplates"

    roots = _roots(spec, namespace)
    sources = resolve_templates(
        roots, lookup, namespace=namespace, where=f"{stanza_path}.{list_field} of the Stage"
    )

    run_spec = _merge_other_fields(sources)
    template_args, declared_by = _merge_template_args(sources)
    args = _apply_stage_args(
        template_args, _evaluated_args(stage, spec["args"], stanza_path=stanza_path))
    for name, arg in args.items():
        if not has_value(arg):
            raise AnalysisBuildError(
                f"arg {name!r} declared by {_show(declared_by[name])} has no value: set it in "
                f"{stanza_path}.args of the Stage, or give it a default in the template"
            )
    if args:
        run_spec["args"] = list(args.values())
    run_spec["metrics"] = _merge_named("metrics", "name", sources)
    for field in ("dryRun", "measurementRetention"):
        entries = _merge_named(field, "metricName", sources)
        if entries:
            run_spec[field] = entries

    labels: dict[str, str] = dict(spec["analysisRunMetadata"]["labels"])
    annotations: dict[str, str] = dict(spec["analysisRunMetadata"]["annotations"])
    full = full_run_labels(stage_name, collection, attempt)
    # Exactly run_labels (what adoption compares), so the two can never drift apart.
    labels.update(run_labels(stage_name, collection, attempt))
    for key, value in full.items():
        if labels[key] != value:
            annotations[key] = value  # the full value, for humans and for adoption
    annotations[ANNOTATION_FREIGHT] = freight_annotation(freight)
    if request is not None:
        annotations[ANNOTATION_REQUEST] = request

    return {
        "apiVersion": ANALYSIS_RUN.api_version,
        "kind": ANALYSIS_RUN.kind,
        "metadata": {
            "name": run_name(stage_name, collection, attempt),
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [{
                "apiVersion": stage.get("apiVersion") or STAGE.api_version,
                "kind": stage.get("kind") or STAGE.kind,
                "name": stage_name,
                "uid": meta.get("uid") or "",
                "controller": True,
                "blockOwnerDeletion": False,
            }],
        },
        "spec": run_spec,
    }
