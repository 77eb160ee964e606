"""rollgate in the cluster shapes its users have (docs/install.md, "Which cluster you
have"), one after the other on the session's node, rollgate installed once by its chart
with its defaults (plus the plugins CA, as docs/plugins.md tells users of a private CA):

(d) rollgate installed first, with no upstream CRD served; then the CRDs are created;
(a) Kargo (its controller and webhooks as its chart registers them) with Argo Rollouts
    from argo-helm's chart: no argo-rollouts-manager, no RolloutManager CRD;
(c) both: argo-rollouts-manager next to Kargo;
(b) argo-rollouts-manager without Kargo (no Kargo CRD).

In each: every rollgate pod Ready with no readiness or liveness failure after its first
Ready, the reconciler restarted as ``kubectl rollout restart`` does, ``helm test``
passing (a check skipped only for a kind that is not served), and each feature the
shape has working end to end. The upstreams and CRDs are put back as the session had
them when the module ends.

Resource names such as ``stages.kargo.akuity.io`` are spelled as users type them to
kubectl, not built from schemas.kinds. Readiness texts are spelled as users read them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness.kits import rollouts_pods as argo
from harness.kits import shapes
from harness.kits.kargo import KargoProject, running_kargo
from harness.kits.node import (
    NAMESPACE,
    RECONCILER,
    ReadyWatch,
    Release,
    delete_namespace,
    probe_failures,
    restarts,
    wait_ready,
)
from harness.kits.verification import MetricServer, metric_server, verdict_template
from harness.node import images
from harness.node.cluster import NodeCluster
from harness.process import ManagedProcess
from harness.upstream import argo_helm, kargo
from harness.upstream import operator as rollouts_manager
from testkit import objects
from testkit.prometheus_stub import PrometheusStub
from testkit.skew import (
    PLUGIN_FIELD,
    PLUGIN_VALUE,
    VERIFICATION_FIELD,
    VERIFICATION_VALUE,
    next_minor,
)
from testkit.waits import wait_for

ARGO_NAMESPACE = "argo-rollouts"
KARGO_PROJECT = "shapes-kargo"
OPERATOR_NAMESPACE = "shapes-operator"
PLUGIN_PATH = "/releases/v1/metrics-plugin-sample"
PLUGIN_PATH_V2 = "/releases/v2/metrics-plugin-sample"


@dataclass
class Shapes:
    """What the module installed, for the tests and the clean-up."""

    node: NodeCluster
    crds: shapes.ServedCrds
    release: Release
    watch: ReadyWatch
    metrics: MetricServer
    plugins: argo.SamplePlugins
    prometheus: PrometheusStub
    kargo: ExitStack = field(default_factory=ExitStack)  # Kargo's processes, while they run
    project: KargoProject | None = None
    operator: ManagedProcess | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def plane(self) -> Any:
        return self.node.plane


@pytest.fixture(scope="module")
def cluster(node: NodeCluster, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[Shapes]:
    crds = shapes.ServedCrds(node.plane)
    crds.remove(crds.upstream())
    sample = argo.serve_sample_plugin(node, tmp_path_factory.mktemp("plugins"),
                                      (PLUGIN_PATH, PLUGIN_PATH_V2))
    with metric_server(node.settings.address) as metrics, \
            PrometheusStub("0.99", host=node.settings.address) as prometheus, \
            ReadyWatch(node.plane, NAMESPACE) as watch:
        state = Shapes(node, crds, argo.install_rollgate(node), watch, metrics, sample,
                       prometheus)
        try:
            yield state
        finally:
            clean_up(state)
            sample.server.stop()


def clean_up(state: Shapes) -> None:
    """Everything the module made goes, in the order that lets each go (namespaces while
    the controllers that finalize their objects still run); the CRDs come back."""
    state.release.uninstall()
    left = state.plane.kubectl("get", "pods,serviceaccounts,roles,rolebindings,namespaces",
                               "-A", "-l", "app.kubernetes.io/name=rollgate-selftest",
                               "-o", "name").stdout.split()
    delete_namespace(state.plane, OPERATOR_NAMESPACE)
    state.kargo.close()  # deletes the Kargo Project first, while Kargo runs
    if state.operator is not None:
        rollouts_manager.stop(state.plane, state.operator)
    argo_helm.uninstall(state.plane, ARGO_NAMESPACE)
    delete_namespace(state.plane, ARGO_NAMESPACE)
    state.crds.restore(state.crds.snapshot)
    print("shape timings:", json.dumps(state.timings))
    assert left == [], f"helm test left objects behind after helm uninstall: {left}"


def pods_healthy(state: Shapes) -> None:
    """Every rollgate pod Ready, none restarted, no probe failure after its first Ready."""
    found = state.release.wait_pods()
    assert [restarts(p) for p in found] == [0] * len(found), found
    failures = probe_failures(state.plane, NAMESPACE, state.watch.first_ready,
                              state.watch.stopping)
    assert failures.after_ready == [], failures.after_ready
    if failures.while_stopping:  # a pod being replaced, already out of the endpoints
        print("probe failures of pods being deleted:", failures.while_stopping)


def restart_reconciler(state: Shapes) -> float:
    """``kubectl rollout restart`` of the reconciler, as a user does; seconds until the
    rollout completed."""
    started = time.monotonic()
    state.plane.kubectl("rollout", "restart", "-n", NAMESPACE, "deploy/rollgate-reconciler")
    state.plane.kubectl("rollout", "status", "-n", NAMESPACE, "deploy/rollgate-reconciler",
                        "--timeout=120s", timeout=150)
    wait_ready(state.plane, NAMESPACE, selector=RECONCILER, count=2)
    return round(time.monotonic() - started, 1)


def helm_test(state: Shapes, expected: dict[str, str]) -> None:
    out = state.release.test()
    shown = out.stdout + out.stderr
    assert out.returncode == 0, shown
    assert shapes.selftest_verdicts(shown) == expected, shown


def waiting_for(state: Shapes, controller: str, crd: str) -> bool:
    return shapes.leader_metric(state.plane, "rollgate_reconciler_crd_waiting",
                                controller=controller, crd=crd) == 1


SKIPPED_STAGE = {check: "SKIP" for check in shapes.STAGE_CHECKS}
PASSED_STAGE = {check: "PASS" for check in shapes.STAGE_CHECKS}


def test_d_rollgate_installed_before_the_upstream_crds(cluster: Shapes) -> None:
    pods_healthy(cluster)
    assert shapes.leader_readiness(cluster.plane) == (
        "ok; waiting for CRDs: stage-verification (stages.kargo.akuity.io, "
        "freights.kargo.akuity.io, analysisruns.argoproj.io); "
        f"rollout-plugins ({shapes.ROLLOUT_MANAGERS})")
    helm_test(cluster, {**SKIPPED_STAGE, shapes.ROLLOUT_MANAGER_CHECK: "SKIP"})
    cluster.crds.restore(cluster.crds.upstream())
    served = time.monotonic()  # discovery lists every upstream CRD
    wait_for("both controllers to start",
             lambda: shapes.leader_readiness(cluster.plane) == "ok", timeout=60)
    cluster.timings["d: controllers started after the CRDs were served"] = round(
        time.monotonic() - served, 1)
    logs = shapes.reconciler_logs(cluster.plane)
    assert logs.count("CRDs served, starting the controller") == 2, logs
    pods_healthy(cluster)
    helm_test(cluster, {**PASSED_STAGE, shapes.ROLLOUT_MANAGER_CHECK: "PASS"})


def test_a_kargo_with_argo_rollouts_from_argo_helm(cluster: Shapes) -> None:
    plane = cluster.plane
    cluster.crds.remove([shapes.ROLLOUT_MANAGERS])
    argo_helm.install_crds(plane, argo.upstream_crds())
    argo_helm.install(plane, ARGO_NAMESPACE, argo_helm.values(cluster.node.images.rollouts))
    cluster.kargo.enter_context(running_kargo(plane, name="kargo-shapes", webhooks=True))
    cluster.timings["a: reconciler rollout restart"] = restart_reconciler(cluster)
    pods_healthy(cluster)
    assert waiting_for(cluster, "rollout-plugins", shapes.ROLLOUT_MANAGERS)
    helm_test(cluster, {**PASSED_STAGE, shapes.ROLLOUT_MANAGER_CHECK: "SKIP"})

    project = KargoProject(plane, kargo.create_project(plane, KARGO_PROJECT))
    cluster.project = project
    project.apply(verdict_template(cluster.metrics.url))
    project.freight("a1", "a2")
    project.stage("uat")
    verified_and_observed(cluster, "a1")
    pods_healthy(cluster)


def verified_and_observed(cluster: Shapes, alias: str) -> None:
    """Kargo promotes ``alias`` into Stage uat and its one-shot verification succeeds
    (Argo Rollouts' pods run the AnalysisRun); rollgate's leader counts it (observe mode).
    Kargo records the success at once or, when the run finished before Kargo's own write
    of the entry reached its cache, only at its 5-minute requeue: then rollgate reports
    VerificationNotRecorded naming the run (docs/verification.md), which is what this
    shape's user sees instead (the chart's defaults set no --refresh-lagging), and rollgate
    counts the verification once Kargo has finished its entry."""
    project = cluster.project
    assert project is not None
    before = shapes.leader_metric(cluster.plane, "rollgate_verifications_finished_total",
                                  phase="Successful")
    project.promote("uat", alias)
    project.wait_promoted("uat", alias)

    def recorded() -> str | None:
        entries = project.history("uat")
        run = (entries[0].get("analysisRun") or {}).get("name") if entries else None
        if entries and entries[0].get("phase") == "Successful":
            return "Kargo recorded Successful"
        return "rollgate reported Kargo's lag" if run and any(  # run names are unique
            run in e.get("message", "") for e in project.events("VerificationNotRecorded")
        ) else None

    outcome = wait_for(f"Kargo's record of {alias}'s verification, or rollgate's report "
                       "that Kargo lags", recorded, timeout=90)
    print(f"{alias}: {outcome}")
    if outcome.startswith("Kargo"):  # rollgate counts the entries Kargo finished
        wait_for("rollgate to count the verification", lambda: shapes.leader_metric(
            cluster.plane, "rollgate_verifications_finished_total", phase="Successful")
            > before)


def test_c_kargo_and_argo_rollouts_manager(cluster: Shapes) -> None:
    plane = cluster.plane
    cluster.crds.restore([shapes.ROLLOUT_MANAGERS])
    # The operator's Argo Rollouts replaces argo-helm's in this cluster.
    argo_helm.uninstall(plane, ARGO_NAMESPACE)
    cluster.operator = rollouts_manager.start(
        plane, name="argo-rollouts-manager-shapes",
        openshift_plugin=f"file://{images.IMAGE_SAMPLE_PLUGIN}")
    wait_for("the plugins controller", lambda: not waiting_for(
        cluster, "rollout-plugins", shapes.ROLLOUT_MANAGERS), timeout=30)
    helm_test(cluster, {**PASSED_STAGE, shapes.ROLLOUT_MANAGER_CHECK: "PASS"})
    # The operator's Argo Rollouts in the Project's namespace runs Kargo's AnalysisRuns
    # there and loads the plugin of its RolloutManager.
    space = operator_namespace(cluster, KARGO_PROJECT, PLUGIN_PATH)
    assert_loaded(cluster, space, PLUGIN_PATH)
    verified_and_observed(cluster, "a2")
    pods_healthy(cluster)


def test_an_upstream_upgraded_before_rollgate(cluster: Shapes) -> None:
    """Kargo's and the operator's next minor served (one new optional field each,
    testkit.skew): rollgate's pods allow what the API server accepts, with the warning
    that names the field and rollgate's versions, and the stored objects keep it."""
    plane = cluster.plane
    names = ["stages.kargo.akuity.io", shapes.ROLLOUT_MANAGERS]
    before = {n: cluster.crds.snapshot[n] for n in names}
    cluster.crds.replace([next_minor(before[n]) for n in names])
    try:
        stage = objects.stage("skewed", namespace=KARGO_PROJECT, warehouse="w",
                              verification=objects.verification("verdict"))
        stage["spec"]["verification"][VERIFICATION_FIELD] = VERIFICATION_VALUE
        out = plane.kubectl("apply", "-f", "-", input=json.dumps(stage))
        assert (f"spec.verification.{VERIFICATION_FIELD}: field not known to rollgate "
                "(rollgate checks Stages as Kargo v1.11.2 defines them)") in out.stderr, out
        stored = plane.get_json("-n", KARGO_PROJECT, "stage", "skewed")
        assert stored["spec"]["verification"][VERIFICATION_FIELD] == VERIFICATION_VALUE
        # Not namespace-scoped: the operator refuses it and makes nothing.
        rm = objects.rollout_manager("skewed", namespace=KARGO_PROJECT, metric=[
            {**plugin(cluster, PLUGIN_PATH), PLUGIN_FIELD: PLUGIN_VALUE}])
        out = plane.kubectl("apply", "-f", "-", input=json.dumps(rm))
        assert f"spec.plugins.metric[0].{PLUGIN_FIELD}: field not known" in out.stderr, out
        [entry] = plane.get_json("-n", KARGO_PROJECT, "rolloutmanager", "skewed")[
            "spec"]["plugins"]["metric"]
        assert entry[PLUGIN_FIELD] == PLUGIN_VALUE
    finally:
        plane.kubectl("delete", "-n", KARGO_PROJECT, "stage", "skewed", "--ignore-not-found")
        plane.kubectl("delete", "-n", KARGO_PROJECT, "rolloutmanager", "skewed",
                      "--ignore-not-found")
        cluster.crds.replace(list(before.values()))
    pods_healthy(cluster)


def test_b_argo_rollouts_manager_without_kargo(cluster: Shapes) -> None:
    plane = cluster.plane
    kargo.delete_project(plane, KARGO_PROJECT)
    cluster.kargo.close()
    cluster.crds.remove(shapes.kargo_crds(cluster.crds.names()))
    cluster.timings["b: reconciler rollout restart"] = restart_reconciler(cluster)
    pods_healthy(cluster)
    assert waiting_for(cluster, "stage-verification", "stages.kargo.akuity.io")
    helm_test(cluster, {**SKIPPED_STAGE, shapes.ROLLOUT_MANAGER_CHECK: "PASS"})
    space = operator_namespace(cluster, OPERATOR_NAMESPACE, PLUGIN_PATH_V2)
    assert_loaded(cluster, space, PLUGIN_PATH_V2)
    pods_healthy(cluster)


# --------------------------------------------------------------------------- plugins


def plugin(cluster: Shapes, path: str) -> dict[str, Any]:
    return {"name": argo.SAMPLE_PLUGIN, "location": cluster.plugins.server.url(path),
            "sha256": cluster.plugins.digest}


def operator_spec(cluster: Shapes) -> dict[str, Any]:
    image = cluster.node.images.rollouts
    return {"namespaceScoped": True, "image": image.repository, "version": image.tag,
            "imagePullPolicy": "Never"}


def operator_namespace(cluster: Shapes, name: str, path: str) -> argo.ArgoNamespace:
    """A namespace-scoped RolloutManager with the sample plugin at ``path`` in namespace
    ``name`` (created when missing), and the operator's Deployment there."""
    cluster.plane.create_namespace(name)
    space = argo.ArgoNamespace(cluster.plane, name)
    space.apply_rm({"metric": [plugin(cluster, path)]}, **operator_spec(cluster))
    wait_for("the operator's argo-rollouts Deployment", lambda: cluster.plane.kubectl(
        "get", "deployment", argo.DEPLOYMENT, "-n", name, check=False).returncode == 0)
    return space


def assert_loaded(cluster: Shapes, space: argo.ArgoNamespace, path: str) -> None:
    """A Ready pod of the operator's downloaded the plugin; an AnalysisRun measured by it
    succeeds; rollgate audited (auto mode) and wrote nothing there."""
    location = cluster.plugins.server.url(path)

    def loaded() -> bool:
        ready = [p for p in space.pods() if all(
            c.get("ready") for c in p.get("status", {}).get("containerStatuses") or [{}])]
        return any(argo.DOWNLOADING.format(name=argo.SAMPLE_PLUGIN, location=location)
                   in log for log in space.logs(ready).values())

    wait_for("a Ready Argo Rollouts pod that loaded the plugin", loaded, timeout=240)
    run = space.analysis_run(f"shapes-{len(space.uids())}-{int(time.time())}",
                             cluster.prometheus.url)
    assert run["status"]["phase"] == "Successful", run["status"]
    assert shapes.leader_metric(cluster.plane, "rollgate_plugins_mode",
                                namespace=space.namespace, mode="audit") == 1
    for kind, name in (("configmap", argo.CONFIG_MAP), ("deployment", argo.DEPLOYMENT)):
        obj = cluster.plane.get_json("-n", space.namespace, kind, name,
                                     "--show-managed-fields")
        managers = {m.get("manager") for m in obj["metadata"].get("managedFields") or []}
        assert "rollgate" not in managers, (kind, managers)
