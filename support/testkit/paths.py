"""Where the repository is, for tests that read its files (examples, manifests, README
and the docs pages)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

# support/testkit/paths.py -> the repository's root.
REPO_ROOT = Path(__file__).resolve().parents[2]


def _nav_pages(nav: Any) -> list[str]:
    """The page files of an mkdocs nav, depth first ({title: page} or {title: [...]})."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    return []


def documentation() -> list[Path]:
    """README.md, then the docs site's pages in mkdocs.yml's nav order: the order a reader
    meets them, and so the order the README test runs their commands in."""
    config = yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text())
    docs = REPO_ROOT / config.get("docs_dir", "docs")
    return [REPO_ROOT / "README.md", *(docs / page for page in _nav_pages(config["nav"]))]
