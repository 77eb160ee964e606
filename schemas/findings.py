"""Findings: what a check says about one field of an object.

A finding is the unit that every consumer shares: the webhook turns errors into a
denial (and warnings into AdmissionReview warnings), the reconciler turns them into a
verification ``Error`` or a ``PluginsSynced=False`` condition, and the offline CLI
prints them. Keeping the path structured (not a pre-rendered string) lets ratcheting
look the value up in ``object`` and ``oldObject``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field


class Key(str):
    """A map key in a path (a label or annotation key), rendered ``labels[key]``.

    Kubernetes renders map keys in brackets (``metadata.labels[app.kubernetes.io/name]``)
    because they may contain dots and slashes; as a ``str`` subclass it still indexes a
    dict, so ratcheting can look the value up like any other path part.
    """

    __slots__ = ()


PathPart = str | int
Path = tuple[PathPart, ...]


def _printable(part: str) -> str:
    """``part`` with each non-printable character escaped as ``repr`` would (``\\n``,
    ``\\x00``, ``\\u2028``): a label key or unknown field name is user data, and the API
    server drops a warning that contains a control character."""
    if part.isprintable():
        return part
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in part)


def render_path(path: Iterable[PathPart]) -> str:
    """Render a path the way Kubernetes does: ``spec.plugins.metric[0].sha256``."""
    out: list[str] = []
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif isinstance(part, Key):
            out.append(f"[{_printable(part)}]")
        elif out:
            out.append(f".{_printable(part)}")
        else:
            out.append(_printable(part))
    return "".join(out)


@dataclass(frozen=True, slots=True)
class Finding:
    """One error or warning about the field at ``path``.

    ``unknown`` marks a field the schema does not declare: in an object the API server
    accepted, that is a newer upstream's field, not a mistake (``schemas.skew``).

    ``compare`` lists the paths whose values decide validation ratcheting on UPDATE
    (docs/comparison.md "Decisions where upstream left a question open", "Ratcheting", and
    schemas/README.md: for a duplicate the whole list, for both spellings both stanzas). It
    defaults to ``(path,)``; a path that does not exist in an object is compared at
    its nearest existing parent.
    """

    path: Path
    message: str
    warning: bool = False
    compare: tuple[Path, ...] = field(default=())
    # A field rollgate's pinned schema does not know (``schemas.skew`` decides whether
    # that is an error or a newer upstream's field).
    unknown: bool = False

    @property
    def field(self) -> str:
        return render_path(self.path)

    @property
    def compare_paths(self) -> tuple[Path, ...]:
        return self.compare or (self.path,)

    def __str__(self) -> str:
        kind = "warning: " if self.warning else ""
        return f"{self.field}: {kind}{self.message}"


def errors(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if not f.warning]


def warnings(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f.warning]


def _path_key(path: Path) -> tuple[tuple[int, int, str], ...]:
    # Indexes sort numerically and before names, so templates[2] comes before
    # templates[10] and a list's entries before fields of the object holding it.
    return tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in path)


def sort_findings(findings: Iterable[Finding]) -> list[Finding]:
    """Findings in a stable order by field path (stable: equal paths keep their order)."""
    return sorted(findings, key=_finding_key)


def _finding_key(finding: Finding) -> tuple[tuple[int, int, str], ...]:
    return _path_key(finding.path)
