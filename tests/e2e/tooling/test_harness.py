"""The control-plane harness leaves no process behind, however it is stopped.

A test run that fails, a Ctrl-C in `make dev`, or CI killing the job must not leave
etcd, kube-apiserver, kube-controller-manager or the webhook's gunicorn running: the
next run would find ports taken and the machine loaded. Each case starts the harness
as its own process (as `make dev` does), finds every process whose command line names
its work directory, stops the harness the given way, and checks they are all gone.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testkit.paths import REPO_ROOT

EXPECTED = ("etcd", "kube-apiserver", "kube-controller-manager", "-m webhook")


def _processes_naming(needle: str) -> dict[int, str]:
    """pid -> command line of every live process whose command line contains needle."""
    found: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = next(
                (line for line in (entry / "status").read_text().splitlines()
                 if line.startswith("State:")), "",
            )
        except OSError:
            continue  # exited while we looked
        if needle in cmdline and "zombie" not in state:
            found[int(entry.name)] = cmdline
    return found


def _wait_for_line(proc: subprocess.Popen[str], prefix: str, deadline: float) -> list[str]:
    """The lines the harness printed up to the one starting with ``prefix``."""
    assert proc.stdout is not None
    seen: list[str] = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if line.startswith(prefix):
            return seen
    pytest.fail(f"the harness did not print {prefix!r} (exit code {proc.poll()}):\n"
                + "".join(seen))


@pytest.mark.parametrize("how", ["SIGINT", "SIGTERM", "SIGKILL"])
def test_stopping_the_harness_leaves_no_process(how: str, tmp_path: Path) -> None:
    work_dir = tmp_path / "plane"
    proc = subprocess.Popen(
        [sys.executable, "-m", "harness", "--work-dir", str(work_dir)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    try:
        printed = _wait_for_line(proc, "export KUBECONFIG=", time.monotonic() + 180)
        # Its webhook probes are objects the installed CRDs accept (ours, or those of
        # ROLLGATE_CRDS_DIR), so the start never waits them out and warns.
        assert not [line for line in printed if "webhooks not in the expected state" in line], (
            "".join(printed))
        started = _processes_naming(str(work_dir))
        for name in EXPECTED:
            assert any(name in cmd for cmd in started.values()), (
                f"no {name} process was found running for the harness: {started}"
            )
        # gunicorn's workers count too: the webhook is a master plus its workers.
        assert sum("-m webhook" in cmd for cmd in started.values()) >= 2

        proc.send_signal(getattr(signal, how))
        deadline = time.monotonic() + 60
        left = _processes_naming(str(work_dir))
        while left and time.monotonic() < deadline:
            time.sleep(0.5)
            left = _processes_naming(str(work_dir))
        assert not left, f"still running after {how} to the harness: {left}"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        if proc.stdout is not None:
            proc.stdout.close()
        for pid in _processes_naming(str(work_dir)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

