"""Starting a plane, rollgate on the host and a namespace for e2e tests: the session's
plane (tests/e2e/conftest.py) and any other a module needs (a plane with our CRDs only,
one of its own for the faults); the chart tests' tools and the webhook configurations'
caBundles. A failure to start fails the test with the reason: an e2e test never skips."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from harness import chart, crds
from harness.host_rollgate import HostRollgate
from harness.paths import BinaryMissing
from harness.plane import ControlPlane, PlaneError, find_binaries
from testkit import objects


@contextmanager
def plane_with_rollgate(work_dir: Path | None = None, *, webhook: bool = True,
                        tree_crds: bool = True, **options: Any) -> Iterator[HostRollgate]:
    """A started plane (``options`` for ``ControlPlane``, the default CRDs) with rollgate's
    RBAC and, with ``webhook``, its webhook on it; everything stopped afterwards. For the
    benchmarks, which fail with the harness's own errors."""
    plane = ControlPlane(work_dir=work_dir, **options)
    plane.crds = crds.for_plane(tree_crds=tree_crds, say=plane.say)
    try:
        plane.start()
        yield HostRollgate(plane).start(webhook=webhook)
    finally:
        plane.stop()


@contextmanager
def running_plane(work_dir: Path, *, tree_crds: bool = True,
                  **options: Any) -> Iterator[ControlPlane]:
    """A started plane (``options`` for ``ControlPlane``) with the default CRDs
    (``tree_crds=False``: ours over the upstream trees'), always stopped; a failure to
    start fails the test with the reason."""
    try:
        find_binaries()
    except BinaryMissing as err:
        pytest.fail(str(err), pytrace=False)
    plane = ControlPlane(work_dir=work_dir, **options)
    try:
        plane.crds = crds.for_plane(tree_crds=tree_crds, say=plane.say)
        plane.start()
    except PlaneError as err:
        pytest.fail(f"control plane did not start: {err}", pytrace=False)
    try:
        yield plane
    finally:
        plane.stop()


def rollgate_on(plane: ControlPlane, *, webhook: bool = True,
                webhook_args: tuple[str, ...] = ()) -> HostRollgate:
    """rollgate's RBAC (and, with ``webhook``, its webhook, registered) on ``plane``;
    its processes stop with the plane."""
    rollgate = HostRollgate(plane, webhook_args=webhook_args)
    try:
        return rollgate.start(webhook=webhook)
    except PlaneError as err:
        pytest.fail(f"rollgate did not start on the plane: {err}", pytrace=False)


@contextmanager
def fresh_namespace(plane: ControlPlane) -> Iterator[str]:
    """A fresh namespace, deleted afterwards (without waiting for it to go)."""
    name = objects.fresh_name()
    plane.kubectl("create", "namespace", name)
    yield name
    plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


def tool_or_fail() -> None:
    """helm and the chart's CRDs, or the test fails saying how to build them."""
    try:
        chart.helm_binary()
        chart.crd_dirs()
    except chart.ChartToolMissing as err:
        pytest.fail(str(err), pytrace=False)


def ca_bundles(plane: ControlPlane) -> set[str]:
    """Every caBundle of the ``rollgate`` webhook configurations ("" where unset)."""
    bundles = set()
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        config = json.loads(plane.kubectl("get", f"{kind}/rollgate", "-o", "json").stdout)
        bundles |= {w["clientConfig"].get("caBundle", "") for w in config["webhooks"]}
    return bundles
