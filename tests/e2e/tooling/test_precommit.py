"""``rollgate validate`` as a pre-commit hook (docs/validate.md "As a pre-commit hook"), run by
pre-commit itself: a user's GitOps repository whose ``.pre-commit-config.yaml`` points
at a commit of this repository (a snapshot of the working tree, so the hook tested is
the one in this checkout). pre-commit installs it with pip into its own environment,
as it would from GitHub."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from testkit.paths import REPO_ROOT

PRE_COMMIT = Path(sys.executable).with_name("pre-commit")
VALID = ["analysistemplate.yaml", "stage-test.yaml", "stage-uat.yaml", "rolloutmanager.yaml",
         "freight.yaml"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          check=True, env=ENV).stdout.strip()


ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
       "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
       "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """This checkout's files (tracked and new, not ignored) committed in a repository
    of their own; (its path, the commit)."""
    root = tmp_path_factory.mktemp("hook-repo")
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO_ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for relative in filter(None, listed):
        source = REPO_ROOT / relative
        if source.is_file():
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / relative)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-qm", "snapshot")
    return root, git(root, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def gitops(tmp_path_factory: pytest.TempPathFactory, hook_repo: tuple[Path, str]) -> Path:
    """A user's GitOps repository with the hook installed (``pre-commit install``)."""
    repo = tmp_path_factory.mktemp("gitops")
    git(repo, "init", "-q")
    path, rev = hook_repo
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [{
        "repo": str(path), "rev": rev, "hooks": [{"id": "rollgate-validate"}]}]}))
    (repo / "deploy").mkdir()
    for name in VALID:
        shutil.copy(REPO_ROOT / "examples" / name, repo / "deploy" / name)
    run(repo, "install")
    return repo


def run(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**ENV, "PRE_COMMIT_HOME": str(repo.parent / f"{repo.name}-pre-commit-home")}
    return subprocess.run([str(PRE_COMMIT), *args], cwd=repo, capture_output=True, text=True,
                          env=env, timeout=900, check=False)


def commit(repo: Path, message: str) -> subprocess.CompletedProcess[str]:
    env = {**ENV, "PRE_COMMIT_HOME": str(repo.parent / f"{repo.name}-pre-commit-home"),
           "PATH": f"{PRE_COMMIT.parent}{os.pathsep}{ENV.get('PATH', '')}"}
    return subprocess.run(["git", "commit", "-m", message], cwd=repo, capture_output=True,
                          text=True, env=env, timeout=900, check=False)


def test_the_hook_passes_the_valid_examples_and_refuses_the_invalid_stage(gitops: Path):
    git(gitops, "add", "-A")
    clean = commit(gitops, "valid manifests")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert "rollgate validate" in clean.stdout + clean.stderr
    assert "Passed" in clean.stdout + clean.stderr

    shutil.copy(REPO_ROOT / "examples" / "invalid" / "stage.yaml",
                gitops / "deploy" / "broken.yaml")
    git(gitops, "add", "deploy/broken.yaml")
    refused = commit(gitops, "a broken Stage")

    out = refused.stdout + refused.stderr
    assert refused.returncode != 0, out
    assert "Failed" in out, out
    assert ("deploy/broken.yaml: Stage/broken: spec.verification.args[1].name: duplicate "
            'arg name "service-name"') in out, out
    assert "7 errors" in out, out
    # Nothing was committed: the last commit is still the valid one.
    assert git(gitops, "log", "-1", "--format=%s") == "valid manifests"


def test_pre_commit_run_checks_only_the_files_it_is_given(gitops: Path):
    assert run(gitops, "run", "--files", "deploy/stage-test.yaml").returncode == 0
    shutil.copy(REPO_ROOT / "examples" / "invalid" / "stage.yaml",
                gitops / "deploy" / "broken.yaml")
    result = run(gitops, "run", "--files", "deploy/broken.yaml")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "checked 1 Stage and 0 RolloutManagers in 1 file: 7 errors" in result.stdout
