"""What rollgate's pods use, as the kubelet reports it (its summary API, through the API
server's node proxy): each container's cumulative CPU time and memory working set.

CPU is taken as the difference of ``usageCoreNanoSeconds`` between two reads over the
time between them (the kubelet's own ``usageNanoCores`` is a rate over whatever window
its last housekeeping had); memory as the working set, what the kubelet evicts and the
kernel OOM-kills by.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import statistics
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.plane import ControlPlane


@dataclass(frozen=True, slots=True)
class Reading:
    """One container's counters at one moment."""

    at: float  # seconds since the epoch, the kubelet's timestamp of the CPU figure
    cpu_core_ns: int
    working_set_bytes: int


def _seconds(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def readings(summary: Mapping[str, Any], namespace: str) -> dict[str, Reading]:
    """``pod/container`` → its reading, for the pods of ``namespace`` (pure)."""
    out: dict[str, Reading] = {}
    for pod in summary.get("pods", []):
        ref = pod.get("podRef", {})
        if ref.get("namespace") != namespace:
            continue
        for container in pod.get("containers", []):
            cpu, memory = container.get("cpu") or {}, container.get("memory") or {}
            if "usageCoreNanoSeconds" not in cpu or "workingSetBytes" not in memory:
                continue  # not measured yet (a container that just started)
            out[f"{ref['name']}/{container['name']}"] = Reading(
                at=_seconds(cpu["time"]), cpu_core_ns=int(cpu["usageCoreNanoSeconds"]),
                working_set_bytes=int(memory["workingSetBytes"]))
    return out


def read(plane: ControlPlane, node: str, namespace: str) -> dict[str, Reading]:
    raw = plane.kubectl("get", "--raw", f"/api/v1/nodes/{node}/proxy/stats/summary").stdout
    return readings(json.loads(raw), namespace)


@dataclass(frozen=True, slots=True)
class Usage:
    """One container over a window: CPU in millicores between consecutive reads, memory
    working set in MiB at each read."""

    cpu_millicores: list[float]
    memory_mib: list[float]

    def figures(self) -> dict[str, float | None]:
        def median(values: list[float]) -> float | None:
            return round(statistics.median(values), 1) if values else None

        return {"cpu_m_median": median(self.cpu_millicores),
                "cpu_m_max": round(max(self.cpu_millicores), 1) if self.cpu_millicores else None,
                "memory_mib_median": median(self.memory_mib),
                "memory_mib_max": round(max(self.memory_mib), 1) if self.memory_mib else None}


def usage(series: list[dict[str, Reading]]) -> dict[str, Usage]:
    """Per container, from reads taken in turn (pure). A pair of reads with the same
    kubelet timestamp (its stats not refreshed in between) gives no CPU figure."""
    out: dict[str, Usage] = {}
    names = sorted({name for snapshot in series for name in snapshot})
    for name in names:
        seen = [snapshot[name] for snapshot in series if name in snapshot]
        cpu = [(b.cpu_core_ns - a.cpu_core_ns) / (b.at - a.at) / 1e6
               for a, b in itertools.pairwise(seen) if b.at > a.at]
        out[name] = Usage(cpu_millicores=cpu,
                          memory_mib=[r.working_set_bytes / 2**20 for r in seen])
    return out
