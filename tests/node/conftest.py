"""Fixtures for the tests on the node: rollgate as users run it, from its image, installed
by its chart, in pods on a real kubelet (harness.node).

One node per session, started on first use and stopped at the end: the host is compared
with what it was before (harness.node.restore). The node's tests run after every other
suite (they hold the machine's one node, and its pods should not share the two cores
with the other suites). The host tests (test_host.py) start nodes of their own, so they
run first, before the session's node exists. The install from the registry
(test_install_from_registry.py) runs next, on the session's node before rollgate's image
was ever imported into it (``bare_node``), so the kubelet has to pull it; every later
test gets the node with the image imported (``node``). A node that cannot start fails the tests
with the reason (kubelet's last log lines, the command that builds what is missing): a
node test never skips itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness import crds, registry
from harness.kits.plane import namespaces_left
from harness.node.cluster import NodeCluster
from harness.node.lock import NodeBusy
from harness.paths import BinaryMissing
from harness.plane import PlaneError, find_binaries
from testkit import objects

HERE = Path(__file__).parent
FIRST = (HERE / "test_host.py", HERE / "test_install_from_registry.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Node tests last (the host tests, then the install from the registry, first among
    them), in their files' order."""
    ours = [i for i in items if HERE in Path(i.fspath).parents]
    others = [i for i in items if i not in ours]
    first = [i for path in FIRST for i in ours if Path(i.fspath) == path]
    items[:] = others + first + [i for i in ours if i not in first]
    for item in ours:
        item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def bare_node() -> Iterator[NodeCluster]:
    """The session's node, started without rollgate's image in containerd."""
    try:
        find_binaries(scheduler=True)
        registry.binary("registry")
    except BinaryMissing as err:
        pytest.fail(str(err), pytrace=False)
    cluster = NodeCluster(crds=crds.for_plane(), verbose=True, import_rollgate=False)
    try:
        cluster.start()
    except (PlaneError, NodeBusy) as err:
        pytest.fail(f"the node did not start: {err}", pytrace=False)
    try:
        yield cluster
        left = namespaces_left(cluster.plane)
        assert not left, f"namespaces the tests deleted still Terminating: {left}"
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def node(bare_node: NodeCluster) -> NodeCluster:
    """The session's node with rollgate's image imported (pods use it, never pulled)."""
    bare_node.import_image(bare_node.images.rollgate)
    return bare_node


@pytest.fixture
def namespace(node: NodeCluster) -> Iterator[str]:
    """A fresh namespace per test for the objects a user applies."""
    name = objects.fresh_name()
    node.plane.kubectl("create", "namespace", name)
    yield name
    node.plane.kubectl("delete", "namespace", name, "--wait=false", check=False)
