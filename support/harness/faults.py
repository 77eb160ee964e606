"""Faults injected into a running plane, for the fault suites and benchmarks: what
clients see when their API server or its etcd goes away and comes back at the same
address, and when their watch's history is gone (410 Gone)."""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from typing import Any, cast

from harness.plane import ControlPlane


def restart(plane: ControlPlane, name: str, *, downtime: float = 0.0,
            timeout: float = 60.0) -> float:
    """SIGKILL one of the plane's processes (``etcd``, ``kube-apiserver``, ...), wait
    ``downtime`` seconds, start it again with the same flags (same port, same data),
    and wait until it is ready. Returns the seconds from the new start to ready."""
    old = plane.process(name)
    old.kill(signal.SIGKILL)
    if downtime > 0:
        time.sleep(downtime)
    new = old.respawn()
    plane.replace(old, new)
    started = time.monotonic()
    new.wait_ready(timeout)
    return time.monotonic() - started


def compact_etcd(plane: ControlPlane) -> int:
    """Compact etcd's history up to its current revision (through etcd's HTTP
    gateway; no etcdctl needed) and return that revision: a watch from an older
    resourceVersion then gets 410 Gone once the API server's watch cache no longer
    holds it (after an API server restart, at the latest)."""
    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        request = urllib.request.Request(
            plane.etcd_url + path, data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=10) as resp:
            return cast("dict[str, Any]", json.loads(resp.read()))

    revision = int(post("/v3/kv/range", {"key": "Lw=="})["header"]["revision"])
    post("/v3/kv/compaction", {"revision": str(revision), "physical": True})
    return revision
