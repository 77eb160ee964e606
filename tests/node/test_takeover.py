"""The leader reconciler pod's process SIGKILLed (as the OOM killer or a node failure ends
it: no Lease release; `kubectl delete pod` would let it release the Lease on SIGTERM)
while promotions are being verified: the other pod takes the Lease when it expires and
carries on, and the invariants the fault suites
use (testkit.invariants) find no duplicated, lost or left-running run and no lost
verifiedIn. The takeover time is printed (docs/benchmarks.md records it); no timing is
asserted.
"""

from __future__ import annotations

import random
import time
import urllib.request
from collections.abc import Iterator

import pytest

from harness.kits.kargo import KargoProject, running_kargo, sample_sum, slow_stage_status
from harness.kits.node import NAMESPACE, RECONCILER, Release, image_values, merged, wait_ready
from harness.kits.verification import metric_server, verdict_template
from harness.node import containerd
from harness.node.cluster import NodeCluster
from harness.plane import ControlPlane
from harness.upstream import rollouts
from schemas.constants import LABEL_STAGE
from testkit import invariants
from testkit.waits import wait_for
from tests.faults import suites as fault_suites

STAGES = ["s0", "s1", "s2", "s3"]
LEASE = "rollgate-reconciler"


# Function-scoped: one release at a time (each test's is uninstalled before the next
# installs under the same name; a module-scoped fixture would live until the module ends).
@pytest.fixture
def engine(node: NodeCluster) -> Iterator[Release]:
    """rollgate installed in engine mode (it verifies: no Kargo controller runs here)."""
    rel = Release(node)
    rel.install(merged(image_values(node.images.rollgate),
                       {"reconciler": {"stageVerification": "engine"}}))
    try:
        yield rel
    finally:
        rel.uninstall()


def lease_holder(plane: ControlPlane) -> str:
    """The pod whose reconciler holds the Lease (identity ``<pod>_<pid>``), or ""."""
    lease = plane.get_json("-n", NAMESPACE, "lease", LEASE)
    return str(lease.get("spec", {}).get("holderIdentity") or "").rsplit("_", 1)[0]


def kill(node: NodeCluster, pod: str) -> None:
    """SIGKILL the pod's process through containerd, then remove the pod at once, as a
    lost node does: kubelet does not restart it (a restarted container, with the same
    pod name and PID 1, would take its own Lease back), the ReplicaSet replaces it."""
    status = node.plane.get_json("-n", NAMESPACE, "pod", pod)["status"]
    container = status["containerStatuses"][0]["containerID"].removeprefix("containerd://")
    containerd.ctr(node.settings, "tasks", "kill", "--signal", "SIGKILL", container)
    node.plane.kubectl("delete", "pod", "-n", NAMESPACE, pod, "--force", "--grace-period=0",
                       "--wait=false")


def test_engine_mode_survives_the_leader_pod_killed(engine: Release, namespace: str) -> None:
    plane = engine.plane
    wait_ready(plane, NAMESPACE, selector=RECONCILER, count=2)
    rng = random.Random(fault_suites.SEED)
    api = fault_suites.setup_namespace(plane, namespace, [*STAGES, "canary"])
    probe = fault_suites.Probe(api)
    leader = wait_for("a reconciler pod to lead", lambda: lease_holder(plane))
    probe()  # the leader verifies before anything is killed
    driver = fault_suites.Driver(api, STAGES, rng)
    driver.start()
    try:
        time.sleep(rng.uniform(3, 8))  # in the middle of promotions and runs
        killed = time.monotonic()
        kill(engine.cluster, leader)
        successor = wait_for("another pod to take the Lease", lambda: (
            holder if (holder := lease_holder(plane)) not in ("", leader) else None),
            timeout=120)
        to_lease = time.monotonic() - killed
        to_run = probe() + to_lease
        driver.stop()
        states = fault_suites.settle(api, driver)
    finally:
        driver.stop()
    print(f"engine mode: leader {leader} killed; {successor} held the Lease after "
          f"{to_lease:.1f}s, verified a new promotion {to_run:.1f}s after the kill "
          f"({driver.promotions} promotions)")
    fault_suites.check(f"leader pod killed ({driver.promotions} promotions)", states,
                       {"kill -> Lease": [to_lease], "kill -> new run": [to_run]})
    wait_ready(plane, NAMESPACE, selector=RECONCILER, count=2)


@pytest.fixture
def observe(node: NodeCluster) -> Iterator[Release]:
    """rollgate installed as in production (observe mode: Kargo verifies), reporting a
    verification Kargo has not recorded 2 s after its run finished."""
    rel = Release(node)
    rel.install(merged(image_values(node.images.rollgate),
                       {"reconciler": {"observeLagSeconds": 2}}))
    try:
        yield rel
    finally:
        rel.uninstall()


def pod_metrics(plane: ControlPlane, pod: str) -> str:
    address = plane.get_json("-n", NAMESPACE, "pod", pod)["status"]["podIP"]
    with urllib.request.urlopen(f"http://{address}:8080/metrics", timeout=5) as resp:
        return str(resp.read().decode())


def test_observe_mode_reports_what_kargo_missed_across_a_takeover(
        observe: Release, namespace: str) -> None:
    """The real Kargo verifies (and misses a run's end: its entry's status write is held
    3 s, so a one-shot run finishes before Kargo's cache has the entry) while rollgate's
    leader is killed; the pod that takes over reports the miss (VerificationNotRecorded),
    and Kargo's own verifications went on meanwhile."""
    plane = observe.plane
    wait_ready(plane, NAMESPACE, selector=RECONCILER, count=2)
    with metric_server() as metrics, running_kargo(plane, name="kargo-takeover"):
        rollouts_proc = rollouts.run_on(plane, name="rollouts-takeover")
        try:
            project = KargoProject.labelled(plane, namespace)
            project.apply(verdict_template(metrics.url))
            # Two 4 s measurements: Kargo's own entry write reaches its cache before the
            # run ends, so Kargo records these verifications at once (it lags on the
            # one-shot template the "lag" Stage uses, which is what rollgate reports).
            project.apply(verdict_template(metrics.url, name="two-step", count=2,
                                           interval="4s"))
            project.freight("a1", "a2")
            project.stage("steady", templates=("two-step",))
            project.stage("lag")
            project.promote_and_verify("steady", "a1")
            leader = wait_for("a reconciler pod to lead", lambda: lease_holder(plane))
            with slow_stage_status(plane, namespace, seconds=3, only=("lag",)) as held:
                killed = time.monotonic()
                kill(observe.cluster, leader)
                project.promote("lag", "a1")
                project.wait_promoted("lag", "a1")
                project.promote_and_verify("steady", "a2")  # Kargo goes on meanwhile
                successor = wait_for("another pod to take the Lease", lambda: (
                    holder if (holder := lease_holder(plane)) not in ("", leader) else None),
                    timeout=120)
                found = wait_for("VerificationNotRecorded from the new leader", lambda:
                                 project.events("VerificationNotRecorded"), timeout=120)
                reported = time.monotonic() - killed
            assert "lag" in held
            run = project.history("lag")[0]["analysisRun"]["name"]
            assert found[0]["type"] == "Warning" and run in found[0]["message"], found
            anomalies = sample_sum(pod_metrics(plane, successor),
                                   "rollgate_verification_anomalies_total",
                                   kind="VerificationNotRecorded")
            assert anomalies == 1
            snapshot = {kind: project.items(kind) for kind in
                        ("stages", "analysisruns", "freights")}
        finally:
            plane.stop_process(rollouts_proc)
    steady = [s for s in snapshot["stages"] if s["metadata"]["name"] == "steady"]
    runs = [r for r in snapshot["analysisruns"]
            if r["metadata"].get("labels", {}).get(LABEL_STAGE) == "steady"]
    defects = invariants.defects(stages=steady, runs=runs, freight=snapshot["freights"])
    assert defects.total == 0, vars(defects)
    assert project.history("steady")[0]["phase"] == "Successful"
    print(f"observe mode: leader {leader} killed; {successor} reported Kargo's miss "
          f"{reported:.1f}s after the kill")
