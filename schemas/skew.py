"""Version skew: a field rollgate's pinned schema does not know.

Kargo or argo-rollouts-manager may be upgraded before rollgate, and their next minor may
add a field under ``spec.verification`` or a ``spec.plugins`` entry. In an object the API
server stored or is admitting, every field was declared by the served CRD (an
undeclared one is refused under strict field validation, or pruned), so a field
rollgate does not know is a newer upstream's, never a typo: it is allowed with a warning
that names the field and the versions rollgate checks, kept as it is, and ignored
(docs/install.md, "Version skew"). Offline (``rollgate validate``) nothing says which
CRD a cluster serves: an unknown field stays an error unless a CRD given with ``--crds``
declares it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from schemas.findings import Finding, Path
from schemas.targets import API_OF

SECTION = 'docs/install.md "Version skew"'


def _checked_against(kind: str) -> str:
    return f"rollgate checks {kind}s as {API_OF.get(kind, kind)} defines them"


def allowed(finding: Finding, *, kind: str) -> Finding:
    """``finding`` about a field the served CRD declares, as the warning it becomes."""
    return replace(finding, warning=True, message=(
        f"field not known to rollgate ({_checked_against(kind)}); allowed, since the "
        f"served CRD declares it (a newer upstream's field?): rollgate keeps it and does "
        f"not check or use it; see {SECTION}"))


def pinned(finding: Finding, *, kind: str) -> Finding:
    """``finding`` about a field no CRD at hand declares: still an error, saying which
    versions rollgate knows."""
    return replace(finding, message=(
        f"{finding.message} ({_checked_against(kind)}; a field of a newer release "
        "passes with its CRD given as --crds)"))


def as_served(findings: Iterable[Finding], *, kind: str) -> list[Finding]:
    """Findings about an object the API server accepted: every unknown field is a newer
    upstream's (see the module docstring)."""
    return reclassify(findings, kind=kind, declared=lambda path: True)


def reclassify(findings: Iterable[Finding], *, kind: str,
               declared: Callable[[Path], bool]) -> list[Finding]:
    """Each unknown-field error as a warning where ``declared(path)`` (a CRD declares
    the field), else as an error naming rollgate's target versions."""
    out = []
    for finding in findings:
        if finding.unknown and not finding.warning:
            finding = allowed(finding, kind=kind) if declared(finding.path) \
                else pinned(finding, kind=kind)
        out.append(finding)
    return out
