"""The docs site (mkdocs.yml, docs/) builds with ``mkdocs build --strict``: mkdocs'
link, anchor and nav checks are set to warn, which --strict turns into failures."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from testkit.paths import REPO_ROOT


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "--config-file", str(root / "mkdocs.yml"), "--site-dir", str(site)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_docs_build_strictly(tmp_path: Path) -> None:
    out = build(REPO_ROOT, tmp_path / "site")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "site" / "flags" / "index.html").is_file()
    assert (tmp_path / "site" / "benchmarks" / "index.html").is_file()


def test_a_broken_link_a_dead_anchor_and_a_page_outside_the_nav_fail(tmp_path: Path) -> None:
    shutil.copy(REPO_ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(REPO_ROOT / "docs", tmp_path / "docs")
    index = tmp_path / "docs" / "index.md"
    cases = {
        "missing.md": "[gone](missing.md)",
        "#no-such-section": "[dead](flags.md#no-such-section)",
        "orphan.md": None,
    }
    for says, line in cases.items():
        original = index.read_text()
        if line is None:
            (tmp_path / "docs" / "orphan.md").write_text("# Not in the nav\n")
        else:
            index.write_text(original + f"\n{line}\n")
        out = build(tmp_path, tmp_path / "site")
        assert out.returncode != 0, f"{says}: built anyway"
        assert says in out.stderr, out.stderr
        index.write_text(original)
        (tmp_path / "docs" / "orphan.md").unlink(missing_ok=True)
