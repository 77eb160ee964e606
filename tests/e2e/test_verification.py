"""Stage verification on a real control plane (issue 4, e2e acceptance).

The reconciler runs as ``python -m reconciler --controllers stage-verification`` under
the ServiceAccount and RBAC from ``manifests/`` (the harness gives it that identity),
next to the webhook. The test plays Kargo (it writes the Stage status to promote
freight) and the Argo Rollouts controller (it writes the AnalysisRun's phase), and
checks with kubectl what a user would look at.

Waits poll the API up to a generous deadline; no test asserts how fast something
happens (bench/verification.py measures that).
"""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import controlplane
import pytest

from reconciler.analysis import build_analysis_run, freight_collection_id

DEADLINE = 60.0
STAGE = "prod"
TEMPLATE = {
    "apiVersion": "argoproj.io/v1alpha1",
    "kind": "AnalysisTemplate",
    "metadata": {"name": "success-rate"},
    "spec": {
        "args": [{"name": "service-name"}, {"name": "threshold", "value": "0.95"}],
        "metrics": [{
            "name": "success-rate",
            "interval": "1m",
            "successCondition": "result[0] >= {{args.threshold}}",
            # A provider this code has never heard of must reach the run unchanged.
            "provider": {"plugin": {"acme/brand-new": {"query": "q{{args.service-name}}",
                                                        "weights": [1, 2.5, None]}}},
        }],
        "dryRun": [{"metricName": "success-rate"}],
    },
}


# --- helpers -------------------------------------------------------------------------


def wait_for(what: str, check: Callable[[], Any], timeout: float = DEADLINE) -> Any:
    """Poll ``check`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what} (last: {last!r})")


class Cluster:
    """kubectl-level helpers for one test namespace."""

    def __init__(self, plane: controlplane.ControlPlane, namespace: str) -> None:
        self.plane = plane
        self.ns = namespace

    def kubectl(self, *args: str, **kw: Any):
        return self.plane.kubectl(*args, **kw)

    def apply(self, obj: dict[str, Any]) -> None:
        obj = json.loads(json.dumps(obj))
        if obj["kind"] != "ClusterAnalysisTemplate":
            obj["metadata"]["namespace"] = self.ns
        self.kubectl("apply", "-f", "-", input=json.dumps(obj))

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        out = self.kubectl("get", kind, name, "-n", self.ns, "-o", "json", check=False)
        return json.loads(out.stdout) if out.returncode == 0 else None

    def runs(self) -> list[dict[str, Any]]:
        out = self.kubectl("get", "analysisruns", "-n", self.ns, "-o", "json")
        return json.loads(out.stdout)["items"]

    def patch(self, kind: str, name: str, body: dict[str, Any], *, status: bool = False) -> None:
        args = ["patch", kind, name, "-n", self.ns, "--type=merge", "-p", json.dumps(body)]
        if status:
            args.append("--subresource=status")
        self.kubectl(*args)

    def annotate(self, name: str, key: str, value: str = "") -> None:
        self.kubectl("annotate", "stage", name, "-n", self.ns, "--overwrite", f"{key}={value}")

    # -- playing Kargo and Argo Rollouts --------------------------------------------
    def freight(self, *names: str) -> None:
        for name in names:
            self.apply({"apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Freight",
                        "metadata": {"name": name}, "alias": f"alias-{name}",
                        "origin": {"kind": "Warehouse", "name": "w"}})

    def stage(self, name: str = STAGE, *, templates=("success-rate",), spec_extra=None,
              args=None) -> None:
        analysis: dict[str, Any] = {"templates": [{"templateName": t} for t in templates],
                                    "args": args if args is not None else
                                    [{"name": "service-name", "value": "web.shop.svc"}],
                                    "analysisRunMetadata": {"labels": {"team": "shop"}}}
        self.apply({"apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Stage",
                    "metadata": {"name": name},
                    "spec": {"analysis": analysis, **(spec_extra or {})}})

    def promote(self, stage: str, *freight: str, extra_status=None) -> None:
        items = {f"Warehouse/w{i}": {"name": f} for i, f in enumerate(freight)}
        self.patch("stage", stage, {"status": {"freightHistory": [{"items": items}],
                                               **(extra_status or {})}}, status=True)

    def set_run_phase(self, run: str, phase: str, message: str = "") -> None:
        # AnalysisRun has no status subresource: the Rollouts controller updates it whole.
        status: dict[str, Any] = {"phase": phase}
        if message:
            status["message"] = message
        self.patch("analysisrun", run, {"status": status})

    # -- what a user checks -----------------------------------------------------------
    def verification(self, stage: str = STAGE) -> dict[str, Any]:
        obj = self.get("stage", stage) or {}
        return (obj.get("status") or {}).get("verification") or {}

    def condition(self, stage: str = STAGE) -> dict[str, Any]:
        obj = self.get("stage", stage) or {}
        conds = (obj.get("status") or {}).get("conditions") or []
        return next((c for c in conds if c.get("type") == "Verified"), {})

    def verified_in(self, freight: str) -> dict[str, Any]:
        obj = self.get("freight", freight) or {}
        return (obj.get("status") or {}).get("verifiedIn") or {}

    def wait_phase(self, phase: str, stage: str = STAGE, attempt: int | None = None):
        def check():
            v = self.verification(stage)
            ok = v.get("phase") == phase and (attempt is None or v.get("attempt") == attempt)
            return v if ok else None
        return wait_for(f"verification of {stage} to be {phase}", check)

    def wait_run(self, attempt: int = 1, stage: str = STAGE) -> dict[str, Any]:
        def check():
            found = [r for r in self.runs()
                     if r["metadata"]["labels"].get("kargo.akuity.io/stage") == stage
                     and r["metadata"]["labels"].get("rollgate.dev/attempt") == str(attempt)]
            return found[0] if found else None
        return wait_for(f"AnalysisRun attempt {attempt} of {stage}", check)

    def events(self, reason: str) -> list[dict[str, Any]]:
        out = self.kubectl("get", "events", "-n", self.ns, "-o", "json")
        return [e for e in json.loads(out.stdout)["items"] if e.get("reason") == reason]


def start(plane: controlplane.ControlPlane, namespace: str, *extra: str,
          name: str = "reconciler-verification") -> controlplane.ManagedProcess:
    proc = plane.start_reconciler(
        "--controllers", "stage-verification", "--namespaces", namespace, *extra, name=name,
    )
    proc.wait_ready(60)
    return proc


# --- fixtures --------------------------------------------------------------------------


@pytest.fixture
def cluster(control_plane: controlplane.ControlPlane, namespace: str) -> Cluster:
    return Cluster(control_plane, namespace)


@pytest.fixture
def reconciler(control_plane: controlplane.ControlPlane,
               namespace: str) -> Iterator[controlplane.ManagedProcess]:
    """A reconciler watching only this test's namespace (no Lease: nothing competes)."""
    proc = start(control_plane, namespace, "--no-leader-elect")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def ready(cluster: Cluster, reconciler: controlplane.ManagedProcess) -> Cluster:
    """Template, one Freight and a Stage that references the template."""
    cluster.apply(TEMPLATE)
    cluster.freight("f1")
    cluster.stage()
    return cluster


# --- the happy path --------------------------------------------------------------------


def test_promotion_creates_exactly_one_run_with_the_expected_spec(ready: Cluster):
    ready.promote(STAGE, "f1")
    run = ready.wait_run()
    ready.wait_phase("Running")
    runs = ready.runs()
    assert len(runs) == 1
    meta = run["metadata"]
    collection = freight_collection_id(["f1"])
    assert meta["name"] == f"{STAGE}.{collection[:7]}.1"
    assert meta["labels"] == {
        "team": "shop",
        "kargo.akuity.io/stage": STAGE,
        "kargo.akuity.io/freight-collection": collection,
        "rollgate.dev/attempt": "1",
        "app.kubernetes.io/managed-by": "rollgate",
    }
    assert meta["annotations"]["rollgate.dev/freight"] == "f1"
    stage = ready.get("stage", STAGE)
    assert meta["ownerReferences"] == [{
        "apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Stage", "name": STAGE,
        "uid": stage["metadata"]["uid"], "controller": True, "blockOwnerDeletion": False,
    }]
    assert run["spec"]["args"] == [
        {"name": "service-name", "value": "web.shop.svc"},
        {"name": "threshold", "value": "0.95"},
    ]
    assert run["spec"]["metrics"] == TEMPLATE["spec"]["metrics"]
    assert run["spec"]["dryRun"] == [{"metricName": "success-rate"}]
    cond = ready.condition()
    assert (cond["status"], cond["reason"]) == ("Unknown", "Running")


def test_successful_run_verifies_the_freight(ready: Cluster):
    ready.freight("f2")
    ready.promote(STAGE, "f1", "f2")
    run = ready.wait_run()
    assert run["metadata"]["annotations"]["rollgate.dev/freight"] == "f1,f2"
    ready.set_run_phase(run["metadata"]["name"], "Successful")
    v = ready.wait_phase("Successful")
    for name in ("f1", "f2"):
        assert "verifiedAt" in ready.verified_in(name)[STAGE]
    cond = ready.condition()
    stage = ready.get("stage", STAGE)
    assert (cond["status"], cond["reason"]) == ("True", "Verified")
    assert cond["observedGeneration"] == stage["metadata"]["generation"]
    assert v["analysisRun"] == {"name": run["metadata"]["name"], "namespace": ready.ns,
                                "phase": "Successful"}
    assert v["freight"] == ["f1", "f2"] and v["attempt"] == 1
    assert v["startTime"] and v["finishTime"]
    assert stage["status"]["verificationHistory"][0]["id"] == v["id"]
    wait_for("a VerificationSucceeded event", lambda: ready.events("VerificationSucceeded"))


@pytest.mark.parametrize(
    ("run_phase", "status", "reason"),
    [("Failed", "False", "VerificationFailed"),
     ("Error", "False", "VerificationError"),
     ("Inconclusive", "Unknown", "Inconclusive")],
)
def test_unsuccessful_runs_are_recorded(ready: Cluster, run_phase, status, reason):
    ready.promote(STAGE, "f1")
    run = ready.wait_run()
    ready.set_run_phase(run["metadata"]["name"], run_phase, message="metric success-rate: 0.5")
    v = ready.wait_phase(run_phase)
    assert "metric success-rate: 0.5" in v["message"]
    cond = ready.condition()
    assert (cond["status"], cond["reason"]) == (status, reason)
    # No verifiedIn check here: f1 was never verified, so its absence proves nothing;
    # the reverify test checks that a failed re-verification removes the Stage.
    event_reason = {"Failed": "VerificationFailed", "Error": "VerificationError",
                    "Inconclusive": "VerificationInconclusive"}[run_phase]
    events = wait_for(f"a {event_reason} event", lambda: ready.events(event_reason))
    assert events[0]["type"] == "Warning"


# --- the gate --------------------------------------------------------------------------


def test_unhealthy_application_holds_the_run_back(cluster: Cluster, reconciler):
    cluster.apply(TEMPLATE)
    cluster.freight("f1")
    app = {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
           "metadata": {"name": "web"}, "spec": {},
           "status": {"health": {"status": "Progressing"}, "sync": {"status": "Synced"}}}
    cluster.apply(app)
    cluster.stage(spec_extra={"promotionMechanisms": {
        "argoCDAppUpdates": [{"appName": "web", "appNamespace": cluster.ns}]}})
    cluster.promote(STAGE, "f1")
    v = wait_for("a Pending verification naming the application", lambda: (
        lambda v: v if v.get("phase") == "Pending" and "web" in v.get("message", "") else None
    )(cluster.verification()))
    assert "health: Progressing" in v["message"]
    assert cluster.condition()["reason"] == "Pending"
    assert cluster.runs() == []
    cluster.patch("application", "web", {"status": {"health": {"status": "Healthy"}}})
    cluster.wait_run()
    cluster.wait_phase("Running")


def test_running_promotion_holds_the_run_back(cluster: Cluster, reconciler):
    cluster.apply(TEMPLATE)
    cluster.freight("f1")
    cluster.stage()
    cluster.promote(STAGE, "f1", extra_status={"currentPromotion": {"name": "promo-1"}})
    wait_for("a Pending verification naming the promotion",
             lambda: "promo-1" in cluster.verification().get("message", ""))
    assert cluster.runs() == []
    cluster.patch("stage", STAGE, {"status": {"currentPromotion": None}}, status=True)
    cluster.wait_run()


# --- reverify and abort ------------------------------------------------------------------


def test_reverify_creates_attempt_two_and_a_failed_reverification_unverifies(ready: Cluster):
    ready.promote(STAGE, "f1")
    first = ready.wait_run()
    ready.set_run_phase(first["metadata"]["name"], "Successful")
    ready.wait_phase("Successful")
    assert STAGE in ready.verified_in("f1")

    ready.annotate(STAGE, "kargo.akuity.io/reverify")
    second = ready.wait_run(attempt=2)
    assert second["metadata"]["name"].endswith(".2")
    ready.wait_phase("Running", attempt=2)
    wait_for("the reverify annotation to be removed", lambda: "kargo.akuity.io/reverify" not in (
        ready.get("stage", STAGE)["metadata"].get("annotations") or {}))
    assert len(ready.runs()) == 2

    ready.set_run_phase(second["metadata"]["name"], "Failed")
    ready.wait_phase("Failed", attempt=2)
    wait_for("f1 to lose its verification in the Stage",
             lambda: STAGE not in ready.verified_in("f1"))
    history = ready.get("stage", STAGE)["status"]["verificationHistory"]
    assert [(h["attempt"], h["phase"]) for h in history] == [(2, "Failed"), (1, "Successful")]


def test_abort_terminates_the_run_and_records_aborted(ready: Cluster):
    ready.promote(STAGE, "f1")
    run = ready.wait_run()
    ready.wait_phase("Running")
    ready.annotate(STAGE, "kargo.akuity.io/abort")
    v = ready.wait_phase("Aborted")
    assert "abort" in v["message"]
    assert ready.get("analysisrun", run["metadata"]["name"])["spec"]["terminate"] is True
    cond = ready.condition()
    assert (cond["status"], cond["reason"]) == ("False", "VerificationAborted")
    wait_for("the abort annotation to be removed", lambda: "kargo.akuity.io/abort" not in (
        ready.get("stage", STAGE)["metadata"].get("annotations") or {}))


def test_missing_template_is_an_error_until_created_and_reverified(cluster: Cluster,
                                                                   reconciler):
    cluster.freight("f1")
    cluster.stage()
    cluster.promote(STAGE, "f1")
    v = cluster.wait_phase("Error")
    assert "success-rate" in v["message"] and "not found" in v["message"]
    assert (cluster.condition()["status"], cluster.condition()["reason"]) == (
        "False", "VerificationError")
    assert cluster.runs() == []
    cluster.apply(TEMPLATE)
    cluster.annotate(STAGE, "kargo.akuity.io/reverify")
    run = cluster.wait_run(attempt=2)
    cluster.set_run_phase(run["metadata"]["name"], "Successful")
    cluster.wait_phase("Successful", attempt=2)
    assert STAGE in cluster.verified_in("f1")


def test_invalid_stanza_that_predates_the_webhook_is_an_error_naming_the_field(
    control_plane: controlplane.ControlPlane, cluster: Cluster, reconciler
):
    cluster.apply(TEMPLATE)
    cluster.freight("f1")
    control_plane.unregister_webhooks()
    try:
        cluster.stage(args=[{"name": "service-name", "value": 8080}])
    finally:
        control_plane.register_webhooks()
    cluster.promote(STAGE, "f1")
    v = cluster.wait_phase("Error")
    assert "spec.analysis.args[0].value" in v["message"]
    assert cluster.runs() == []


# --- clean-up ------------------------------------------------------------------------------


def test_deleting_the_stage_removes_its_runs_and_verified_in(ready: Cluster):
    ready.stage("qa")
    ready.promote(STAGE, "f1")
    ready.promote("qa", "f1")
    for stage in (STAGE, "qa"):
        run = ready.wait_run(stage=stage)
        ready.set_run_phase(run["metadata"]["name"], "Successful")
        ready.wait_phase("Successful", stage=stage)
    assert set(ready.verified_in("f1")) == {STAGE, "qa"}
    # Take the garbage collector out of the picture: a run without an owner reference
    # is deleted only if rollgate itself finds it (by its labels) and deletes it.
    ours = [r["metadata"]["name"] for r in ready.runs()
            if r["metadata"]["labels"]["kargo.akuity.io/stage"] == STAGE]
    assert len(ours) == 1
    ready.kubectl("patch", "analysisrun", ours[0], "-n", ready.ns, "--type=json",
                  "-p", '[{"op": "remove", "path": "/metadata/ownerReferences"}]')
    assert not (ready.get("analysisrun", ours[0]) or {})["metadata"].get("ownerReferences")
    ready.kubectl("delete", "stage", STAGE, "-n", ready.ns)
    wait_for("the Stage's runs to be deleted", lambda: all(
        r["metadata"]["labels"]["kargo.akuity.io/stage"] != STAGE for r in ready.runs()))
    assert ready.get("analysisrun", ours[0]) is None
    wait_for("verifiedIn to lose the deleted Stage",
             lambda: set(ready.verified_in("f1")) == {"qa"})


def test_stage_deleted_while_no_reconciler_ran_is_cleaned_up_at_start(
    control_plane: controlplane.ControlPlane, cluster: Cluster
):
    cluster.apply(TEMPLATE)
    cluster.freight("f1")
    cluster.stage()
    proc = start(control_plane, cluster.ns, "--no-leader-elect")
    try:
        cluster.promote(STAGE, "f1")
        run = cluster.wait_run()
        cluster.set_run_phase(run["metadata"]["name"], "Successful")
        cluster.wait_phase("Successful")
        wait_for("f1 to be verified in the Stage", lambda: STAGE in cluster.verified_in("f1"))
    finally:
        proc.stop()
    cluster.kubectl("delete", "stage", STAGE, "-n", cluster.ns)
    assert STAGE in cluster.verified_in("f1")  # nobody was there to see the delete
    proc = start(control_plane, cluster.ns, "--no-leader-elect")
    try:
        wait_for("verifiedIn to lose the deleted Stage",
                 lambda: STAGE not in cluster.verified_in("f1"))
    finally:
        proc.stop()


# --- crash safety and leader election ------------------------------------------------------


def test_run_created_before_a_crash_is_adopted_not_duplicated(
    control_plane: controlplane.ControlPlane, cluster: Cluster
):
    """The state a crash between "create run" and "write status" leaves behind."""
    cluster.apply(TEMPLATE)
    cluster.freight("f1")
    cluster.stage()
    cluster.promote(STAGE, "f1")
    stage = cluster.get("stage", STAGE)
    template = cluster.get("analysistemplate", "success-rate")
    run = build_analysis_run(stage, lambda kind, ns, name: template, freight=["f1"])
    cluster.kubectl("create", "-f", "-", input=json.dumps(run))
    proc = start(control_plane, cluster.ns, "--no-leader-elect")
    try:
        v = cluster.wait_phase("Running")
        assert v["id"] == run["metadata"]["name"]
        assert len(cluster.runs()) == 1
        cluster.set_run_phase(run["metadata"]["name"], "Successful")
        cluster.wait_phase("Successful")
        assert len(cluster.runs()) == 1
    finally:
        proc.stop()


def test_sigkill_after_run_creation_then_restart_gives_one_run(
    control_plane: controlplane.ControlPlane, cluster: Cluster
):
    """A reconciler killed with SIGKILL after it created the run, then restarted.

    The kill lands after the run exists, but whether it lands before the Stage status
    names the run is not guaranteed: the reconciler may already have written it. So this
    test may exercise either state; the "run exists, status does not name it" state is
    covered deterministically by test_run_created_before_a_crash_is_adopted_not_duplicated.
    """
    cluster.apply(TEMPLATE)
    cluster.freight("f1")
    cluster.stage()
    proc = start(control_plane, cluster.ns, "--no-leader-elect", name="reconciler-crash")
    try:
        cluster.promote(STAGE, "f1")
        run = cluster.wait_run()
        proc.kill(signal.SIGKILL)  # right after it created the run, status maybe unwritten
        proc.popen.wait(10)
    finally:
        proc.stop()
    proc = start(control_plane, cluster.ns, "--no-leader-elect", name="reconciler-crash-2")
    try:
        cluster.wait_phase("Running")
        cluster.set_run_phase(run["metadata"]["name"], "Successful")
        cluster.wait_phase("Successful")
        assert [r["metadata"]["name"] for r in cluster.runs()] == [run["metadata"]["name"]]
        assert STAGE in cluster.verified_in("f1")
    finally:
        proc.stop()


def test_adopting_a_run_with_foreign_labels_is_an_error(
    control_plane: controlplane.ControlPlane, cluster: Cluster
):
    cluster.apply(TEMPLATE)
    cluster.freight("f1")
    cluster.stage()
    name = f"{STAGE}.{freight_collection_id(['f1'])[:7]}.1"
    cluster.apply({"apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisRun",
                   "metadata": {"name": name, "labels": {"owner": "someone-else"}},
                   "spec": {"metrics": []}})
    proc = start(control_plane, cluster.ns, "--no-leader-elect")
    try:
        cluster.promote(STAGE, "f1")
        v = cluster.wait_phase("Error")
        assert name in v["message"] and "not created by rollgate" in v["message"]
    finally:
        proc.stop()


def _metric(url: str, name: str) -> float:
    body = urllib.request.urlopen(url + "/metrics", timeout=5).read().decode()
    total = 0.0
    for line in body.splitlines():
        if line.startswith(name):
            total += float(line.rsplit(" ", 1)[1])
    return total


def _lease_holder(plane: controlplane.ControlPlane) -> str | None:
    out = plane.kubectl("get", "lease", "rollgate-reconciler", "-n", "rollgate-system",
                        "-o", "jsonpath={.spec.holderIdentity}", check=False)
    return out.stdout.strip() or None if out.returncode == 0 else None


def test_two_reconcilers_only_the_leader_acts_and_the_standby_takes_over(
    control_plane: controlplane.ControlPlane, cluster: Cluster
):
    cluster.apply(TEMPLATE)
    cluster.freight("f1", "f2")
    cluster.stage()
    cluster.stage("qa")
    args = ("--leader-elect", "--lease-duration", "4")
    first = start(control_plane, cluster.ns, *args, "--identity", "replica-a", name="replica-a")
    try:
        wait_for("replica-a to lead", lambda: _lease_holder(control_plane) == "replica-a")
        second = start(control_plane, cluster.ns, *args, "--identity", "replica-b",
                       name="replica-b")
        try:
            cluster.promote(STAGE, "f1")
            run = cluster.wait_run()
            cluster.set_run_phase(run["metadata"]["name"], "Successful")
            cluster.wait_phase("Successful")
            assert len(cluster.runs()) == 1
            assert _lease_holder(control_plane) == "replica-a"
            # The standby is ready (a probe must not restart it) but has done nothing.
            assert _metric(second.url, "rollgate_reconciler_reconcile_total") == 0
            assert _metric(second.url, "rollgate_reconciler_leader ") == 0
            assert _metric(first.url, "rollgate_reconciler_reconcile_total") > 0

            first.kill(signal.SIGKILL)
            wait_for("replica-b to take the lease",
                     lambda: _lease_holder(control_plane) == "replica-b")
            cluster.promote("qa", "f2")
            run = cluster.wait_run(stage="qa")
            cluster.set_run_phase(run["metadata"]["name"], "Successful")
            cluster.wait_phase("Successful", stage="qa")
            assert _metric(second.url, "rollgate_reconciler_reconcile_total") > 0
        finally:
            second.stop()
        # SIGTERM released the lease (holderIdentity cleared) for the next leader.
        assert _lease_holder(control_plane) is None
    finally:
        first.stop()


# --- least privilege ------------------------------------------------------------------------


def test_reconciler_verification_rbac_allows_only_what_it_uses(
    control_plane: controlplane.ControlPlane, namespace: str
) -> None:
    """What the stage-verification controller may do, asked as its ServiceAccount.

    The rules are the union of every role bound to the ServiceAccount, so a "no" also
    proves no other role of the reconciler grants it.
    """
    sa = control_plane.serviceaccount_kubeconfig("rollgate-system", "rollgate-reconciler")

    def can_i(verb: str, what: str, *extra: str, ns: str = namespace) -> bool:
        out = control_plane.kubectl("auth", "can-i", verb, what, "-n", ns, *extra,
                                    kubeconfig=sa, check=False)
        return out.stdout.strip() == "yes"

    # What the controller does (reconciler/controllers/stage_verification.py).
    for verb, what in [
        ("list", "stages.kargo.akuity.io"), ("watch", "stages.kargo.akuity.io"),
        ("patch", "stages.kargo.akuity.io"),  # pin / remove reverify and abort annotations
        ("list", "freights.kargo.akuity.io"),
        ("create", "analysisruns.argoproj.io"), ("get", "analysisruns.argoproj.io"),
        ("patch", "analysisruns.argoproj.io"), ("delete", "analysisruns.argoproj.io"),
        ("list", "analysistemplates.argoproj.io"),
        ("list", "clusteranalysistemplates.argoproj.io"),
        ("list", "applications.argoproj.io"),
        ("create", "events"),
    ]:
        assert can_i(verb, what), f"{verb} {what}"
    assert can_i("update", "stages.kargo.akuity.io", "--subresource=status")
    assert can_i("patch", "freights.kargo.akuity.io", "--subresource=status")

    # What it must not do.
    for verb, what in [
        ("delete", "stages.kargo.akuity.io"), ("update", "stages.kargo.akuity.io"),
        ("create", "stages.kargo.akuity.io"),
        ("patch", "freights.kargo.akuity.io"), ("delete", "freights.kargo.akuity.io"),
        ("update", "analysisruns.argoproj.io"),
        ("create", "analysistemplates.argoproj.io"),
        ("patch", "applications.argoproj.io"),
        ("patch", "events"), ("update", "events"), ("delete", "events"),
        ("get", "secrets"), ("update", "secrets"),
        ("patch", "configmap/some-config"),
    ]:
        assert not can_i(verb, what), f"{verb} {what}"
    assert not can_i("patch", "stages.kargo.akuity.io", "--subresource=status")
    assert not can_i("update", "freights.kargo.akuity.io", "--subresource=status")
    # Leader election: its own Lease only (create cannot be limited by name).
    assert can_i("update", "lease/rollgate-reconciler", ns="rollgate-system")
    assert not can_i("update", "lease/other", ns="rollgate-system")
    assert not can_i("create", "leases.coordination.k8s.io")
