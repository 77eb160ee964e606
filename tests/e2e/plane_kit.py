"""Starting a control plane and a namespace for e2e tests: the session's plane
(conftest.py) and any other a module needs (test_crds.py's plane with our CRDs only)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import controlplane
import pytest


@contextmanager
def running_plane(work_dir: Path, **options: Any) -> Iterator[controlplane.ControlPlane]:
    """A started plane (``options`` for ``ControlPlane``), always stopped; a failure to
    start fails the test with the reason."""
    try:
        controlplane.find_binaries()
    except controlplane.BinariesMissing as err:
        pytest.fail(str(err), pytrace=False)
    plane = controlplane.ControlPlane(work_dir=work_dir, **options)
    try:
        plane.start()
    except controlplane.ControlPlaneError as err:
        pytest.fail(f"control plane did not start: {err}", pytrace=False)
    try:
        yield plane
    finally:
        plane.stop()


@contextmanager
def fresh_namespace(plane: controlplane.ControlPlane) -> Iterator[str]:
    """A fresh namespace, deleted afterwards (without waiting for it to go)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    plane.kubectl("create", "namespace", name)
    yield name
    plane.kubectl("delete", "namespace", name, "--wait=false", check=False)
