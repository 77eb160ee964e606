"""The arguments of ``python -m schemas validate|migrate`` and ``main()``.

A misspelt command or option gets a did-you-mean; non-ASCII output is printed as is
(escaped only where the terminal cannot show it).
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from schemas.cli.migrate import migrate
from schemas.cli.validate import validate


class _Parser(argparse.ArgumentParser):
    """argparse with a did-you-mean for a misspelt command or option."""

    known: list[str] = []  # filled by parser(): every command and option name

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


def parser(prog: str) -> argparse.ArgumentParser:
    root = _Parser(
        prog=prog,
        description="Check rollgate's Stage and RolloutManager stanzas offline, and "
        "migrate spec.analysis to spec.verification.",
    )
    commands = root.add_subparsers(dest="command", required=True, parser_class=_Parser)
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
        "--crds", action="append", default=[], metavar="DIR",
        help="check objects against these CRDs (files or directories of `kubectl get crd "
        "NAME -o yaml` output) before the bundled Kargo v1.11.2 / argo-rollouts-manager "
        "v0.0.9 ones; may be repeated")
    check_files.add_argument(
        "-o", "--output", choices=("text", "json"), default="text",
        help="text (default): one line per finding and a summary; json: one document "
        "with every finding (file, line, column, kind, name, field, severity, message)")
    rewrite = commands.add_parser(
        "migrate",
        help="rewrite spec.analysis as spec.verification and Kargo v0 spec.subscriptions "
        "as spec.requestedFreight",
        description="Print the files with spec.analysis rewritten as spec.verification "
        "and spec.subscriptions as spec.requestedFreight (or rewrite them with --write). "
        "Only those stanzas are rewritten; comments inside them are not kept. Exit 1 when "
        "a Stage cannot be migrated (valueFrom, an invalid stanza, both spellings, "
        "spec.promotionMechanisms, an upstream Stage not among the files), 2 when a file "
        "cannot be read.",
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
    return root


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m schemas") -> int:
    """``prog``: how the user called it (``rollgate`` or ``python -m schemas``), for the
    usage and error lines."""
    for stream in (sys.stdout, sys.stderr):
        # Non-ASCII is printed as is; a terminal that cannot show it gets escapes
        # instead of a UnicodeEncodeError.
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    args = parser(prog).parse_args(argv)
    if args.command == "migrate":
        return migrate(args.files, write=args.write, recursive=args.recursive,
                       out=sys.stdout, err=sys.stderr)
    return validate(args.files, allow_http_plugins=args.allow_http_plugins,
                    recursive=args.recursive, output=args.output, crds=args.crds,
                    out=sys.stdout, err=sys.stderr)
