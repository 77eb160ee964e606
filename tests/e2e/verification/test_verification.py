"""Stage verification in engine mode on a real control plane, with the real Argo
Rollouts controller executing the runs rollgate creates.

The reconciler runs as ``python -m reconciler --stage-verification=engine`` under the
ServiceAccount and RBAC from ``manifests/`` (the dev overlay adds engine RBAC). The
test plays only Kargo's promotion (support/testkit/kargo_shapes.py: the exact status shapes Kargo
writes). Every run phase comes from the real controller asking an HTTP server the
test runs on 127.0.0.1 (a ``web`` metric): Successful, Failed, Inconclusive, Error.

Waits poll the API up to a generous deadline; nothing asserts how fast something
happens (bench/verification.py measures that).
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

from harness.host_rollgate import HostRollgate
from harness.kits.verification import Cluster, MetricServer, verdict_template
from harness.plane import ControlPlane
from harness.process import ManagedProcess
from reconciler.verification.naming import freight_collection_id
from schemas.constants import (
    ANNOTATION_ABORT,
    ANNOTATION_REVERIFY,
    LABEL_FREIGHT_COLLECTION,
    LABEL_STAGE,
)
from testkit import kargo_shapes, objects
from testkit.waits import wait_for

# What rollgate may write into a Stage's status: Kargo's own fields only.
KARGO_STATUS_FIELDS = {"freightHistory", "lastPromotion", "health", "conditions",
                       "currentPromotion"}
ENTRY_FIELDS = {"id", "actor", "startTime", "phase", "message", "analysisRun", "finishTime"}


def start_reconciler(rollgate: HostRollgate, namespace: str, *extra: str,
                     name: str = "reconciler-verification") -> ManagedProcess:
    proc = rollgate.start_reconciler(
        "--controllers", "stage-verification", "--stage-verification", "engine",
        "--namespaces", namespace, *extra, name=name,
    )
    proc.wait_ready(60)
    return proc


@pytest.fixture
def reconciler(control_plane: ControlPlane,
               namespace: str, rollgate: HostRollgate) -> Iterator[ManagedProcess]:
    proc = start_reconciler(rollgate, namespace, "--no-leader-elect")
    yield proc
    control_plane.stop_process(proc)


def only_kargo_fields(cluster: Cluster, stage: str) -> None:
    """`kubectl get stage -o yaml` shows Kargo's fields and no others of ours."""
    status = (cluster.get("stage", stage) or {})["status"]
    assert set(status) <= KARGO_STATUS_FIELDS, set(status) - KARGO_STATUS_FIELDS
    for collection in status["freightHistory"]:
        for entry in collection.get("verificationHistory") or []:
            assert set(entry) <= ENTRY_FIELDS, entry
            assert entry["actor"] == "rollgate"


# --------------------------------------------------------------------------- outcomes


def test_success_marks_freight_verified_and_then_nothing_is_written(
        cluster: Cluster, reconciler: Any, metrics: MetricServer) -> None:
    cluster.stage("prod", labels={"team": "shop"})
    cluster.promote("prod", "f1")
    entry = cluster.wait_latest("prod", "Successful")
    cid = freight_collection_id(["f1"])
    assert entry["id"] == f"prod.{cid[:7]}.1"
    assert entry["analysisRun"] == {"name": entry["id"], "namespace": cluster.ns,
                                    "phase": "Successful"}
    assert entry["startTime"] and entry["finishTime"]
    wait_for("verifiedIn", lambda: "prod" in cluster.verified_in("f1"))
    cond = cluster.condition("prod")
    assert (cond["status"], cond["reason"]) == ("True", "Verified")
    stage = cluster.get("stage", "prod") or {}
    assert cond["observedGeneration"] == stage["metadata"]["generation"]
    only_kargo_fields(cluster, "prod")
    # The run: exactly one, the real controller ran it against our server.
    runs = cluster.runs("prod")
    assert [r["metadata"]["name"] for r in runs] == [entry["id"]]
    run = runs[0]
    assert run["metadata"]["labels"] == {
        "team": "shop", LABEL_STAGE: "prod",
        LABEL_FREIGHT_COLLECTION: cid, "rollgate.dev/attempt": "1",
        "app.kubernetes.io/managed-by": "rollgate"}
    assert run["spec"]["args"] == [{"name": "verdict", "value": "pass"}]
    assert "/pass" in metrics.hits
    assert len(cluster.events("VerificationSucceeded")) == 1
    # A finished verification is left alone: no write to the Stage or the Freight.
    before = (cluster.get("stage", "prod") or {})["metadata"]["resourceVersion"]
    freight_before = (cluster.get("freight", "f1") or {})["metadata"]["resourceVersion"]
    time.sleep(30)
    assert (cluster.get("stage", "prod") or {})["metadata"]["resourceVersion"] == before
    assert (cluster.get("freight", "f1") or {})["metadata"]["resourceVersion"] == freight_before
    assert len(cluster.events("VerificationSucceeded")) == 1


@pytest.mark.parametrize(("verdict", "phase", "status", "reason"), [
    ("fail", "Failed", "False", "VerificationFailed"),
    ("maybe", "Inconclusive", "Unknown", "VerificationInconclusive"),
    ("broken", "Error", "False", "VerificationError"),
])
def test_the_real_controller_decides_the_outcome(cluster: Cluster, reconciler: Any,
                                                 verdict: str, phase: str, status: str,
                                                 reason: str) -> None:
    cluster.stage("prod", verdict=verdict)
    cluster.promote("prod", "f1")
    entry = cluster.wait_latest("prod", phase)
    assert entry["analysisRun"]["phase"] == phase
    cond = cluster.condition("prod")
    assert (cond["status"], cond["reason"]) == (status, reason)
    assert cluster.verified_in("f1") == {}
    only_kargo_fields(cluster, "prod")


def test_gate_waits_for_health_before_any_run(cluster: Cluster, reconciler: Any) -> None:
    cluster.stage("prod")
    stage = cluster.get("stage", "prod")
    patch = kargo_shapes.promotion_patch(stage, {"w": "f1"}, promotion="p", health="Progressing")
    cluster.patch("stage", "prod", patch, status=True)
    entry = cluster.wait_latest("prod", "Pending")
    assert "health is Progressing" in entry["message"]
    assert cluster.condition("prod")["reason"] == "WaitingForVerification"
    time.sleep(2)
    assert cluster.runs("prod") == []
    cluster.patch("stage", "prod", {"status": {"health": {"status": "Healthy"}}}, status=True)
    cluster.wait_latest("prod", "Successful")
    assert len(cluster.runs("prod")) == 1


# --------------------------------------------------------------------------- requests


@pytest.mark.parametrize("form", ["plain", "json"])
def test_reverify_starts_one_more_attempt_once(cluster: Cluster, reconciler: Any,
                                               form: str) -> None:
    cluster.stage("prod", verdict="fail")
    cluster.promote("prod", "f1")
    first = cluster.wait_latest("prod", "Failed")
    cluster.stage("prod", verdict="pass")  # fixed; a spec change alone starts nothing
    value = first["id"] if form == "plain" else json.dumps(
        {"id": first["id"], "actor": "admin", "controlPlane": False})
    cluster.annotate("prod", ANNOTATION_REVERIFY, value)
    second = cluster.wait_latest("prod", "Successful", count=2)
    assert second["id"].endswith(".2")
    wait_for("verifiedIn", lambda: "prod" in cluster.verified_in("f1"))
    run = next(r for r in cluster.runs("prod") if r["metadata"]["name"] == second["id"])
    assert run["metadata"]["annotations"]["rollgate.dev/request"] == value
    time.sleep(3)
    assert len(cluster.runs("prod")) == 2  # acted on once
    assert cluster.events("ReverifyIgnored") == []


@pytest.mark.parametrize("form", ["plain", "json"])
def test_abort_terminates_the_run_and_records_aborted(cluster: Cluster, reconciler: Any,
                                                      form: str) -> None:
    cluster.stage("prod", templates=("long",))
    cluster.promote("prod", "f1")
    running = cluster.wait_latest("prod", "Running")
    value = running["id"] if form == "plain" else json.dumps(
        {"id": running["id"], "actor": "admin"})
    cluster.annotate("prod", ANNOTATION_ABORT, value)
    entry = cluster.wait_latest("prod", "Aborted")
    assert entry["finishTime"]
    cond = cluster.condition("prod")
    assert (cond["status"], cond["reason"]) == ("False", "VerificationAborted")
    run = cluster.get("analysisrun", running["id"]) or {}
    assert run["spec"]["terminate"] is True
    assert run["metadata"]["annotations"]["rollgate.dev/request"] == value
    # The real controller ends the terminated run; the entry stays Aborted.
    wait_for("the run to end", lambda: (cluster.get("analysisrun", running["id"]) or {}).get(
        "status", {}).get("phase") in ("Successful", "Failed", "Error", "Inconclusive"))
    time.sleep(1)
    assert cluster.history("prod")[0]["phase"] == "Aborted"


def test_new_freight_during_a_run_supersedes_it(cluster: Cluster, reconciler: Any) -> None:
    cluster.stage("prod", templates=("long",))
    cluster.promote("prod", "f1")
    old = cluster.wait_latest("prod", "Running")
    cluster.promote("prod", "f2")
    cid2 = freight_collection_id(["f2"])

    def superseded() -> dict[str, Any] | None:
        fh = ((cluster.get("stage", "prod") or {}).get("status") or {}).get("freightHistory")
        entry = (fh[1].get("verificationHistory") or [{}])[0] if fh and len(fh) > 1 else {}
        return entry if entry.get("phase") == "Aborted" else None

    entry = wait_for("the old verification to be Aborted", superseded)
    assert entry["id"] == old["id"] and entry["message"] == f"superseded by {cid2}"
    assert (cluster.get("analysisrun", old["id"]) or {})["spec"]["terminate"] is True
    new = cluster.wait_latest("prod", "Running")
    assert new["id"].startswith(f"prod.{cid2[:7]}.")


def test_fixing_the_stage_after_an_error_starts_the_next_attempt(cluster: Cluster,
                                                                 reconciler: Any) -> None:
    cluster.stage("prod", templates=("missing",))
    cluster.promote("prod", "f1")
    error = cluster.wait_latest("prod", "Error")
    assert "missing" in error["message"] and ANNOTATION_REVERIFY in error["message"]
    stage = cluster.get("stage", "prod") or {}
    cond = cluster.condition("prod")
    assert cond["status"] == "False"
    assert cond["observedGeneration"] == stage["metadata"]["generation"]
    # `kubectl wait` sees the condition at the current generation.
    cluster.kubectl("wait", "-n", cluster.ns, "stage/prod", "--for=condition=Verified=False",
                    "--timeout=30s")
    cluster.stage("prod", templates=("verdict",))
    entry = cluster.wait_latest("prod", "Successful", count=2)
    assert entry["id"].endswith(".2")
    cond = cluster.condition("prod")
    assert cond["observedGeneration"] == (cluster.get("stage", "prod") or {})["metadata"][
        "generation"]


def test_deleting_the_stage_removes_its_runs_and_verified_in(cluster: Cluster,
                                                             reconciler: Any) -> None:
    cluster.stage("prod")
    cluster.promote("prod", "f1")
    cluster.wait_latest("prod", "Successful")
    wait_for("verifiedIn", lambda: "prod" in cluster.verified_in("f1"))
    cluster.kubectl("delete", "stage", "prod", "-n", cluster.ns)
    wait_for("verifiedIn to lose prod", lambda: "prod" not in cluster.verified_in("f1"))
    wait_for("the runs to go", lambda: cluster.runs("prod") == [])


# --------------------------------------------------------------------------- robustness


def test_sigkill_and_restart_make_exactly_one_run(control_plane: ControlPlane,
                                                  cluster: Cluster, rollgate: HostRollgate) -> None:
    proc = start_reconciler(rollgate, cluster.ns, "--no-leader-elect", name="rv-kill")
    cluster.stage("prod", templates=("long",))
    cluster.promote("prod", "f1")
    wait_for("a run", lambda: cluster.runs("prod"))
    proc.kill(signal.SIGKILL)  # between creating the run and anything after it, maybe
    control_plane.stop_process(proc)
    again = start_reconciler(rollgate, cluster.ns, "--no-leader-elect", name="rv-again")
    try:
        cluster.wait_latest("prod", "Running")
        time.sleep(3)
        assert len(cluster.runs("prod")) == 1
        assert len(cluster.history("prod")) == 1
    finally:
        control_plane.stop_process(again)


def test_two_replicas_with_leader_election_make_one_run(
        control_plane: ControlPlane, cluster: Cluster, rollgate: HostRollgate) -> None:
    common = ("--lease-duration", "6")  # the Lease its RBAC names: rollgate-reconciler
    a = rollgate.start_reconciler(
        "--controllers", "stage-verification", "--stage-verification", "engine",
        "--namespaces", cluster.ns, *common, "--identity", "a", name="rv-a")
    b = rollgate.start_reconciler(
        "--controllers", "stage-verification", "--stage-verification", "engine",
        "--namespaces", cluster.ns, *common, "--identity", "b", name="rv-b")
    try:
        cluster.stage("prod")
        cluster.promote("prod", "f1")
        cluster.wait_latest("prod", "Successful")
        time.sleep(3)
        assert len(cluster.runs("prod")) == 1
        assert len(cluster.events("VerificationSucceeded")) == 1
    finally:
        control_plane.stop_process(a)
        control_plane.stop_process(b)


def test_a_foreign_run_for_the_collection_means_no_second_run(cluster: Cluster,
                                                              reconciler: Any) -> None:
    """Engine mode next to another verifier (Kargo's controller): its run for the same
    freight collection makes rollgate stand back, with one VerifierConflict event."""
    cluster.stage("prod", templates=("long",))
    cid = freight_collection_id(["f1"])
    foreign = verdict_template("http://127.0.0.1:9", name="x")["spec"]
    cluster.apply(objects.analysis_run(
        f"prod.01jdq7kx9v7t3n6r8p2m4c5b0a.{cid[:7]}",
        labels={LABEL_STAGE: "prod", LABEL_FREIGHT_COLLECTION: cid},
        spec={**foreign, "args": [{"name": "verdict", "value": "pass"}]}))
    cluster.promote("prod", "f1")
    wait_for("a VerifierConflict event", lambda: cluster.events("VerifierConflict"))
    time.sleep(3)
    assert [r["metadata"]["name"] for r in cluster.runs("prod")] == [
        f"prod.01jdq7kx9v7t3n6r8p2m4c5b0a.{cid[:7]}"]
    assert cluster.history("prod") == []
    events = cluster.events("VerifierConflict")
    assert len(events) == 1 and events[0]["type"] == "Warning"


def test_a_freight_that_appears_after_its_run_succeeded_gets_verified_in_at_once(
        cluster: Cluster, reconciler: Any) -> None:
    """Issue 19, 1a: the Freight reaches the reconciler only after the verification
    succeeded (as after an informer's re-list); its ADDED event brings its Stage back,
    which marks it verified without waiting for the 300 s resync."""
    cluster.stage("late")
    cluster.promote("late", "f9")  # no such Freight yet
    cluster.wait_latest("late", "Successful")
    assert cluster.verified_in("f9") == {}
    cluster.freight("f9")
    wait_for("verifiedIn of the late Freight", lambda: "late" in cluster.verified_in("f9"),
             timeout=30)  # the resync period is 300 s
