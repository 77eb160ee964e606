"""docs/flags.md, every flag of every ``rollgate`` command, generated from the commands'
own argument parsers so the page cannot drift from them.

Each command module exposes ``parser(prog)``; a sub-command (``certs generate``,
``validate``) gets a section of its own. A flag's row: its spellings and metavar, its
default (what the parser fills in when the flag is absent; required flags say so), its
choices and its help text. ``make flag-docs`` (``python -m docgen.flags``) rewrites
the page; ``--check`` only says whether it is current, and a test fails when it is not.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Iterator, Sequence

from docgen import cli
from testkit.paths import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "flags.md"
# (command as users type it, module with parser(prog))
COMMANDS = (
    ("rollgate webhook", "webhook.__main__"),
    ("rollgate reconciler", "reconciler.cli"),
    ("rollgate certs", "certs.__main__"),
    ("rollgate", "schemas.cli.main"),  # its sub-commands: validate, migrate
    ("rollgate explain", "reconciler.explain_command"),
    ("rollgate selftest", "webhook.selftest_command"),
)
HEADER = """# Command-line flags

Every flag of every `rollgate` command (`python -m <package>` takes the same), generated
from the commands' argument parsers by `make flag-docs`; a test fails when this page and
the parsers disagree. [Components and flags](components.md) says what each process does;
the chart's values that set these flags are in [Helm](install.md#helm).
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _spelling(action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    takes_value = action.nargs != 0
    metavar = action.metavar or action.dest.upper()
    shown = [f"`{o} {metavar}`" if takes_value else f"`{o}`" for o in action.option_strings]
    return ", ".join(shown)


def _default(action: argparse.Action) -> str:
    if action.required:
        return "required"
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, [], ""):
        return ""
    if isinstance(action.default, tuple):  # HOST:PORT, parsed into its two parts
        return "`" + ":".join(str(v) for v in action.default) + "`"
    if isinstance(action.default, list):  # a comma list, as it is written
        return "`" + ",".join(str(v) for v in action.default) + "`"
    return f"`{action.default}`"


def _help(action: argparse.Action) -> str:
    text = action.help if action.help not in (None, argparse.SUPPRESS) else ""
    if action.choices is not None and not isinstance(action.choices, dict):
        choices = ", ".join(f"`{c}`" for c in action.choices)
        text = f"{text}; one of {choices}" if text else f"one of {choices}"
    return _cell(str(text))


def _flags(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| flag | default | meaning |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
            continue
        rows.append(f"| {_spelling(action)} | {_default(action)} | {_help(action)} |")
    return rows if len(rows) > 2 else ["(no flags)"]


def _sections(command: str, parser: argparse.ArgumentParser) -> Iterator[str]:
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    own = [a for a in parser._actions
           if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)]
    if own or not subcommands:
        yield f"## `{command}`\n"
        if parser.description:
            yield _cell(parser.description) + "\n"
        yield "\n".join(_flags(parser)) + "\n"
    for group in subcommands:
        for name, sub in group.choices.items():
            yield from _sections(f"{command} {name}", sub)


def render() -> str:
    """The whole page."""
    parts = [HEADER]
    for command, module in COMMANDS:
        build = importlib.import_module(module).parser
        parts += list(_sections(command, build(command)))
    return "\n".join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    return cli.main(argv, page=PAGE, render=render,
                    prog="python -m docgen.flags",
                    description=(__doc__ or "").splitlines()[0],
                    target="flag-docs")

if __name__ == "__main__":
    sys.exit(main())
