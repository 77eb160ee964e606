"""The cluster shapes users run rollgate in, on the session's node (docs/install.md,
"Which cluster you have"): which upstream CRDs are served, and what a user reads of
rollgate's pods in each (the leader's metrics and readiness, ``helm test``'s lines).

The shapes differ in the CRDs the API server serves: Kargo's nine, Argo Rollouts'
(AnalysisTemplates, ClusterAnalysisTemplates, AnalysisRuns, Rollouts, Experiments) and
argo-rollouts-manager's RolloutManager. :class:`ServedCrds` removes and restores them as
the plane had them (ours, the upstream trees' or ``ROLLGATE_CRDS_DIR``'s).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from harness import crds
from harness.kits.node import NAMESPACE, RECONCILER, pods
from harness.plane import ControlPlane
from schemas.kinds import GROUP_ARGO, GROUP_KARGO
from testkit.waits import wait_for

ROLLOUT_MANAGERS = f"rolloutmanagers.{GROUP_ARGO}"
LEASE = "rollgate-reconciler"
METRICS_PORT = 8080


def kargo_crds(names: Iterable[str]) -> list[str]:
    return sorted(n for n in names if n.endswith("." + GROUP_KARGO))


UPSTREAM_GROUPS = (GROUP_KARGO, GROUP_ARGO)


@dataclass
class ServedCrds:
    """The plane's CRDs as they were when made (``snapshot``); ``remove`` deletes some
    (waiting until the API server no longer serves them), ``restore`` creates them
    again as they were."""

    plane: ControlPlane
    snapshot: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.snapshot = {c["metadata"]["name"]: crds.applyable(c)
                         for c in self.plane.get_json("crd")["items"]}

    def names(self) -> set[str]:
        return {c["metadata"]["name"] for c in self.plane.get_json("crd")["items"]}

    def upstream(self) -> list[str]:
        """The snapshot's CRDs of Kargo, Argo Rollouts and argo-rollouts-manager."""
        return sorted(n for n in self.snapshot if n.endswith(UPSTREAM_GROUPS))

    def remove(self, names: Iterable[str]) -> None:
        present = sorted(set(names) & self.names())
        if present:
            self.plane.kubectl("delete", "crd", *present, "--wait=true", timeout=240)

    def replace(self, found: list[dict[str, Any]]) -> None:
        """Served CRDs replaced by ``found`` (an upgrade's), waited for."""
        for crd in found:
            served = self.plane.get_json("crd", crd["metadata"]["name"])
            body = {**crd, "metadata": {**crd["metadata"], "resourceVersion":
                                        served["metadata"]["resourceVersion"]}}
            self.plane.kubectl("replace", "-f", "-", input=json.dumps(body))
        self.plane.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                           *(f"crd/{c['metadata']['name']}" for c in found))

    def restore(self, names: Iterable[str]) -> None:
        missing = [self.snapshot[n] for n in sorted(set(names) - self.names())
                   if n in self.snapshot]
        if not missing:
            return
        self.plane.install_crds(missing)


# --------------------------------------------------------------------------- pods


def pod_get(plane: ControlPlane, pod: str, path: str, *,
            namespace: str = NAMESPACE, port: int = METRICS_PORT) -> tuple[bool, str]:
    """GET ``path`` of a pod's port through the API server's pod proxy, as ``kubectl
    get --raw`` does: (answered with 2xx, body)."""
    out = plane.kubectl("get", "--raw",
                        f"/api/v1/namespaces/{namespace}/pods/{pod}:{port}/proxy{path}",
                        check=False)
    return out.returncode == 0, out.stdout if out.returncode == 0 else out.stderr


def leader(plane: ControlPlane) -> str:
    """The reconciler pod that holds the Lease (its identity is ``<pod>_<pid>``)."""
    def holder() -> str | None:
        lease = plane.kubectl("get", "lease", LEASE, "-n", NAMESPACE, "-o", "json",
                              check=False)
        if lease.returncode != 0:
            return None
        identity = json.loads(lease.stdout)["spec"].get("holderIdentity") or ""
        names = {p["metadata"]["name"] for p in pods(plane, NAMESPACE, RECONCILER)
                 if not p["metadata"].get("deletionTimestamp")}
        pod = identity.rsplit("_", 1)[0]
        return pod if pod in names else None

    return wait_for("a reconciler pod to hold the Lease", holder, timeout=120)


def leader_metric(plane: ControlPlane, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` with ``labels`` on the leader's /metrics."""
    ok, text = pod_get(plane, leader(plane), "/metrics")
    if not ok:
        return 0.0
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + "{")
               and all(f'{k}="{v}"' in line for k, v in labels.items()))


def leader_readiness(plane: ControlPlane) -> str:
    """The leader's /readyz body: ``ok``, and what waits for which CRD."""
    return pod_get(plane, leader(plane), "/readyz")[1].strip()


def reconciler_logs(plane: ControlPlane) -> str:
    """Every reconciler pod's log (a pod's JSON lines)."""
    return "\n".join(plane.kubectl("logs", "-n", NAMESPACE, p["metadata"]["name"],
                                   check=False).stdout
                     for p in pods(plane, NAMESPACE, RECONCILER))


# --------------------------------------------------------------------------- helm test

_VERDICT = re.compile(r"^(PASS|FAIL|SKIP) (.*?)(?::| by |$)", re.MULTILINE)


def selftest_verdicts(output: str) -> dict[str, str]:
    """``helm test``'s selftest lines (Helm prints the pod's log): check title ->
    PASS, FAIL or SKIP."""
    return {m.group(2).strip(): m.group(1) for m in _VERDICT.finditer(output)}


STAGE_CHECKS = ("an invalid Stage is denied", "a valid Stage is allowed")
ROLLOUT_MANAGER_CHECK = "an invalid RolloutManager is denied"
