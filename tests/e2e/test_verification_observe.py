"""Observe mode (the production default) next to Kargo's own verification.

The test plays Kargo v1.11.2's Stage controller exactly as it verifies: runs named
``<stage>.<ulid>.<collection[:7]>`` with its two labels and one ownerReference per
Freight, entries with a UUID id and no actor, status written with merge patches. The
real Argo Rollouts controller executes those runs. rollgate must create and write
nothing, and report what Kargo gets wrong as Warning events and metrics.
"""

from __future__ import annotations

import datetime as dt
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import controlplane
import pytest
from verification_kit import Cluster, wait_for

from reconciler.verification.naming import freight_collection_id


@pytest.fixture
def observer(control_plane: controlplane.ControlPlane,
             namespace: str) -> Iterator[controlplane.ManagedProcess]:
    proc = control_plane.start_reconciler(
        "--controllers", "stage-verification", "--stage-verification", "observe",
        "--observe-grace-seconds", "2", "--namespaces", namespace, "--no-leader-elect",
        name="reconciler-observe")
    proc.wait_ready(60)
    yield proc
    control_plane.stop_process(proc)


@pytest.fixture
def refresher(control_plane: controlplane.ControlPlane,
              namespace: str) -> Iterator[controlplane.ManagedProcess]:
    """Observe mode with a short lag and --refresh-lagging (its RBAC comes with the dev
    overlay: manifests/reconciler-refresh)."""
    proc = control_plane.start_reconciler(
        "--controllers", "stage-verification", "--stage-verification", "observe",
        "--observe-lag-seconds", "2", "--refresh-lagging", "--namespaces", namespace,
        "--no-leader-elect", name="reconciler-refresh")
    proc.wait_ready(60)
    yield proc
    control_plane.stop_process(proc)


def kargo_run(cluster: Cluster, stage: str, freight: str, *, template: str = "verdict",
              verdict: str = "pass") -> str:
    """An AnalysisRun as Kargo's verification creates it."""
    cid = freight_collection_id([freight])
    ulid = uuid.uuid4().hex[:26]
    name = f"{stage}.{ulid}.{cid[:7]}"
    source = cluster.get("analysistemplate", template) or {}
    spec = dict(source["spec"])
    spec.pop("args", None)
    spec["args"] = [{"name": "verdict", "value": verdict}]
    owner = cluster.get("freight", freight) or {}
    cluster.apply({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
        "metadata": {
            "name": name,
            "labels": {"kargo.akuity.io/stage": stage,
                       "kargo.akuity.io/freight-collection": cid},
            "annotations": {"kargo.akuity.io/promotion": f"{stage}.{freight}"},
            "ownerReferences": [{"apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Freight",
                                 "name": freight, "uid": owner["metadata"]["uid"],
                                 "blockOwnerDeletion": False}],
        },
        "spec": spec,
    })
    return name


def kargo_records(cluster: Cluster, stage: str, run: str, phase: str, *,
                  index: int = 0) -> None:
    """Kargo's verification entry for ``run`` in freightHistory[index] (merge patch,
    whole lists), and its Verified condition."""
    current = cluster.get("stage", stage) or {}
    history = current["status"]["freightHistory"]
    entry: dict[str, Any] = {
        "id": str(uuid.uuid4()), "phase": phase,
        "startTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "analysisRun": {"name": run, "namespace": cluster.ns, "phase": phase},
    }
    if phase in ("Successful", "Failed"):
        entry["finishTime"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    history[index]["verificationHistory"] = [entry, *history[index].get(
        "verificationHistory", [])]
    status = "True" if phase == "Successful" else "Unknown"
    reason = "Verified" if phase == "Successful" else f"Verification{phase}"
    cluster.patch("stage", stage, {"status": {"freightHistory": history, "conditions": [{
        "type": "Verified", "status": status, "reason": reason, "message": "",
        "observedGeneration": current["metadata"]["generation"],
        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]}},
        status=True)


def metric(proc: controlplane.ManagedProcess, name: str, **labels: str) -> float:
    text = urllib.request.urlopen(proc.url + "/metrics", timeout=5).read().decode()
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def versions(cluster: Cluster) -> dict[str, str]:
    """resourceVersion of every Stage and Freight in the namespace (runs are the Argo
    Rollouts controller's to update; their number is checked instead)."""
    out = {}
    for kind in ("stages", "freights"):
        for obj in cluster.list(kind):
            out[f"{kind}/{obj['metadata']['name']}"] = obj["metadata"]["resourceVersion"]
    return out


def test_metrics_for_kargos_verification_and_nothing_written(cluster: Cluster,
                                                             observer: Any) -> None:
    cluster.stage("prod")
    cluster.promote("prod", "f1")
    run = kargo_run(cluster, "prod", "f1")
    wait_for("the run to succeed", lambda: (cluster.get("analysisrun", run) or {}).get(
        "status", {}).get("phase") == "Successful")
    kargo_records(cluster, "prod", run, "Successful")
    cluster.patch("freight", "f1", {"status": {"verifiedIn": {"prod": {
        "verifiedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}}}, status=True)
    wait_for("the finished verification metric", lambda: metric(
        observer, "rollgate_verifications_finished_total", namespace=cluster.ns, stage="prod",
        phase="Successful") == 1)
    assert metric(observer, "rollgate_promotion_to_verified_seconds_count") >= 1
    assert metric(observer, "rollgate_verification_duration_seconds_count",
                  phase="Successful") >= 1
    before = versions(cluster)
    time.sleep(5)
    assert versions(cluster) == before
    assert [r["metadata"]["name"] for r in cluster.runs("prod")] == [run]
    assert all(e.get("source", {}).get("component") != "rollgate-reconciler"
               or e["type"] == "Warning" for e in cluster.list("events"))


def test_each_known_kargo_fault_is_one_warning_event(cluster: Cluster, observer: Any) -> None:
    cluster.stage("prod", templates=("long",))
    cluster.promote("prod", "f1")
    # 1. Two runs for one collection with no reverify between them.
    first = kargo_run(cluster, "prod", "f1", template="long")
    kargo_records(cluster, "prod", first, "Running")
    second = kargo_run(cluster, "prod", "f1", template="long")
    events = wait_for("DuplicateVerificationRuns", lambda: cluster.events(
        "DuplicateVerificationRuns"))
    assert second in events[0]["message"] and first not in events[0]["message"]
    # 2. New freight; the old runs keep running.
    cluster.promote("prod", "f2")
    events = wait_for("StaleVerificationRun", lambda: cluster.events("StaleVerificationRun"))
    assert {e["message"].split()[1] for e in events} >= {first}
    # 3. A failed verification while verifiedIn still names the Stage.
    run = kargo_run(cluster, "prod", "f2", verdict="fail")
    wait_for("the run to fail", lambda: (cluster.get("analysisrun", run) or {}).get(
        "status", {}).get("phase") == "Failed")
    cluster.patch("freight", "f2", {"status": {"verifiedIn": {"prod": {
        "verifiedAt": "2026-01-01T00:00:00Z"}}}}, status=True)
    kargo_records(cluster, "prod", run, "Failed")
    events = wait_for("VerifiedDespiteFailure", lambda: cluster.events("VerifiedDespiteFailure"))
    assert "f2" in events[0]["message"]
    for reason in ("DuplicateVerificationRuns", "VerifiedDespiteFailure"):
        assert len(cluster.events(reason)) == 1, reason
        assert cluster.events(reason)[0]["type"] == "Warning"
    assert metric(observer, "rollgate_verification_anomalies_total",
                  kind="VerifiedDespiteFailure") == 1
    before = versions(cluster)
    time.sleep(5)
    assert versions(cluster) == before  # rollgate wrote nothing
    assert len(cluster.runs("prod")) == 3


def test_a_finished_run_kargo_has_not_recorded_is_reported_and_refreshed_once(
        cluster: Cluster, refresher: Any) -> None:
    """Kargo's entry still says Running after its run finished (its write of the result
    never comes): VerificationNotRecorded once the lag (2 s here) is past, without
    waiting for a resync, and Kargo's own refresh request, set once."""
    cluster.stage("prod")
    cluster.promote("prod", "f1")
    run = kargo_run(cluster, "prod", "f1")
    kargo_records(cluster, "prod", run, "Running")
    done = wait_for("the run to succeed", lambda: (cluster.get("analysisrun", run) or {}).get(
        "status", {}).get("completedAt"))
    finished = dt.datetime.fromisoformat(done.replace("Z", "+00:00"))
    events = wait_for("VerificationNotRecorded", lambda: cluster.events(
        "VerificationNotRecorded"), timeout=20)  # the resync period is 300 s
    assert events[0]["type"] == "Warning" and run in events[0]["message"]
    value = wait_for("Kargo's refresh annotation", lambda: (cluster.get("stage", "prod") or {})[
        "metadata"].get("annotations", {}).get("kargo.akuity.io/refresh"))
    refreshed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))  # RFC 3339
    assert refreshed >= finished + dt.timedelta(seconds=1)  # after the lag, not before
    before = cluster.get("stage", "prod") or {}
    time.sleep(5)
    after = cluster.get("stage", "prod") or {}
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert len(cluster.events("VerificationNotRecorded")) == 1
    assert metric(refresher, "rollgate_verification_anomalies_total",
                  kind="VerificationNotRecorded") == 1
    assert [r["metadata"]["name"] for r in cluster.runs("prod")] == [run]


def test_shard_flags_observe_the_stages_kargo_shards_would(
        cluster: Cluster, control_plane: controlplane.ControlPlane, namespace: str) -> None:
    """--shard a (label selector kargo.akuity.io/shard=a on the Stage informer) and
    --shard a --default-shard (every Stage cached, the unlabelled ones kept too), as
    Kargo's SHARD_NAME and IS_DEFAULT_CONTROLLER select them."""
    common = ("--controllers", "stage-verification", "--stage-verification", "observe",
              "--namespaces", namespace, "--no-leader-elect")
    only_a = control_plane.start_reconciler(*common, "--shard", "a", name="reconciler-shard-a")
    a_and_default = control_plane.start_reconciler(
        *common, "--shard", "a", "--default-shard", name="reconciler-shard-a-default")
    try:
        for proc in (only_a, a_and_default):
            proc.wait_ready(60)
        for name, shard in (("in-a", "a"), ("in-b", "b"), ("unlabelled", None)):
            cluster.stage(name)
            if shard is not None:
                cluster.kubectl("label", "stage", name, "-n", namespace,
                                f"kargo.akuity.io/shard={shard}")
            cluster.promote(name, "f1")
            kargo_records(cluster, name, f"{name}.kargo-run", "Successful")

        def finished(proc: controlplane.ManagedProcess, stage: str) -> float:
            return metric(proc, "rollgate_verifications_finished_total", namespace=namespace,
                          stage=stage, phase="Successful")

        wait_for("shard a's Stage in both", lambda: finished(only_a, "in-a") == 1 == finished(
            a_and_default, "in-a"))
        wait_for("the unlabelled Stage with --default-shard",
                 lambda: finished(a_and_default, "unlabelled") == 1)
        time.sleep(2)  # every Stage was written before: nothing else is coming
        assert finished(only_a, "unlabelled") == 0
        assert finished(only_a, "in-b") == 0 and finished(a_and_default, "in-b") == 0
    finally:
        control_plane.stop_process(only_a)
        control_plane.stop_process(a_and_default)
