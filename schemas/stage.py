"""``check_stage``: every finding about a Stage's verification stanza, in one call.

The JSON Schema (``stage-analysis.schema.json``) checks structure and types, as Kargo's
CRD does for ``spec.verification``; the rules here are the ones JSON Schema cannot say or
cannot say well: duplicates (the later entry carries the error, so the first stays valid
and the fix is obvious), both spellings at once, exactly one of value/valueFrom (in
``spec.analysis``; ``spec.verification`` args have a required string ``value`` only),
label and annotation keys, and labels rollgate reserves. Cross-object warnings come
last, and only for a stanza without errors (they describe what the run would be, which
is meaningless for a stanza that is denied).

An absent ``kind`` is an AnalysisTemplate and an absent ``clusterScope`` is false, here
and everywhere else: nothing defaults them into the object (docs/comparison.md "Decisions where
upstream left a question open", "No defaulting of Stages").
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from schemas.arg_expressions import arg_expression_findings, stage_var_names
from schemas.compiled import STAGE_VALIDATOR
from schemas.constants import (
    KIND_ANALYSIS_TEMPLATE,
    KIND_CLUSTER_ANALYSIS_TEMPLATE,
    KIND_STAGE,
    RESERVED_LABEL_KEYS,
    RESERVED_LABEL_PREFIX,
)
from schemas.findings import Finding, Key, Path, errors, sort_findings
from schemas.limits import oversized
from schemas.lookups import TemplateLookup
from schemas.names import (
    ANNOTATIONS_TOTAL_MAX,
    label_value_problem,
    qualified_name_problem,
)
from schemas.references import template_warnings
from schemas.skew import as_served
from schemas.translate import schema_findings, short
from schemas.verdicts import Verdicts

SPELLINGS: tuple[str, str] = ("analysis", "verification")
TEMPLATE_LIST: dict[str, str] = {"analysis": "templates", "verification": "analysisTemplates"}
_READ_IN_SPEC: tuple[str, ...] = (*SPELLINGS, "vars")


def checked_part(stage: dict[str, Any]) -> dict[str, Any]:
    """What the checks read of a Stage, and all they are given: the namespace (where
    templates are looked up) and ``spec``'s stanza (either spelling) and ``vars`` (the
    names its args' expressions may use). A rule that needs more of the Stage adds it
    here; the webhook keeps findings per distinct part (``schemas.verdicts``)."""
    part: dict[str, Any] = {}
    metadata = stage.get("metadata")
    if isinstance(metadata, dict) and "namespace" in metadata:
        part["metadata"] = {"namespace": metadata["namespace"]}
    if "spec" in stage:
        spec = stage["spec"]
        if isinstance(spec, dict):
            read: dict[str, Any] = {}
            for key in _READ_IN_SPEC:  # a loop: a comprehension is one more call (3.11)
                if key in spec:
                    read[key] = spec[key]
            spec = read
        part["spec"] = spec
    return part


def check_stage(stage: Any, *, template_lookup: TemplateLookup | None = None,
                served: bool = False, verdicts: Verdicts | None = None) -> list[Finding]:
    """Errors and warnings for ``spec.analysis`` / ``spec.verification`` of a Stage.

    ``template_lookup`` enables the cross-object warnings; when it raises
    ``LookupUnavailable`` those warnings are left out and the rest still applies.
    ``served``: the API server accepted ``stage`` (admission, the reconciler), so a field
    rollgate does not know is a newer Kargo's: a warning (``schemas.skew``).
    ``verdicts``: findings kept from earlier calls for the same checked part (the
    webhook's, ``schemas.verdicts``).
    """
    if not isinstance(stage, dict):
        return []
    part = checked_part(stage)
    check = _served_part if served else _offline_part
    if verdicts is None:
        return check(part, template_lookup)
    return verdicts.findings(part, lookup=template_lookup, check=check)


def _served_part(part: dict[str, Any], template_lookup: TemplateLookup | None) -> list[Finding]:
    return _check_part(part, template_lookup=template_lookup, served=True)


def _offline_part(part: dict[str, Any], template_lookup: TemplateLookup | None
                  ) -> list[Finding]:
    return _check_part(part, template_lookup=template_lookup, served=False)


def _check_part(stage: dict[str, Any], *, template_lookup: TemplateLookup | None,
                served: bool) -> list[Finding]:
    too_big = _oversized(stage)
    if too_big:
        return too_big
    findings = schema_findings(STAGE_VALIDATOR, stage, served=served)
    if served and findings:
        findings = as_served(findings, kind=KIND_STAGE)
    spec = stage.get("spec")
    if isinstance(spec, dict):
        present = [s for s in SPELLINGS if spec.get(s) is not None]
        if len(present) == 2:
            findings.append(
                Finding(
                    path=("spec", "verification"),
                    message=(
                        "spec.analysis and spec.verification are two spellings of the same "
                        "stanza; use one of them, not both"
                    ),
                    compare=(("spec", "analysis"), ("spec", "verification")),
                )
            )
        for spelling in present:
            body = spec[spelling]
            if isinstance(body, dict):
                findings.extend(_stanza_rules(("spec", spelling), spelling, body))
                findings.extend(arg_expression_findings(
                    ("spec", spelling, "args"), body.get("args"),
                    var_names=stage_var_names(spec)))
    if template_lookup is not None and not errors(findings):
        findings.extend(template_warnings(stage, lookup=template_lookup))
    return sort_findings(findings)


def _oversized(stage: dict[str, Any]) -> list[Finding]:
    spec = stage.get("spec")
    if not isinstance(spec, dict):
        return []
    found: list[Finding] = []
    for spelling in SPELLINGS:
        body = spec.get(spelling)
        if not isinstance(body, dict):
            continue
        found += oversized(("spec", spelling), body, (TEMPLATE_LIST[spelling], "args"))
        metadata = body.get("analysisRunMetadata")
        if isinstance(metadata, dict):
            found += oversized(("spec", spelling, "analysisRunMetadata"), metadata,
                               ("labels", "annotations"))
    return found


def _stanza_rules(base: Path, spelling: str, body: dict[str, Any]) -> Iterator[Finding]:
    yield from _duplicate_templates(base, spelling, body.get(TEMPLATE_LIST[spelling]))
    yield from _arg_rules(base, spelling, body.get("args"))
    metadata = body.get("analysisRunMetadata")
    if isinstance(metadata, dict):
        meta_path = (*base, "analysisRunMetadata")
        yield from _label_rules((*meta_path, "labels"), metadata.get("labels"))
        yield from _annotation_rules((*meta_path, "annotations"), metadata.get("annotations"))


def _template_key(spelling: str, entry: object) -> tuple[str, str] | None:
    """(kind, name) after defaulting, or None when the entry is too broken to compare."""
    if not isinstance(entry, dict):
        return None
    if spelling == "analysis":
        name, scope = entry.get("templateName"), entry.get("clusterScope")
        if scope is not None and not isinstance(scope, bool):
            return None
        kind = KIND_CLUSTER_ANALYSIS_TEMPLATE if scope else KIND_ANALYSIS_TEMPLATE
    else:
        name, kind = entry.get("name"), entry.get("kind") or KIND_ANALYSIS_TEMPLATE
        if kind not in (KIND_ANALYSIS_TEMPLATE, KIND_CLUSTER_ANALYSIS_TEMPLATE):
            return None
    if not isinstance(name, str) or not name:
        return None
    return kind, name


def _duplicate_templates(base: Path, spelling: str, refs: object) -> Iterator[Finding]:
    if not isinstance(refs, list):
        return
    list_field = TEMPLATE_LIST[spelling]
    list_path = (*base, list_field)
    first: dict[tuple[str, str], int] = {}
    for index, entry in enumerate(refs):
        key = _template_key(spelling, entry)
        if key is None:
            continue
        if key in first:
            kind, name = key
            yield Finding(
                path=(*list_path, index),
                message=(
                    f"duplicate template reference: {kind} {short(name)} is already listed "
                    f"at {list_field}[{first[key]}]"
                ),
                compare=(list_path,),
            )
        else:
            first[key] = index


def _arg_rules(base: Path, spelling: str, args: object) -> Iterator[Finding]:
    if not isinstance(args, list):
        return
    list_path = (*base, "args")
    first: dict[str, int] = {}
    for index, arg in enumerate(args):
        if not isinstance(arg, dict):
            continue
        path = (*list_path, index)
        name = arg.get("name")
        if isinstance(name, str) and name:
            if name in first:
                yield Finding(
                    path=(*path, "name"),
                    message=f"duplicate arg name {short(name)}: already set at args[{first[name]}]",
                    compare=(list_path,),
                )
            else:
                first[name] = index
        if spelling != "analysis":
            continue  # spec.verification: the schema requires a string value
        # null counts as absent, so `value: null` with a valueFrom is fine.
        has_value = arg.get("value") is not None
        has_value_from = arg.get("valueFrom") is not None
        if has_value and has_value_from:
            yield Finding(path=path, message="set value or valueFrom, not both")
        elif not has_value and not has_value_from:
            yield Finding(
                path=path,
                message='required: set value (a string) or valueFrom: {secretKeyRef: {name, key}}',
            )


def _key_path(map_path: Path, key: object) -> Path:
    return (*map_path, Key(key if isinstance(key, str) else str(key)))


def _label_rules(path: Path, labels: object) -> Iterator[Finding]:
    if not isinstance(labels, dict):
        return
    for key, value in labels.items():
        key_path = _key_path(path, key)
        if not isinstance(key, str):
            yield Finding(path=key_path, message="label keys must be strings")
            continue
        problem = qualified_name_problem(key)
        if problem:
            yield Finding(path=key_path, message=f"invalid label key {short(key)}: {problem}")
        elif key in RESERVED_LABEL_KEYS:
            yield Finding(
                path=key_path,
                message=(
                    f"label {short(key)} is reserved: rollgate sets it on every AnalysisRun "
                    "it creates and finds its runs by it"
                ),
            )
        elif key.startswith(RESERVED_LABEL_PREFIX):
            yield Finding(
                path=key_path,
                message=(
                    f"label {short(key)} is reserved: keys under {RESERVED_LABEL_PREFIX} "
                    "belong to rollgate"
                ),
            )
        if isinstance(value, str):
            problem = label_value_problem(value)
            if problem:
                yield Finding(
                    path=key_path, message=f"invalid label value {short(value)}: {problem}"
                )


def _annotation_rules(path: Path, annotations: object) -> Iterator[Finding]:
    if not isinstance(annotations, dict):
        return
    total = 0
    for key, value in annotations.items():
        key_path = _key_path(path, key)
        if not isinstance(key, str):
            yield Finding(path=key_path, message="annotation keys must be strings")
            continue
        total += _utf8_len(key) + (_utf8_len(value) if isinstance(value, str) else 0)
        # The API server lower-cases annotation keys before checking them.
        problem = qualified_name_problem(key.lower())
        if problem:
            yield Finding(path=key_path, message=f"invalid annotation key {short(key)}: {problem}")
        elif key.startswith(RESERVED_LABEL_PREFIX) or key in RESERVED_LABEL_KEYS:
            # Not an error (the contract reserves labels only), but the value would be
            # silently replaced on the run, which a user should hear about.
            yield Finding(
                path=key_path,
                message=(
                    f"annotation {short(key)} is set by rollgate on the AnalysisRun; "
                    "this value may be replaced"
                ),
                warning=True,
            )
    if total > ANNOTATIONS_TOTAL_MAX:
        yield Finding(
            path=path,
            message=(
                f"total size of annotations is {total} bytes (UTF-8, keys and values); it "
                f"must be at most {ANNOTATIONS_TOTAL_MAX} bytes, which leaves room within "
                "Kubernetes' 256 KiB for the annotations rollgate adds to the AnalysisRun"
            ),
        )


def _utf8_len(text: str) -> int:
    """Bytes of ``text`` in UTF-8, as Kubernetes counts them; a lone surrogate (JSON
    allows ``\\ud800``) counts as the 3 bytes Go would replace it with."""
    return len(text.encode("utf-8", "surrogatepass"))
