"""Starting a plane, rollgate on the host and a namespace for e2e tests: the session's
plane (tests/e2e/conftest.py) and any other a module needs (a plane with our CRDs only,
one of its own for the faults); the chart tests' tools and the webhook configurations'
caBundles. What cannot start raises the harness's error saying why (``PlaneError``,
``chart.ChartToolMissing``), which fails the test: an e2e test never skips, and no kit
imports pytest."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness import chart, crds
from harness.host_rollgate import HostRollgate
from harness.plane import ControlPlane
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
    (``tree_crds=False``: ours over the upstream trees'), always stopped; ``PlaneError``
    says why one did not start (a missing binary too)."""
    plane = ControlPlane(work_dir=work_dir, **options)
    plane.crds = crds.for_plane(tree_crds=tree_crds, say=plane.say)
    plane.start()  # stops what it started when it fails
    try:
        yield plane
    finally:
        plane.stop()


def rollgate_on(plane: ControlPlane, *, webhook: bool = True,
                webhook_args: tuple[str, ...] = ()) -> HostRollgate:
    """rollgate's RBAC (and, with ``webhook``, its webhook, registered) on ``plane``;
    its processes stop with the plane (``PlaneError`` when they do not start)."""
    return HostRollgate(plane, webhook_args=webhook_args).start(webhook=webhook)


@contextmanager
def fresh_namespace(plane: ControlPlane) -> Iterator[str]:
    """A fresh namespace, deleted afterwards (without waiting for it to go: the session
    waits once for all of them, ``namespaces_left``)."""
    name = objects.fresh_name()
    plane.kubectl("create", "namespace", name)
    yield name
    plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


def terminating(plane: ControlPlane) -> dict[str, str]:
    """Each namespace being deleted, with what its status says still holds it."""
    return {ns["metadata"]["name"]: "; ".join(
        c.get("message", "") for c in (ns.get("status") or {}).get("conditions") or []
        if c.get("status") == "True") or "no condition yet"
        for ns in plane.get_json("namespaces")["items"]
        if ns["metadata"].get("deletionTimestamp")}


def namespaces_left(plane: ControlPlane, *, timeout: float = 120) -> dict[str, str]:
    """Until no namespace is Terminating; those still Terminating after ``timeout`` (a
    finalizer nothing removes: a controller stopped before the objects it finalizes were
    deleted), each with what holds it. Tests delete their namespaces without waiting;
    the session's end waits for them once, so none outlives the session unnoticed."""
    deadline = time.monotonic() + timeout
    while (left := terminating(plane)) and time.monotonic() < deadline:
        time.sleep(1)
    return left


def tool_or_fail() -> None:
    """helm and the chart's CRDs are built, or ``chart.ChartToolMissing`` fails the test
    saying how to build them."""
    chart.helm_binary()
    chart.crd_dirs()


def ca_bundles(plane: ControlPlane) -> set[str]:
    """Every caBundle of the ``rollgate`` webhook configurations ("" where unset)."""
    bundles = set()
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        config = json.loads(plane.kubectl("get", f"{kind}/rollgate", "-o", "json").stdout)
        bundles |= {w["clientConfig"].get("caBundle", "") for w in config["webhooks"]}
    return bundles
