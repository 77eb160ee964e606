"""The node leaves the host as it found it, also after a killed run, and one machine
runs one node: a second start fails at once naming the holder's PID.

The host is compared as ``harness.node.hoststate`` records it: kernel tunables, links,
mounts, cgroups, the iptables and nftables rulesets, and the paths outside the node's
directory that kubelet, containerd, CNI and buildah write. These tests run before the
session's node exists (tests/node/conftest.py), each with nodes of its own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from harness import crds
from harness.node import hoststate
from harness.node.cluster import NodeCluster
from harness.node.lock import NodeBusy


@contextmanager
def node_process(*args: str) -> Iterator[subprocess.Popen[str]]:
    """``python -m harness.node ARGS`` as a process of its own, up (its kubeconfig line
    printed); killed afterwards if still running."""
    proc = subprocess.Popen([sys.executable, "-m", "harness.node", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen: list[str] = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            seen.append(line)
            if line.startswith("export KUBECONFIG="):
                break
        else:
            pytest.fail("the node process did not come up:\n" + "".join(seen))
        assert seen and seen[-1].startswith("export KUBECONFIG="), "".join(seen)
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=120)


def test_a_stopped_node_leaves_the_host_as_it_was() -> None:
    node = NodeCluster(crds=crds.for_plane())
    earlier_run = node.settings.baseline_file.is_file()
    before = hoststate.capture()
    node.start()
    try:
        # The host as the node found it. A run killed before this session (a `make dev`
        # ended by SIGKILL) left its record, and the start undid that run first: then the
        # host before the start is not the one to come back to.
        found = node.baseline
        if not earlier_run:
            assert hoststate.differences(before, found) == []
        assert hoststate.differences(found, hoststate.capture()), "the node changed nothing?"
        # The node's registry answers on the bridge address, to credentials only.
        assert (node.registry.status("/v2/"), node.registry.status("/v2/", auth=False)) == (
            200, 401)
    finally:
        node.stop()
    assert hoststate.differences(found, hoststate.capture()) == []
    # Its data went with the node; its log stays with the others.
    assert not node.registry.directory.exists()
    assert (node.plane.logs_dir / "registry.log").is_file()


def test_a_second_node_fails_at_once_naming_the_holder() -> None:
    with node_process() as holder:
        started = time.monotonic()
        with pytest.raises(NodeBusy, match=rf"a node is already running \(PID {holder.pid}\)"):
            NodeCluster().start()
        assert time.monotonic() - started < 5
        holder.send_signal(signal.SIGTERM)
        assert holder.wait(timeout=120) == 0


def test_the_next_start_undoes_a_killed_run() -> None:
    """SIGKILL leaves containerd's shims, a pod, its network namespace and veth, mounts,
    the bridge, kubelet's chains, cgroups and tunables behind; the next node's start
    undoes all of it (by the host state the killed run recorded), and its stop leaves
    the host as it was before the killed run."""
    before = hoststate.capture()
    with node_process("--pod", "left-behind") as victim:
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
    left = hoststate.differences(before, hoststate.capture())
    assert left, "a killed node left nothing behind?"
    node = NodeCluster(crds=crds.for_plane())
    node.start()
    node.stop()
    assert hoststate.differences(before, hoststate.capture()) == []
