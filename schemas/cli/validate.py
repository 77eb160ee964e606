"""``python -m schemas validate``: the webhook's checks offline, for a user's CI.

``validate FILE|DIR...`` prints one line per finding, ``file: Kind/name: path: message``
(warnings with ``warning: `` before the message), in the order the fields appear in the
file, so it reads like the denial the user would get from ``kubectl apply``; then a
summary. ``--output json`` prints one JSON document instead (with line and column of each
finding). Exit codes: 0 clean (warnings allowed), 1 validation errors, 2 a file that
cannot be read or parsed. No cluster is asked: the cross-object warnings use the
templates found among the files given (see ``schemas.cli.file_templates``).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, TextIO

from schemas.cli import EXIT_INVALID, EXIT_OK, EXIT_UNREADABLE
from schemas.cli.crd_files import read_crds
from schemas.cli.file_templates import FileTemplates
from schemas.cli.manifests import (
    Located,
    Source,
    exact_node,
    label,
    objects,
    position,
    read_sources,
)
from schemas.cli.migrate import legacy_findings
from schemas.constants import KIND_ROLLOUT_MANAGER, KIND_STAGE
from schemas.crdschema import CrdSchemas, check_against_crds, declares
from schemas.dispatch import check, owned_kind
from schemas.findings import Finding, Path
from schemas.skew import reclassify
from schemas.translate import quote_hint


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _value_at(obj: object, path: Path) -> object:
    for part in path:
        if isinstance(obj, dict) and isinstance(part, str) and part in obj:
            obj = obj[part]
            continue
        if isinstance(obj, list) and isinstance(part, int) and 0 <= part < len(obj):
            obj = obj[part]
            continue
        return None
    return obj


def _as_written(finding: Finding, located: Located) -> Finding:
    """A "quote it" hint with the scalar as the file spells it (``on``, not ``true``)."""
    value = _value_at(located.data, finding.path)
    if finding.message != quote_hint(value):
        return finding
    node = exact_node(located.node, finding.path)
    if node is None or not hasattr(node, "style") or node.style is not None \
            or not isinstance(node.value, str):
        return finding
    written = quote_hint(value, node.value)
    return replace(finding, message=written) if written else finding


@dataclass(frozen=True, slots=True)
class _Reported:
    file: str
    obj: dict[str, Any]
    finding: Finding
    where: tuple[int, int] | None  # 1-based line and column

    def text(self) -> str:
        return f"{self.file}: {label(self.obj)}: {self.finding}"

    def record(self) -> dict[str, Any]:
        metadata = self.obj.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        return {
            "file": self.file,
            "line": self.where[0] if self.where else None,
            "column": self.where[1] if self.where else None,
            "apiVersion": self.obj.get("apiVersion"),
            "kind": self.obj.get("kind"),
            "namespace": metadata.get("namespace"),
            "name": metadata.get("name") or metadata.get("generateName"),
            "field": self.finding.field,
            "severity": "warning" if self.finding.warning else "error",
            "message": self.finding.message,
        }


def _in_document_order(findings: list[Finding], located: Located
                       ) -> list[tuple[Finding, tuple[int, int] | None]]:
    placed = [(f, position(located.node, f.path)) for f in findings]
    # Stable: findings at one position keep the checks' order (by field path).
    return sorted(placed, key=lambda fp: fp[1] or (0, 0))


def _with_crd_findings(findings: list[Finding], obj: dict[str, Any],
                       schemas: CrdSchemas) -> list[Finding]:
    """``findings`` plus the CRD schema's errors on paths they do not already report
    (the webhook's own message there is the more helpful one: one error per field).

    A field rollgate does not know is a warning where the CRD (a newer release's, given
    with ``--crds``) declares it, else an error naming the versions rollgate checks
    (``schemas.skew``)."""
    kind = str(obj.get("kind"))
    findings = reclassify(findings, kind=kind,
                          declared=lambda path: declares(obj, path, schemas=schemas))
    reported = {f.path for f in findings if not f.warning}
    return findings + [f for f in check_against_crds(obj, schemas=schemas)
                       if f.path not in reported]


def _check_sources(sources: list[Source], *, allow_http_plugins: bool, crds: CrdSchemas
                   ) -> tuple[list[_Reported], Counter[str]]:
    located = [(source, obj) for source in sources for obj in objects(source)]
    lookup = FileTemplates(obj.data for _, obj in located)
    reported: list[_Reported] = []
    kinds: Counter[str] = Counter()
    for source, obj in located:
        kind = owned_kind(obj.data)
        kinds[kind or "other"] += 1
        if kind is None:
            continue
        findings = check(obj.data, template_lookup=lookup,
                         allow_http_plugins=allow_http_plugins)
        findings += legacy_findings(obj.data, file=source.path)
        findings = _with_crd_findings(findings, obj.data, crds)
        for finding, where in _in_document_order(findings, obj):
            reported.append(_Reported(source.path, obj.data, _as_written(finding, obj), where))
    return reported, kinds


def _summary(*, files: int, unreadable: int, kinds: Counter[str], errors: int,
             warnings: int) -> str:
    text = (f"checked {_plural(kinds[KIND_STAGE], 'Stage')} and "
            f"{_plural(kinds[KIND_ROLLOUT_MANAGER], 'RolloutManager')} in "
            f"{_plural(files, 'file')}")
    if kinds["other"]:
        text += f" ({_plural(kinds['other'], 'other object')} skipped)"
    text += f": {_plural(errors, 'error')}, {_plural(warnings, 'warning')}"
    if unreadable:
        text += f"; {_plural(unreadable, 'path')} could not be read"
    return text


def validate(paths: Sequence[str], *, allow_http_plugins: bool = False,
             recursive: bool = False, output: str = "text", crds: Sequence[str] = (),
             out: TextIO, err: TextIO) -> int:
    """Check every object in ``paths`` (against the CRDs in ``crds`` before the bundled
    ones); print findings and a summary; the exit code."""
    schemas, problems = read_crds(crds)
    sources, unread = read_sources(paths, recursive=recursive)
    problems += unread
    unreadable = len(problems)
    for problem in problems:
        print(problem, file=err)
    reported, kinds = _check_sources(sources, allow_http_plugins=allow_http_plugins,
                                     crds=schemas)
    errors = sum(1 for r in reported if not r.finding.warning)
    warnings = len(reported) - errors
    status = EXIT_UNREADABLE if unreadable else EXIT_INVALID if errors else EXIT_OK
    if output == "json":
        document = {
            "summary": {
                "files": len(sources), "unreadable": unreadable,
                "stages": kinds[KIND_STAGE], "rolloutManagers": kinds[KIND_ROLLOUT_MANAGER],
                "skipped": kinds["other"], "errors": errors, "warnings": warnings,
                "exitCode": status,
            },
            "findings": [r.record() for r in reported],
            "unreadable": problems,
        }
        print(json.dumps(document, ensure_ascii=False, indent=2), file=out)
        return status
    for item in reported:
        print(item.text(), file=out)
    print(_summary(files=len(sources), unreadable=unreadable, kinds=kinds, errors=errors,
                   warnings=warnings), file=out)
    return status


