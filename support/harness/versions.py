"""The upstream versions rollgate targets, read from hack/versions.env.

That file is also ``source``d by bash (hack/k8s/build.sh), so its format is the
common subset of both: ``KEY=value`` lines, ``#`` comments and blank lines. Anything
else is an error here rather than a value bash and Python would read differently.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from harness.paths import REPO_ROOT

VERSIONS_FILE = REPO_ROOT / "hack" / "versions.env"
_LINE = re.compile(r"([A-Z][A-Z0-9_]*)=([A-Za-z0-9._+-]+)")


def parse(text: str) -> dict[str, str]:
    """``KEY=value`` pairs of a versions file; raises ValueError on any other line."""
    pairs: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _LINE.fullmatch(line)
        if match is None:
            raise ValueError(f"versions.env line {number}: expected KEY=value, got {raw!r}")
        pairs[match[1]] = match[2]
    return pairs


@functools.cache
def load(path: Path = VERSIONS_FILE) -> dict[str, str]:
    return parse(path.read_text())


def get(key: str) -> str:
    """One pinned version, e.g. ``get("ARGO_ROLLOUTS_VERSION")`` -> ``"v1.9.1"``."""
    try:
        return load()[key]
    except KeyError:
        raise KeyError(f"{key} is not pinned in {VERSIONS_FILE}") from None


def kubernetes() -> str:
    return get("KUBERNETES_VERSION")


def kargo() -> str:
    return get("KARGO_VERSION")


def argo_rollouts() -> str:
    return get("ARGO_ROLLOUTS_VERSION")


def argo_rollouts_manager() -> str:
    return get("ARGO_ROLLOUTS_MANAGER_VERSION")


def expr_lang() -> str:
    return get("EXPR_LANG_VERSION")


def cert_manager() -> str:
    return get("CERT_MANAGER_VERSION")
