"""docs/flags.md is what the commands' argument parsers say (support/docgen/flags.py),
so the flag reference cannot drift from the code."""

from __future__ import annotations

import argparse

import pytest

from docgen import flags


def test_the_flag_reference_is_current() -> None:
    assert flags.PAGE.read_text() == flags.render(), "run make flag-docs"


def test_every_flag_of_every_command_is_on_the_page() -> None:
    page = flags.PAGE.read_text()
    for command, module in flags.COMMANDS:
        root = __import__(module, fromlist=["parser"]).parser(command)
        parsers = [root] + [p for a in root._actions
                            if isinstance(a, argparse._SubParsersAction)
                            for p in a.choices.values()]
        for parser in parsers:
            for action in parser._actions:
                for option in action.option_strings:
                    if option not in ("-h", "--help"):
                        assert f"`{option}" in page, f"{command}: {option}"


def test_a_new_flag_makes_the_page_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    from webhook import __main__ as webhook_main

    original = webhook_main.parser

    def with_one_more(prog: str = "python -m webhook") -> argparse.ArgumentParser:
        parser = original(prog)
        parser.add_argument("--brand-new", default="x", help="a flag nobody documented")
        return parser

    monkeypatch.setattr(webhook_main, "parser", with_one_more)
    page = flags.render()
    assert "| `--brand-new BRAND_NEW` | `x` | a flag nobody documented |" in page
    assert flags.main(["--check"]) == 1
