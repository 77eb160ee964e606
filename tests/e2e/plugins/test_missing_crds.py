"""A missing CRD holds nothing else (docs/operating.md, "Controllers and missing CRDs").

On the real plane without the RolloutManager CRD (Argo Rollouts from argo-helm's chart
ships none): the reconciler, with both controllers and leader election as the chart runs
it, is Ready, verifies Stages, and says that the plugins controller waits for
``rolloutmanagers.argoproj.io``; once the CRD is created the plugins controller starts,
with no restart, and reconciles a RolloutManager. The CRD is put back as it was (ours,
the operator's, or ``ROLLGATE_CRDS_DIR``'s) for the tests after this one.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from harness.host_rollgate import HostRollgate
from harness.kits.kargo import sample_sum
from harness.plane import ControlPlane
from harness.process import ManagedProcess
from schemas.kinds import API_VERSION_ARGO, GROUP_ARGO
from testkit import objects
from testkit.waits import wait_for

CRD = f"rolloutmanagers.{GROUP_ARGO}"


def served(plane: ControlPlane) -> bool:
    out = plane.kubectl("get", "--raw", f"/apis/{API_VERSION_ARGO}")
    return any(r["name"] == "rolloutmanagers" for r in json.loads(out.stdout)["resources"])


def stored(crd: dict[str, Any]) -> dict[str, Any]:
    """The CRD as it can be created again: its spec, name, labels and annotations."""
    meta = crd["metadata"]
    kept = {k: meta[k] for k in ("name", "labels", "annotations") if k in meta}
    kept.get("annotations", {}).pop("kubectl.kubernetes.io/last-applied-configuration", None)
    return {"apiVersion": crd["apiVersion"], "kind": crd["kind"], "metadata": kept,
            "spec": crd["spec"]}


@pytest.fixture
def without_rollout_managers(control_plane: ControlPlane) -> Iterator[dict[str, Any]]:
    """The plane with the RolloutManager CRD deleted; yields it for re-creation."""
    crd = stored(control_plane.get_json("crd", CRD))
    control_plane.kubectl("delete", "crd", CRD, "--wait=true")
    wait_for("discovery to drop rolloutmanagers", lambda: not served(control_plane))
    try:
        yield crd
    finally:
        if control_plane.kubectl("get", "crd", CRD, check=False).returncode != 0:
            create(control_plane, crd)


def create(plane: ControlPlane, crd: dict[str, Any]) -> None:
    plane.install_crds([crd])


def get(proc: ManagedProcess, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(proc.url + path, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def waiting_gauge(proc: ManagedProcess) -> float:
    return sample_sum(get(proc, "/metrics")[1], "rollgate_reconciler_crd_waiting",
                      controller="rollout-plugins", crd=CRD)


def reconciles(proc: ManagedProcess, controller: str) -> float:
    return sample_sum(get(proc, "/metrics")[1], "rollgate_reconciler_reconcile_total",
                      controller=controller)


def test_the_plugins_controller_waits_for_its_crd_and_starts_when_it_appears(
        control_plane: ControlPlane, rollgate: HostRollgate, namespace: str,
        without_rollout_managers: dict[str, Any]) -> None:
    started = time.monotonic()
    proc = rollgate.start_reconciler("--namespaces", namespace, name="reconciler-crds")
    try:
        proc.wait_ready(60)
        # Ready as a standby at once; then as the leader, with what it waits for.
        expected = (200, f"ok; waiting for CRDs: rollout-plugins ({CRD})\n")
        wait_for("the leader's readiness", lambda: get(proc, "/readyz") == expected,
                 timeout=60)
        ready_after = time.monotonic() - started
        assert waiting_gauge(proc) == 1
        assert "controller waits for its CRDs" in proc.log_path.read_text()

        # The verification controller runs meanwhile: a Stage is reconciled.
        control_plane.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(
            objects.stage("s", warehouse="w")))
        wait_for("a Stage reconcile", lambda: reconciles(proc, "stage-verification") > 0)

        create(control_plane, without_rollout_managers)
        created = time.monotonic()
        # Ready all along: a controller that waited gates nothing, its caches included.
        readiness = []
        while waiting_gauge(proc) != 0 and time.monotonic() - created < 30:
            readiness.append(get(proc, "/readyz")[0])
        start_after = time.monotonic() - created
        wait_for("its caches", lambda: get(proc, "/readyz") == (200, "ok\n"))
        assert set(readiness) <= {200}, readiness
        control_plane.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(
            objects.k8s_object("RolloutManager", name="rollouts")))
        wait_for("a RolloutManager reconcile",
                 lambda: reconciles(proc, "rollout-plugins") > 0)
        assert proc.alive()
        assert "CRDs served, starting the controller" in proc.log_path.read_text()
        print(f"Ready {ready_after:.1f} s after start without the CRD; the plugins "
              f"controller started {start_after:.1f} s after the CRD was Established")
    finally:
        control_plane.stop_process(proc)
