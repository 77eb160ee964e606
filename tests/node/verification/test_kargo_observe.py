"""rollgate next to the real Kargo controller (docs/verification.md, "Observe mode").

The real Kargo v1.11.2 controller promotes (real Promotions) and verifies; Argo Rollouts
pods on the node run its AnalysisRuns. rollgate's reconciler in observe mode (the
production default) must write nothing and report what Kargo gets wrong; in engine mode
it must stand back. rollgate's webhook must never block Kargo's own writes.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from typing import Any, TypedDict

import pytest

from harness.host_rollgate import HostRollgate
from harness.kits.kargo import KargoProject, metric, running_kargo, slow_stage_status
from harness.kits.verification import MetricServer, verdict_template
from harness.plane import ControlPlane
from harness.process import ManagedProcess
from harness.upstream import kargo as kargo_upstream
from reconciler.verification.payloads import ANNOTATION_REFRESH
from schemas.constants import ANNOTATION_ABORT, ANNOTATION_REVERIFY, KARGO_FINALIZER
from testkit import kargo_shapes
from testkit.waits import wait_for


class Template(TypedDict):
    """The name and run length of a ``verdict_template``."""

    name: str
    count: int
    interval: str


# Two 4 s measurements: long enough that Kargo's own status write of the entry reaches
# its cache before the run finishes (with instant runs Kargo really lags; see
# test_kargo_lag.py).
TWO_STEP: Template = {"name": "two-step", "count": 2, "interval": "4s"}


@pytest.fixture(scope="module")
def kargo(control_plane: ControlPlane) -> Iterator[ManagedProcess]:
    with running_kargo(control_plane, name="kargo-controller") as proc:
        yield proc


@pytest.fixture
def project(control_plane: ControlPlane, namespace: str, metrics: MetricServer,
            argo_rollouts: Any, kargo: Any) -> KargoProject:
    p = KargoProject.labelled(control_plane, namespace)
    p.apply(verdict_template(metrics.url))
    two_step = verdict_template(metrics.url, name=TWO_STEP["name"], count=TWO_STEP["count"],
                                interval=TWO_STEP["interval"])
    # A failing verdict also takes both measurements (else the run fails at once).
    two_step["spec"]["metrics"][0]["failureLimit"] = 1
    p.apply(two_step)
    p.apply(verdict_template(metrics.url, name="long", count=3, interval="1h"))
    p.freight("a1", "a2")
    return p


def reconciler(rollgate: HostRollgate, namespace: str, mode: str,
               *extra: str, name: str) -> ManagedProcess:
    proc = rollgate.start_reconciler(
        "--controllers", "stage-verification", "--stage-verification", mode,
        "--observe-grace-seconds", "2", "--namespaces", namespace, "--no-leader-elect",
        *extra, name=name)
    proc.wait_ready(60)
    return proc


@pytest.fixture
def observer(control_plane: ControlPlane,
             namespace: str, rollgate: HostRollgate) -> Iterator[ManagedProcess]:
    proc = reconciler(rollgate, namespace, "observe", name="reconciler-kargo-observe")
    yield proc
    control_plane.stop_process(proc)


def run_of(project: KargoProject, entry: dict[str, Any]) -> dict[str, Any]:
    return project.get("analysisrun", entry["analysisRun"]["name"]) or {}


def test_ordinary_promotions_and_reverifies_are_counted_and_nothing_is_written(
        project: KargoProject, observer: ManagedProcess) -> None:
    project.stage("test", templates=("two-step",))
    first = project.promote_and_verify("test", "a1")
    assert first["phase"] == "Successful" and first.get("actor") != "rollgate"
    # Kargo, not rollgate, marks the Freight verified.
    assert "test" in project.verified_in(project.freight_names["a1"])
    wait_for("the finished verification metric", lambda: metric(
        observer, "rollgate_verifications_finished_total", namespace=project.ns,
        stage="test", phase="Successful") == 1)
    assert metric(observer, "rollgate_promotion_to_verified_seconds_count") >= 1
    assert metric(observer, "rollgate_verification_duration_seconds_count",
                  phase="Successful") >= 1

    # A reverify as Kargo's CLI requests it: Kargo runs the verification again.
    project.annotate("test", ANNOTATION_REVERIFY, json.dumps({"id": first["id"]}))
    wait_for("Kargo's second verification", lambda: len(project.history("test")) == 2
             and project.history("test")[0]["phase"] == "Successful")
    wait_for("the second finished verification", lambda: metric(
        observer, "rollgate_verifications_finished_total", namespace=project.ns,
        stage="test", phase="Successful") == 2)

    # A second promotion, verified in turn.
    project.promote("test", "a2")
    project.wait_promoted("test", "a2")
    wait_for("a2 verified", lambda: (e := project.history("test")) and e[0].get(
        "phase") == "Successful")
    wait_for("the third finished verification", lambda: metric(
        observer, "rollgate_verifications_finished_total", namespace=project.ns,
        stage="test", phase="Successful") == 3)
    assert project.rollgate_warnings() == []
    assert project.rollgate_writes() == {}


def test_kargo_holds_the_next_promotion_until_the_run_ends_and_nothing_is_stale(
        project: KargoProject, observer: ManagedProcess) -> None:
    """Kargo v1.11.2 does not supersede a running verification: the next Promotion waits
    (Pending) until it is terminal, and an abort terminates the run. So the
    StaleVerificationRun finding has nothing to report here
    (docs/verification.md, "Observe mode")."""
    project.stage("uat", templates=("long",))
    project.promote("uat", "a1")
    project.wait_promoted("uat", "a1")
    running = wait_for("Kargo's run to be Running", lambda: (e := project.history("uat")) and (
        run_of(project, e[0]).get("status", {}).get("phase") == "Running") and e[0])
    second = project.promote("uat", "a2")
    wait_for("the second Promotion to be Pending", lambda: any(
        p["name"] == second and p.get("phase") == "Pending"
        for p in project.promotions("uat")))
    project.annotate("uat", ANNOTATION_ABORT, json.dumps({"id": running["id"]}))
    project.wait_promoted("uat", "a2")
    stage = project.get("stage", "uat") or {}
    old = stage["status"]["freightHistory"][1]["verificationHistory"][0]
    # Kargo v1.11.2 records an abort as Failed with this message
    # (docs/verification.md, "Observe mode").
    assert (old["phase"], old.get("message")) == ("Failed", "Verification aborted by user")
    wait_for("the terminated run to end", lambda: run_of(project, running).get(
        "status", {}).get("phase") not in (None, "", "Running", "Pending"))
    assert project.events("StaleVerificationRun") == []
    assert metric(observer, "rollgate_verification_anomalies_total",
                  kind="StaleVerificationRun") == 0
    # Counted as an abort, not a failure: RollgateVerificationFailed does not page on it.
    wait_for("the aborted verification counted", lambda: metric(
        observer, "rollgate_verifications_finished_total", namespace=project.ns,
        stage="uat", phase="Aborted") == 1)
    assert metric(observer, "rollgate_verifications_finished_total", namespace=project.ns,
                  stage="uat", phase="Failed") == 0
    assert project.rollgate_writes() == {}


def test_a_failed_reverify_after_success_while_kargo_keeps_verified_in(
        project: KargoProject, observer: ManagedProcess) -> None:
    project.stage("prod", templates=("two-step",))
    first = project.promote_and_verify("prod", "a1")
    # The same Stage now asks for a failing verdict; a reverify runs it.
    project.stage("prod", templates=("two-step",), verdict="fail")
    project.annotate("prod", ANNOTATION_REVERIFY, json.dumps({"id": first["id"]}))
    wait_for("Kargo's failed reverify", lambda: (e := project.history("prod")) and len(e) == 2
             and e[0]["phase"] == "Failed")
    freight = project.freight_names["a1"]
    if "prod" in project.verified_in(freight):
        events = wait_for("VerifiedDespiteFailure",
                          lambda: project.events("VerifiedDespiteFailure"))
        assert freight in events[0]["message"] and events[0]["type"] == "Warning"
        assert metric(observer, "rollgate_verification_anomalies_total",
                      kind="VerifiedDespiteFailure") == 1
    else:
        pytest.fail("Kargo v1.11.2 removed verifiedIn after a failed reverify: the "
                    "VerifiedDespiteFailure finding describes a Kargo that no longer exists")
    assert project.rollgate_writes() == {}


def test_engine_mode_stands_back_from_kargos_runs(
        control_plane: ControlPlane, project: KargoProject, rollgate: HostRollgate) -> None:
    proc = reconciler(rollgate, project.ns, "engine", name="reconciler-kargo-engine")
    try:
        project.stage("qa", templates=("two-step",))
        project.promote("qa", "a1")
        project.wait_promoted("qa", "a1")
        project.wait_verified("qa")
        events = wait_for("VerifierConflict", lambda: project.events("VerifierConflict"))
        assert events[0]["type"] == "Warning"
        runs = project.runs("qa")
        assert runs and all(
            r["metadata"].get("labels", {}).get("app.kubernetes.io/managed-by") != "rollgate"
            for r in runs)
        assert all(e.get("actor") != "rollgate" for e in project.history("qa"))
        assert project.rollgate_writes() == {}
    finally:
        control_plane.stop_process(proc)


def test_kargo_promotes_and_verifies_while_rollgates_webhook_is_down(
        project: KargoProject, rollgate: HostRollgate) -> None:
    project.stage("dev", templates=("two-step",))
    rollgate.stop_webhook()
    try:
        project.promote("dev", "a1")
        project.wait_promoted("dev", "a1")
        project.wait_verified("dev")
        stage = project.get("stage", "dev") or {}
        assert KARGO_FINALIZER in stage["metadata"].get("finalizers", [])
        assert "dev" in project.verified_in(project.freight_names["a1"])
    finally:
        rollgate.start_webhook()


def test_a_run_kargo_has_not_recorded_is_reported_and_refreshed(
        control_plane: ControlPlane, project: KargoProject, rollgate: HostRollgate) -> None:
    """When a one-shot run finishes before Kargo's own status write of its entry reaches
    Kargo's cache, Kargo misses the run's phase change and would record it only at its
    5-minute requeue. That write is held 3 s here (a validating webhook on stages/status),
    so the real Kargo lags every time; rollgate then reports VerificationNotRecorded after
    the lag (2 s here) and, with --refresh-lagging, sets Kargo's refresh request, and Kargo
    records the result."""
    project.stage("lag")  # the one-shot `verdict` template
    with slow_stage_status(control_plane, project.ns, seconds=3) as held:
        project.promote("lag", "a1")
        project.wait_promoted("lag", "a1")
        entry = wait_for("Kargo's entry with its run", lambda: (e := project.history("lag"))
                         and e[0].get("analysisRun", {}).get("name") and e[0])
        run = entry["analysisRun"]["name"]
        wait_for("the run to succeed", lambda: (project.get("analysisrun", run) or {}).get(
            "status", {}).get("phase") == "Successful")
        time.sleep(15)
        # Kargo's miss: the run succeeded 15 s ago, the entry still says it has not.
        assert project.history("lag")[0]["phase"] in ("Pending", "Running"), (
            project.history("lag"))
        assert "lag" in held
        proc = reconciler(rollgate, project.ns, "observe", "--observe-lag-seconds", "2",
                          "--refresh-lagging", name="reconciler-kargo-refresh")
        try:
            events = wait_for("VerificationNotRecorded", lambda: project.events(
                "VerificationNotRecorded"), timeout=30)
            assert events[0]["type"] == "Warning" and run in events[0]["message"]
            value = wait_for("Kargo's refresh request", lambda: (project.get(
                "stage", "lag") or {})["metadata"].get("annotations", {}).get(
                ANNOTATION_REFRESH))
            asked = dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
            assert abs((dt.datetime.now(dt.UTC) - asked).total_seconds()) < 60  # RFC 3339
            project.wait_verified("lag", timeout=30)  # far inside Kargo's 5-minute requeue
            assert project.history("lag")[0]["phase"] == "Successful"
            assert metric(proc, "rollgate_verification_anomalies_total",
                          kind="VerificationNotRecorded") == 1
            time.sleep(3)
            assert len(project.events("VerificationNotRecorded")) == 1
        finally:
            control_plane.stop_process(proc)


def test_a_completion_kargos_handler_cannot_map_is_refreshed_before_the_lag(
        control_plane: ControlPlane, project: KargoProject, rollgate: HostRollgate) -> None:
    """rollgate already running when Kargo misses the run's phase change (its entry's
    status write held 3 s, the one-shot run finishing meanwhile): rollgate's own lookup of
    the completion, done as Kargo's handler does it, finds no Stage naming the run, so it
    sets Kargo's refresh request as soon as Kargo's entry appears, not after the lag
    (60 s here, far more than Kargo needs once asked). Kargo records the result inside the
    lag, and no finding is reported."""
    project.stage("early")  # the one-shot `verdict` template
    proc = reconciler(rollgate, project.ns, "observe", "--observe-lag-seconds", "60",
                      "--refresh-lagging", name="reconciler-kargo-early-refresh")
    try:
        with slow_stage_status(control_plane, project.ns, seconds=3) as held:
            project.promote("early", "a1")
            project.wait_promoted("early", "a1")
            entry = wait_for("Kargo's entry with its run", lambda: (
                e := project.history("early")) and e[0].get("analysisRun", {}).get("name")
                and e[0])
            run = entry["analysisRun"]["name"]
            wait_for("the run to end", lambda: (project.get(
                "analysisrun", run) or {}).get("status", {}).get("completedAt"))
            project.wait_verified("early", timeout=60)  # Kargo's requeue is 5 minutes away
            assert "early" in held
        assert project.history("early")[0]["phase"] == "Successful"
        # the refresh came from the completion no Stage named, not from the lag
        refreshes = [json.loads(line) for line in proc.log_path.read_text().splitlines()
                     if '"asked Kargo to refresh the Stage"' in line]
        assert [r["why"] for r in refreshes] == ["completed before any Stage named the run"]
        assert (project.get("stage", "early") or {})["metadata"]["annotations"].get(
            ANNOTATION_REFRESH)
        time.sleep(2)
        assert project.events("VerificationNotRecorded") == []
        assert metric(proc, "rollgate_verification_anomalies_total",
                      kind="VerificationNotRecorded") == 0
    finally:
        control_plane.stop_process(proc)


def test_shard_flags_observe_what_a_sharded_kargo_reconciles(
        control_plane: ControlPlane, namespace: str, metrics: MetricServer,
        argo_rollouts: Any, kargo: ManagedProcess, rollgate: HostRollgate) -> None:
    """A second Kargo controller for shard `a` (SHARD_NAME=a, not the default one) next
    to the default controller; rollgate with --shard a sees exactly Kargo shard a's
    Stages, with --default-shard alone exactly the default controller's."""
    sharded = kargo_upstream.start_controller(control_plane, name="kargo-controller-shard-a",
                                              shard="a", default_controller=False)
    common = ("--controllers", "stage-verification", "--stage-verification", "observe",
              "--namespaces", namespace, "--no-leader-elect")
    only_a = rollgate.start_reconciler(*common, "--shard", "a", name="reconciler-shard-a")
    default = rollgate.start_reconciler(*common, "--default-shard",
                                        name="reconciler-shard-default")
    try:
        for proc in (only_a, default):
            proc.wait_ready(60)
        p = KargoProject.labelled(control_plane, namespace)
        p.apply(verdict_template(metrics.url, name=TWO_STEP["name"], count=TWO_STEP["count"],
                                 interval=TWO_STEP["interval"]))
        p.freight("a1")
        p.stage("in-a", shard="a", templates=("two-step",))
        p.stage("unlabelled", templates=("two-step",))
        for stage in ("in-a", "unlabelled"):
            p.promote(stage, "a1")
        for stage in ("in-a", "unlabelled"):
            p.wait_verified(stage)

        def finished(proc: ManagedProcess, stage: str) -> float:
            return metric(proc, "rollgate_verifications_finished_total", namespace=namespace,
                          stage=stage, phase="Successful")

        wait_for("shard a's Stage seen by --shard a", lambda: finished(only_a, "in-a") == 1)
        wait_for("the unlabelled Stage seen by --default-shard",
                 lambda: finished(default, "unlabelled") == 1)
        assert finished(only_a, "unlabelled") == 0
        assert finished(default, "in-a") == 0
        # Kargo's shard a controller, not the default one, verified the labelled Stage.
        assert "in-a" in sharded.log_path.read_text(errors="replace")
    finally:
        # Kargo's shard a controller finalizes its Stage: it goes first, as a user
        # retires a shard, or the Stage (and its namespace) would wait for it for good.
        control_plane.kubectl("-n", namespace, "delete", "stage", "in-a", "--timeout=60s",
                              check=False)
        for proc in (only_a, default, sharded):
            control_plane.stop_process(proc)


def _types(value: Any, path: str = "status") -> dict[str, str]:
    """Every leaf path of ``value`` with its JSON type (list items as ``[i]``)."""
    if isinstance(value, dict):
        out: dict[str, str] = {}
        for key, item in value.items():
            out.update(_types(item, f"{path}.{key}"))
        return out
    if isinstance(value, list):
        out = {path: "list"} if not value else {}
        for index, item in enumerate(value):
            out.update(_types(item, f"{path}[{index}]"))
        return out
    return {path: type(value).__name__}


def test_the_imitation_writes_what_the_real_kargo_writes(
        control_plane: ControlPlane, project: KargoProject) -> None:
    """testkit.kargo_shapes plays Kargo's promotion for the engine-mode tests: each status
    field it writes is one the real Kargo writes for the same promotion, with the same
    type, and the values rollgate reads are the same."""
    project.stage("real", templates=("two-step",))
    # A shard no controller serves: the real Kargo leaves this Stage to the imitation.
    project.stage("played", templates=("two-step",), shard="imitation")
    project.promote("real", "a1")
    project.wait_promoted("real", "a1")
    freight = project.freight_names["a1"]
    played = project.get("stage", "played")
    project.patch("stage", "played", kargo_shapes.promotion_patch(
        played, {"w": freight}, promotion="played.a1"), status=True)
    real = (project.get("stage", "real") or {})["status"]
    fake = (project.get("stage", "played") or {})["status"]

    real_types = _types({k: real.get(k) for k in ("freightHistory", "lastPromotion", "health")})
    fake_types = _types({k: fake.get(k) for k in ("freightHistory", "lastPromotion", "health")})
    for path, kind in fake_types.items():
        if ".verificationHistory" in path:
            continue  # the verifier's, not the promotion's
        assert real_types.get(path) == kind, (path, kind, real_types.get(path))
    assert "currentPromotion" not in real and "currentPromotion" not in fake
    # What rollgate reads, value for value.
    assert fake["freightHistory"][0]["id"] == real["freightHistory"][0]["id"]
    assert fake["freightHistory"][0]["items"]["Warehouse/w"]["name"] == freight
    assert real["freightHistory"][0]["items"]["Warehouse/w"]["name"] == freight
    for key in ("phase",):
        assert fake["lastPromotion"]["status"][key] == real["lastPromotion"]["status"][key]
    assert (fake["lastPromotion"]["status"]["freightCollection"]["id"]
            == real["lastPromotion"]["status"]["freightCollection"]["id"])
    assert fake["health"]["status"] == real["health"]["status"] == "Healthy"
