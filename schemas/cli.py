"""``python -m schemas validate|migrate``: the webhook's checks offline, for a user's CI,
and the rewrite from ``spec.analysis`` to ``spec.verification``.

``validate FILE|DIR...`` prints one line per finding, ``file: Kind/name: path: message``
(warnings with ``warning: `` before the message), in the order the fields appear in the
file, so it reads like the denial the user would get from ``kubectl apply``; then a
summary. ``--output json`` prints one JSON document instead (with line and column of each
finding). Exit codes: 0 clean (warnings allowed), 1 validation errors, 2 a file that
cannot be read or parsed. No cluster is asked: the cross-object warnings use the
templates found among the files given (see ``schemas.file_templates``).

``migrate FILE|DIR...`` prints the files with ``spec.analysis`` rewritten to
``spec.verification`` (``--write``: rewrites them in place); exit 1 when a Stage cannot
be migrated (the reason names its field), 2 when a file cannot be read.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import json
import os
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NoReturn, TextIO

from schemas.constants import KIND_ROLLOUT_MANAGER, KIND_STAGE
from schemas.dispatch import check, owned_kind
from schemas.file_templates import FileTemplates
from schemas.findings import Finding, Path
from schemas.manifests import (
    Located,
    Source,
    Unreadable,
    exact_node,
    expand_paths,
    objects,
    position,
    read_source,
)
from schemas.migrate import legacy_findings, migrate_source
from schemas.translate import quote_hint

EXIT_OK = 0
EXIT_INVALID = 1
EXIT_UNREADABLE = 2


# ---------------------------------------------------------------- reading


def _sources(paths: Sequence[str], *, recursive: bool) -> tuple[list[Source], list[str]]:
    """Every readable source, and a message for each path that could not be read."""
    sources: list[Source] = []
    problems: list[str] = []
    for item in expand_paths(paths, recursive=recursive):
        try:
            if isinstance(item, Unreadable):
                raise item
            sources.append(read_source(item))
        except Unreadable as problem:
            problems.append(str(problem))
    return sources, problems


def _label(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    name = metadata.get("name") or metadata.get("generateName") or "<unnamed>"
    return f"{obj.get('kind')}/{name}"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


# ---------------------------------------------------------------- validate


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
        return f"{self.file}: {_label(self.obj)}: {self.finding}"

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


def _check_sources(sources: list[Source], *, allow_http_plugins: bool
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
             recursive: bool = False, output: str = "text",
             out: TextIO, err: TextIO) -> int:
    """Check every object in ``paths``; print findings and a summary; the exit code."""
    sources, problems = _sources(paths, recursive=recursive)
    unreadable = len(problems)
    for problem in problems:
        print(problem, file=err)
    reported, kinds = _check_sources(sources, allow_http_plugins=allow_http_plugins)
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


# ---------------------------------------------------------------- migrate


def _write_in_place(path: str, text: str) -> None:
    """Replace ``path`` atomically (a reader never sees half a file), keeping its mode."""
    directory = os.path.dirname(os.path.abspath(path))
    mode = os.stat(path).st_mode & 0o7777
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".migrate-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def migrate(paths: Sequence[str], *, write: bool, recursive: bool = False,
            out: TextIO, err: TextIO) -> int:
    """Rewrite ``spec.analysis`` as ``spec.verification`` in every file of ``paths``."""
    if write and "-" in paths:
        print("--write cannot rewrite stdin (-)", file=err)
        return EXIT_UNREADABLE
    sources, problems = _sources(paths, recursive=recursive)
    unreadable = len(problems)
    for problem in problems:
        print(problem, file=err)
    texts: list[str] = []
    refused = 0
    for source in sources:
        outcome = migrate_source(source)
        for located, finding in outcome.refused:
            print(f"{source.path}: {_label(located.data)}: {finding}", file=err)
        refused += len(outcome.refused)
        if outcome.refused:
            continue
        for located, what in outcome.migrated:
            print(f"{source.path}: {_label(located.data)}: {what}", file=err)
        if not outcome.migrated:
            print(f"{source.path}: nothing to migrate", file=err)
        elif write:
            _write_in_place(source.path, outcome.text)
        texts.append(outcome.text)
    if not write and not refused and not unreadable:
        # Several files become one stream, as `kubectl apply -f -` reads it.
        out.write("---\n".join(t if t.endswith("\n") or not t else t + "\n" for t in texts))
    return EXIT_UNREADABLE if unreadable else EXIT_INVALID if refused else EXIT_OK


# ---------------------------------------------------------------- arguments


class _Parser(argparse.ArgumentParser):
    """argparse with a did-you-mean for a misspelt command or option."""

    known: list[str] = []  # filled by _parser(): every command and option name

    def error(self, message: str) -> NoReturn:
        hint = _suggestion(message, _Parser.known)
        super().error(f"{message}; did you mean {hint}?" if hint else message)


def _suggestion(message: str, known: list[str]) -> str | None:
    words: list[str] = re.findall(r"'([^']*)'", message) if "invalid choice" in message else []
    if "unrecognized arguments:" in message:
        words = message.split("unrecognized arguments:", 1)[1].split()
    for word in words:
        close = difflib.get_close_matches(word.split("=", 1)[0], known, n=1, cutoff=0.6)
        if close:
            return close[0]
    return None


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m schemas",
        description="Check rollgate's Stage and RolloutManager stanzas offline, and "
        "migrate spec.analysis to spec.verification.",
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    files_help = ("YAML or JSON file (multi-document; other kinds are ignored), a "
                  "directory (its .yaml, .yml and .json files), or - for stdin")
    check_files = commands.add_parser(
        "validate",
        help="validate manifests as the webhook would",
        description="Exit 0 when clean (warnings allowed), 1 on errors, 2 when a file "
        "cannot be read or parsed.",
    )
    check_files.add_argument("files", nargs="+", metavar="FILE", help=files_help)
    check_files.add_argument(
        "--allow-http-plugins", action="store_true",
        help="accept http:// plugin locations (as the webhook does with the same flag)")
    check_files.add_argument(
        "-o", "--output", choices=("text", "json"), default="text",
        help="text (default): one line per finding and a summary; json: one document "
        "with every finding (file, line, column, kind, name, field, severity, message)")
    rewrite = commands.add_parser(
        "migrate",
        help="rewrite spec.analysis as spec.verification",
        description="Print the files with spec.analysis rewritten as spec.verification "
        "(or rewrite them with --write). Only the stanza is rewritten; comments inside "
        "it are not kept. Exit 1 when a Stage cannot be migrated (valueFrom, an invalid "
        "stanza, both spellings), 2 when a file cannot be read.",
    )
    rewrite.add_argument("files", nargs="+", metavar="FILE", help=files_help)
    rewrite.add_argument("-w", "--write", action="store_true",
                         help="rewrite the files in place instead of printing them")
    for sub in (check_files, rewrite):
        sub.add_argument("-R", "--recursive", action="store_true",
                         help="also read the subdirectories of a directory argument")
    _Parser.known = ["validate", "migrate"] + [
        option for sub in (check_files, rewrite) for action in sub._actions
        for option in action.option_strings if option.startswith("--")
    ]
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):
        # Non-ASCII is printed as is; a terminal that cannot show it gets escapes
        # instead of a UnicodeEncodeError.
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    args = _parser().parse_args(argv)
    if args.command == "migrate":
        return migrate(args.files, write=args.write, recursive=args.recursive,
                       out=sys.stdout, err=sys.stderr)
    return validate(args.files, allow_http_plugins=args.allow_http_plugins,
                    recursive=args.recursive, output=args.output,
                    out=sys.stdout, err=sys.stderr)
