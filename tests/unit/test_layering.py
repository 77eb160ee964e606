"""Each import-linter contract in pyproject.toml (docs/development.md, "Code layout and checks") is
alive: one deliberate violation of it, in a copy of the packages, makes `lint-imports`
fail and name that contract, while the copy without it passes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from testkit.paths import REPO_ROOT

# Every root package of the contracts, and where it lives in this repository.
PACKAGES = {name: REPO_ROOT / name for name in (
    "schemas", "kubekit", "webhook", "reconciler", "certs", "rollgate", "tests", "bench")}
PACKAGES.update({name: REPO_ROOT / "support" / name for name in ("harness", "testkit", "docgen")})
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
# contract name's start -> (module file, the import that breaks it)
VIOLATIONS = {
    "rollgate (the command) is the top layer": ("reconciler/cli.py", "import rollgate"),
    "schemas is the lowest layer": ("schemas/stage.py", "import kubekit"),
    "kubekit imports only schemas": ("kubekit/rest.py", "import webhook"),
    "webhook, reconciler and certs are independent": ("certs/pki.py", "import webhook"),
    "the plugins' pure modules": ("reconciler/plugins/decisions.py", "import kubekit.rest"),
    "the reconciler's runtime knows no feature": ("reconciler/runtime/queue.py",
                                                  "import reconciler.plugins"),
    "verification's pure modules": ("reconciler/verification/plan.py", "import kubernetes"),
    "verification and plugins are independent": ("reconciler/plugins/render.py",
                                                  "import reconciler.verification"),
    "schemas.cli (the CLI": ("schemas/stage.py", "import schemas.cli"),
    "webhook decisions never import": ("webhook/admission.py", "import gunicorn"),
    "the product imports no support code": ("schemas/stage.py", "import testkit"),
    "testkit (builders, shapes, waits, the fake API) starts nothing": (
        "testkit/waits.py", "import harness.plane"),
    "docgen (the generated reference pages) starts nothing": ("docgen/flags.py",
                                                              "import harness.plane"),
    "the harness imports no test": ("harness/chart.py", "import tests"),
    "unit and HTTP tests start nothing": ("tests/unit/schemas/test_corpus.py",
                                          "import harness.plane"),
    "benchmarks use the harness and the kit, never a test": ("bench/stats.py", "import tests"),
    "the harness's core plane knows nothing": ("harness/plane.py", "import harness.node"),
    "the harness's parts know none of its compositions": ("harness/node/cluster.py",
                                                          "import harness.kits"),
    "the fake API's layers": ("testkit/fakeapi/tracker.py", "import testkit.fakeapi.server"),
}


def contract_names() -> list[str]:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    return [c["name"] for c in config["tool"]["importlinter"]["contracts"]]


def lint(tree: Path) -> subprocess.CompletedProcess[str]:
    # The copy first on the path: the editable install's finder comes after it.
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--config",
                           str(tree / "pyproject.toml")], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("layering")
    for package, source in PACKAGES.items():
        shutil.copytree(source, root / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "pyproject.toml", root / "pyproject.toml")
    return root


def test_every_contract_has_a_violation_here() -> None:
    names = contract_names()
    assert sorted(VIOLATIONS) == sorted(
        next(start for start in VIOLATIONS if name.startswith(start)) for name in names)


def test_the_packages_as_they_are_keep_every_contract(tree: Path) -> None:
    result = lint(tree)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("start", sorted(VIOLATIONS))
def test_a_violation_breaks_its_contract(tree: Path, start: str) -> None:
    relative, line = VIOLATIONS[start]
    path = tree / relative
    original = path.read_text()
    path.write_text(original + f"\n{line}  # deliberate violation\n")
    try:
        result = lint(tree)
    finally:
        path.write_text(original)
    out = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0, out
    name = next(n for n in contract_names() if n.startswith(start))
    assert f"{name} BROKEN" in out, out
