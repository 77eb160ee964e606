"""``make test``'s two streams (hack/test.sh, docs/development.md "Test time"): the node's
suites in the background, lint, test-minimums and the other suites in front, the node's
log shown after; the exit status fails when either stream failed, so CI cannot pass a
failed node test. Run with stand-ins for the interpreter and make that say what they
were asked to run and exit as told."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from testkit.paths import REPO_ROOT

STAND_IN = """#!/usr/bin/env bash
# $1: what this stands in for; the rest: its arguments.
what="$1"; shift
echo "$what ran: $*"
case "$what $*" in
  *"pytest tests/node"*) exit "${NODE_RC:-0}" ;;
  "make "*lint*) exit "${LINT_RC:-0}" ;;
  *pytest*) exit "${REST_RC:-0}" ;;
esac
"""


def run(tmp_path: Path, **rcs: int) -> subprocess.CompletedProcess[str]:
    """hack/test.sh in a copy of hack/ under ``tmp_path`` with ``-x`` for pytest, the
    stand-ins exiting with ``rcs`` (NODE_RC, REST_RC, LINT_RC)."""
    (tmp_path / "hack").mkdir(exist_ok=True)
    shutil.copy(REPO_ROOT / "hack" / "test.sh", tmp_path / "hack" / "test.sh")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stand_in = bin_dir / "stand-in"
    stand_in.write_text(STAND_IN)
    stand_in.chmod(0o755)
    (bin_dir / "make").write_text(f'#!/usr/bin/env bash\nexec {stand_in} make "$@"\n')
    (bin_dir / "python").write_text(f'#!/usr/bin/env bash\nexec {stand_in} python "$@"\n')
    for name in ("make", "python"):
        (bin_dir / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PY": str(bin_dir / "python"),
           **{key: str(value) for key, value in rcs.items()}}
    return subprocess.run(["bash", str(tmp_path / "hack" / "test.sh"), "-x"], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60, check=False)


def test_both_streams_run_with_the_arguments_and_pass(tmp_path: Path) -> None:
    out = run(tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "make ran: --no-print-directory lint" in out.stdout
    assert "make ran: --no-print-directory test-minimums PYTEST_ARGS=-x" in out.stdout
    assert "python ran: -m pytest --ignore=tests/node -x" in out.stdout
    # The node's log, shown after the other suites.
    node = out.stdout.index("python ran: -m pytest tests/node -x")
    assert node > out.stdout.index("python ran: -m pytest --ignore=tests/node -x")
    assert (tmp_path / ".test-logs" / "node.log").read_text() == \
        "python ran: -m pytest tests/node -x\n"


@pytest.mark.parametrize(("rcs", "said"), [
    ({"NODE_RC": 1}, "the other suites exited 0; the node's suites 1"),
    ({"REST_RC": 1}, "the other suites exited 1; the node's suites 0"),
])
def test_a_failed_stream_fails_make_test(tmp_path: Path, rcs: dict[str, int], said: str) -> None:
    out = run(tmp_path, **rcs)
    assert out.returncode != 0
    assert said in out.stdout


def test_a_lint_failure_skips_the_other_suites_and_still_waits_for_the_node(
        tmp_path: Path) -> None:
    out = run(tmp_path, LINT_RC=2)
    assert out.returncode != 0
    assert "test-minimums" not in out.stdout and "--ignore=tests/node" not in out.stdout
    assert "python ran: -m pytest tests/node -x" in out.stdout
    assert "the other suites exited 2; the node's suites 0" in out.stdout
