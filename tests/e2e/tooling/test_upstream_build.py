"""hack/k8s/build.sh and the upstream source trees (docs/development.md, "Quick start"): a
missing tree
is one line saying what to clone, and a binary is reused while its tree's Go files are
the same (a fresh copy of the tree, with new modification times, is not rebuilt)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from harness import versions
from harness.upstream import trees
from testkit.paths import REPO_ROOT

BUILD = REPO_ROOT / "hack" / "k8s" / "build.sh"


def build(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(BUILD), *args], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=600, check=False)


def test_a_missing_tree_is_one_line_naming_the_variable_and_the_clone() -> None:
    asked = build("kargo", ROLLGATE_KARGO_SRC="/nonexistent/kargo")
    assert asked.returncode == 1
    lines = [line for line in asked.stderr.splitlines() if "ROLLGATE_KARGO_SRC" in line]
    assert lines == [
        "[k8s] ROLLGATE_KARGO_SRC=/nonexistent/kargo: no such source tree; get it with "
        f"`git clone --depth 1 --branch {versions.kargo()} https://github.com/akuity/kargo "
        "DIR` and set ROLLGATE_KARGO_SRC=DIR"]
    # `all` names it and goes on: the rest of the suite and `make dev` need no Kargo.
    everything = build("all", ROLLGATE_KARGO_SRC="/nonexistent/kargo")
    assert everything.returncode == 0, everything.stderr
    assert "ROLLGATE_KARGO_SRC=/nonexistent/kargo: no such source tree" in everything.stderr
    assert "kargo: building" not in everything.stderr


def test_a_copy_of_the_same_tree_reuses_the_binary(tmp_path: Path) -> None:
    tree = tmp_path / "kargo"
    shutil.copytree(trees.require_kargo_src(), tree)
    binary = trees.kargo_binary()
    before = binary.stat().st_mtime_ns
    out = build("kargo", ROLLGATE_KARGO_SRC=str(tree))
    assert out.returncode == 0, out.stderr
    assert f"kargo: cached at {binary}" in out.stderr
    assert binary.stat().st_mtime_ns == before
    # Nothing was written into the tree (CI's copy is read-only).
    written = [p for p in tree.rglob("*") if p.stat().st_mtime_ns > before and p.is_file()
               and not (trees.require_kargo_src() / p.relative_to(tree)).exists()]
    assert written == []
