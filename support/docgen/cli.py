"""The command line of a generated docs page (``make flag-docs``, ``make metric-docs``):
rewrite the page when it differs from what the code says, or with ``--check`` only say
so, for the tests and CI."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from testkit.paths import REPO_ROOT


def main(argv: Sequence[str] | None, *, page: Path, render: Callable[[], str], prog: str,
         description: str, target: str) -> int:
    """0 when the page is current (or was rewritten); 1 with ``--check`` when it is not."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--check", action="store_true",
                        help="exit 1 when the page is not current, writing nothing")
    args = parser.parse_args(argv)
    wanted = render()
    current = page.read_text() if page.is_file() else ""
    if args.check:
        if current != wanted:
            print(f"{page.relative_to(REPO_ROOT)} is stale: run make {target}",
                  file=sys.stderr)
            return 1
        return 0
    if current != wanted:
        page.write_text(wanted)
        print(f"{page.relative_to(REPO_ROOT)}: rewritten")
    return 0
