"""``make dev`` shows every feature working (docs/development.md, "Quick start"): what it
sets up on a node (``harness.dev.node.setup``, here on the session's node), no pod of it
failing, and every step its banner prints run as printed, in order, in a shell with the
exports the banner gives: denials denied, everything else succeeding.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harness.dev import node as dev_node
from harness.dev.demo import Step
from harness.node.cluster import NodeCluster
from testkit.paths import REPO_ROOT

# A step a user would run again after a moment (a counter that is scraped, a roll that
# has just begun) gets that long to show what it says.
PATIENCE = 60.0


@pytest.fixture(scope="module")
def demo(node: NodeCluster) -> Iterator[dev_node.NodeDemo]:
    made = dev_node.setup(node, engine=False)
    try:
        yield made
    finally:
        made.close()


def failing_pods(node: NodeCluster) -> list[str]:
    """Pods of any namespace that are not Running or Succeeded, or whose containers
    restarted or wait (ErrImagePull, CrashLoopBackOff...): what ``kubectl get pods -A``
    shows a user as trouble."""
    items: list[dict[str, Any]] = node.plane.get_json("pods", "-A")["items"]
    trouble = []
    for pod in items:
        status = pod.get("status", {})
        containers = status.get("containerStatuses") or []
        waiting = [c["state"]["waiting"].get("reason") for c in containers
                   if "waiting" in c.get("state", {})]
        if status.get("phase") not in ("Running", "Succeeded") or waiting or any(
                c.get("restartCount", 0) for c in containers):
            trouble.append(f"{pod['metadata']['namespace']}/{pod['metadata']['name']}: "
                           f"{status.get('phase')} {waiting}")
    return trouble


def shell(node: NodeCluster) -> dict[str, str]:
    """The environment after the banner's exports (and the venv's activation)."""
    plane = node.plane
    return {**os.environ, "KUBECONFIG": str(plane.kubeconfig),
            "PATH": f"{plane.binaries.kubectl.parent}:{REPO_ROOT / '.venv' / 'bin'}:"
                    f"{os.environ['PATH']}"}


def run(step: Step, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``step`` as a user runs it, again for a while when it does not yet show what it
    says."""
    deadline = time.monotonic() + PATIENCE
    while True:
        out = subprocess.run(["bash", "-o", "pipefail", "-c", step.command], cwd=REPO_ROOT,
                             env=env, capture_output=True, text=True, timeout=240,
                             check=False)
        if (out.returncode != 0) == step.denied or time.monotonic() > deadline:
            return out
        time.sleep(2)


def test_no_pod_of_make_dev_fails(node: NodeCluster, demo: dev_node.NodeDemo) -> None:
    assert failing_pods(node) == []


def test_every_step_of_the_banner_does_what_it_says(node: NodeCluster,
                                                     demo: dev_node.NodeDemo) -> None:
    banner = demo.banner()
    env = shell(node)
    for step in demo.steps():
        assert step.line() in banner
        out = run(step, env)
        shown = f"$ {step.command}\n{out.stdout[-2000:]}{out.stderr[-2000:]}"
        if step.denied:
            assert out.returncode != 0, shown
            assert "admission webhook" in out.stderr and "rollgate.dev" in out.stderr, shown
        else:
            assert out.returncode == 0, shown
    assert failing_pods(node) == []
