"""What a user reads from ``kubectl`` when rollgate denies an object, and what the
invalid examples promise it lists (their header comments: ``#   <path>   <why>``)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from testkit.paths import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples"


def documented_paths(example: Path) -> list[str]:
    """The field paths an invalid example's header comment promises the denial lists."""
    return re.findall(r"^#\s+(spec\.\S.*?)\s{2,}\S", example.read_text(), re.MULTILINE)


def causes(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The field paths kubectl lists under ``The <Kind> "<name>" is invalid:``, one
    ``* <path>: <message>`` line each (the webhook's own line has an empty path)."""
    paths = [line[2:].split(": ", 1)[0] for line in result.stderr.splitlines()
             if line.startswith("* ")]
    return [p for p in paths if p]


def assert_denied(
    result: subprocess.CompletedProcess[str], webhook: str, paths: list[str]
) -> None:
    """Denied by rollgate (not by a schema or RBAC), with every field path listed.

    For a denial with ``reason: Invalid`` and causes, kubectl prints the causes under
    ``The <Kind> "<name>" is invalid:``, the first of them being the API server's
    ``admission webhook "..." denied the request``.
    """
    assert result.returncode != 0, f"expected a denial, kubectl said:\n{result.stdout}"
    assert f'admission webhook "{webhook}" denied the request' in result.stderr, result.stderr
    missing = [p for p in paths if f"{p}:" not in result.stderr]
    assert not missing, f"field paths missing from kubectl's error: {missing}\n{result.stderr}"


def warnings_of(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Warning:")]
