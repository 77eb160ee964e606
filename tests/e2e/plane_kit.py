"""Starting a control plane and a namespace for e2e tests: the session's plane
(conftest.py) and any other a module needs (test_crds.py's plane with our CRDs only);
the chart tests' tools and the webhook configurations' caBundles."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import chart
import controlplane
import pytest

from certs.generate import CertPaths


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


def tool_or_fail() -> None:
    """helm and the chart's CRDs, or the test fails saying how to build them."""
    try:
        chart.helm_binary()
        chart.crd_dirs()
    except chart.ChartToolMissing as err:
        pytest.fail(str(err), pytrace=False)


def ca_bundles(plane: controlplane.ControlPlane) -> set[str]:
    """Every caBundle of the ``rollgate`` webhook configurations ("" where unset)."""
    bundles = set()
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        config = json.loads(plane.kubectl("get", f"{kind}/rollgate", "-o", "json").stdout)
        bundles |= {w["clientConfig"].get("caBundle", "") for w in config["webhooks"]}
    return bundles


def serve_secret_files(plane: controlplane.ControlPlane, files: dict[str, bytes],
                       directory: Path) -> None:
    """Start the plane's webhook with a TLS Secret's files (``tls.crt``, ``tls.key``,
    ``ca.crt``) written into ``directory``: the webhook serves exactly the certificate
    an installer (a hook Job, cert-manager) put in the cluster."""
    directory.mkdir()
    for name, data in files.items():
        (directory / name).write_bytes(data)
    plane.webhook_certs = CertPaths(out_dir=directory, ca_cert=directory / "ca.crt",
                                    ca_key=directory / "ca.key",
                                    tls_cert=directory / "tls.crt",
                                    tls_key=directory / "tls.key")
    plane.start_webhook()
