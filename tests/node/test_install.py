"""rollgate installed as users install it, on the node: the chart with each certificate
source (`job`, `cert-manager` with the real cert-manager, `secret`) and the production
kustomization (`kubectl apply -k`), from the image the Dockerfile builds.

Each install is checked as a user would: every pod Ready with 0 restarts; no readiness
or liveness probe failure (start-up probe failures, before a pod is first Ready, are
printed, not failed on); the invalid examples denied through the Service with every
field path their comments promise; a valid object mutated; `kubectl rollgate explain`
answering; and after the uninstall, Stage writes accepted at once.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from harness import chart, crds
from harness.kits.node import (
    NAMESPACE,
    RECONCILER,
    WEBHOOK,
    Kustomized,
    ReadyWatch,
    Release,
    image_values,
    merged,
    pods,
    probe_failures,
    restarts,
    wait_ready,
)
from harness.node.cluster import NodeCluster
from harness.plane import ControlPlane, PlaneError
from harness.upstream import cert_manager
from harness.upstream.trees import UpstreamMissing
from releasing import release as harness_release
from testkit import objects
from testkit.denials import EXAMPLES, assert_denied, documented_paths
from testkit.waits import wait_for

DIGEST_AS_WRITTEN = "  3A3E2D0E4AC4F1F7A3EE6D2E5D4D7C1E8C3B9F0A6E8D1C2B3A4F5E6D7C8B9A0F  "
INVALID = (("invalid/stage.yaml", "validate-stages.rollgate.dev"),
           ("invalid/rolloutmanager.yaml", "validate-rolloutmanagers.rollgate.dev"))


def release(node: NodeCluster) -> Release:
    return Release(node)


def base_values(node: NodeCluster) -> dict[str, object]:
    return image_values(node.images.rollgate)


def check_pods(plane: ControlPlane, namespace: str, watch: ReadyWatch) -> None:
    """2 webhook and 2 reconciler pods Ready, none restarted, no probe failure once Ready."""
    found = (wait_ready(plane, namespace, selector=WEBHOOK, count=2)
             + wait_ready(plane, namespace, selector=RECONCILER, count=2))
    assert {p["metadata"]["name"]: restarts(p) for p in found} == {
        p["metadata"]["name"]: 0 for p in found}
    failures = probe_failures(plane, namespace, watch.first_ready)
    for line in failures.at_start:
        print(f"probe failure before the pod was first Ready: {line}")
    assert not failures.after_ready, "\n".join(failures.after_ready)


def check_admission(plane: ControlPlane, namespace: str) -> None:
    """What `kubectl apply` shows a user, through the Service and the webhook pods."""
    for example, webhook in INVALID:
        path = EXAMPLES / example
        result = plane.kubectl("apply", "-n", namespace, "-f", str(path), check=False)
        assert_denied(result, webhook, documented_paths(path))
    defaulted = plane.kubectl("apply", "-n", namespace, "-f",
                              str(EXAMPLES / "defaulting" / "rolloutmanager.yaml"))
    assert defaulted.returncode == 0, defaulted.stderr
    stored = plane.get_json("-n", namespace, "rolloutmanager", "defaulted")
    assert stored["spec"]["plugins"]["metric"][0]["sha256"] == DIGEST_AS_WRITTEN.strip().lower()
    plane.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "analysistemplate.yaml"))
    valid = plane.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "stage-test.yaml"))
    assert valid.returncode == 0, valid.stderr


def check_explain(plane: ControlPlane, namespace: str) -> None:
    """`kubectl rollgate explain` against the installed release (the plugin on PATH)."""
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env["KUBECONFIG"] = str(plane.kubeconfig)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent),
                                   str(plane.binaries.kubectl.parent), env.get("PATH", "")])
    out = subprocess.run(["kubectl", "rollgate", "explain", "stage", "test", "-n", namespace],
                         env=env, capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert "test" in out.stdout, out.stdout


def check_writable_after_uninstall(plane: ControlPlane, namespace: str) -> None:
    """No webhook configuration is left pointing at a Service without pods: a Stage
    create right after the uninstall succeeds."""
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        left = plane.kubectl("get", kind, "rollgate", check=False)
        assert left.returncode != 0 and "NotFound" in left.stderr, left.stdout
    created = plane.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "stage-uat.yaml"))
    assert created.returncode == 0, created.stderr


def installed_and_checked(node: NodeCluster, namespace: str, watch: ReadyWatch) -> None:
    check_pods(node.plane, NAMESPACE, watch)
    check_admission(node.plane, namespace)
    check_explain(node.plane, namespace)


def test_helm_install_with_the_job_source(node: NodeCluster, namespace: str) -> None:
    rel = release(node)
    with ReadyWatch(node.plane, NAMESPACE) as watch:
        rel.install(merged(base_values(node), {"selftest": {"namespace": namespace}}))
    try:
        installed_and_checked(node, namespace, watch)
        check_helm_test(rel)
    finally:
        rel.uninstall()
    check_writable_after_uninstall(node.plane, namespace)


def check_helm_test(rel: Release) -> None:
    """`helm test` passes on the release; with rollgate's validating webhook
    configuration gone (a broken install), it fails and its pod says which check did."""
    passed = rel.test()
    shown = passed.stdout + passed.stderr
    assert passed.returncode == 0, shown
    for line in ("PASS an invalid Stage is denied by validate-stages.rollgate.dev",
                 "PASS an invalid RolloutManager is denied by "
                 "validate-rolloutmanagers.rollgate.dev",
                 "PASS a valid Stage is allowed", "3 of 3 checks passed"):
        assert line in shown, shown
    assert selftest_leftovers(rel.plane) == [], "helm test left objects behind"
    rel.plane.kubectl("delete", "validatingwebhookconfiguration", "rollgate")
    failed = rel.test()
    shown = failed.stdout + failed.stderr
    assert failed.returncode != 0, shown
    assert "FAIL an invalid Stage is denied: it was allowed" in shown, shown
    assert "1 of 3 checks passed" in shown, shown
    assert selftest_leftovers(rel.plane) == [], "a failed helm test left objects behind"


def selftest_leftovers(plane: ControlPlane) -> list[str]:
    """What ``helm test`` made and did not delete: anything labelled rollgate-selftest."""
    out = plane.kubectl("get", "pods,serviceaccounts,roles,rolebindings,namespaces", "-A",
                        "-l", "app.kubernetes.io/name=rollgate-selftest", "-o", "name")
    return out.stdout.split()


def backstop_objects(name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A Stage and a RolloutManager that break rules the admission policy states."""
    stage = objects.stage(name, verification=objects.verification("Success_Rate", "ok", "ok"))
    manager = objects.rollout_manager(name, metric=[
        {"name": "argoproj-labs/prom", "location": "http://plugins.example/prom",
         "sha256": "sha256:abc"}])
    return stage, manager


def test_the_admission_policy_backstops_a_webhook_that_is_down(node: NodeCluster,
                                                               namespace: str) -> None:
    """`webhook.failurePolicy=Ignore` with `admissionPolicy.enabled`, the webhook scaled
    to 0: invalid objects are still refused with their field paths, valid ones allowed,
    and objects from before the install keep losing their finalizers."""
    plane = node.plane
    old = backstop_objects("old")
    for obj in old:
        obj["metadata"]["finalizers"] = ["example.com/hold"]
        plane.kubectl("create", "-n", namespace, "-f", "-", input=json.dumps(obj))
    rel = release(node)
    rel.install(merged(base_values(node), {"webhook": {"failurePolicy": "Ignore"},
                                           "admissionPolicy": {"enabled": True}}))
    try:
        plane.kubectl("scale", "-n", NAMESPACE, "deployment", "rollgate-webhook",
                      "--replicas=0")
        wait_for("the webhook pods to be gone", lambda: not pods(plane, NAMESPACE, WEBHOOK),
                 timeout=120)
        stage, manager = backstop_objects("new")
        for obj, says in ((stage, ["spec.verification.analysisTemplates[0].name",
                                   "spec.verification.analysisTemplates[2]"]),
                          (manager, ["spec.plugins.metric[0].sha256",
                                     "spec.plugins.metric[0].location"])):
            refused = plane.kubectl("create", "-n", namespace, "-f", "-",
                                    input=json.dumps(obj), check=False)
            assert refused.returncode != 0 and "ValidatingAdmissionPolicy" in refused.stderr
            for path in says:
                assert path in refused.stderr, refused.stderr
        plane.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "stage-test.yaml"))
        plane.kubectl("apply", "-n", namespace, "-f",
                      str(EXAMPLES / "defaulting" / "rolloutmanager.yaml"))
        # Nothing normalised it (the mutating webhook was not reached): stored as written.
        stored = plane.get_json("-n", namespace, "rolloutmanager", "defaulted")
        assert stored["spec"]["plugins"]["metric"][0]["sha256"] == DIGEST_AS_WRITTEN
        for kind in ("stage", "rolloutmanager"):
            plane.kubectl("patch", "-n", namespace, kind, "old", "--type=json",
                          "-p", '[{"op": "remove", "path": "/metadata/finalizers"}]')
            plane.kubectl("delete", "-n", namespace, kind, "old", "--timeout=60s")
    finally:
        rel.uninstall()
    left = plane.kubectl("get", "validatingadmissionpolicy", "rollgate-stages", check=False)
    assert "NotFound" in left.stderr, left.stdout


def user_secret(plane: ControlPlane, tmp_path: Path) -> Path:
    """`rollgate certs generate`, and the Secret a user makes of it in the release
    namespace; the directory with the CA."""
    out_dir = tmp_path / "certs"
    subprocess.run([sys.executable, "-m", "certs", "generate", "--out-dir", str(out_dir)],
                   check=True, capture_output=True, timeout=60)
    plane.kubectl("create", "namespace", NAMESPACE)
    plane.kubectl("-n", NAMESPACE, "create", "secret", "tls", "rollgate-webhook-tls",
                  f"--cert={out_dir / 'tls.crt'}", f"--key={out_dir / 'tls.key'}")
    return out_dir


def test_helm_install_with_a_secret_of_the_user(node: NodeCluster, namespace: str,
                                                tmp_path: Path) -> None:
    """`certificates.source=secret`: a Secret made as `kubectl create secret tls` makes it
    (no ca.crt), and the caBundle given as a value (`rollgate certs bundle`); the chart
    as `make release` packages it, not the directory; OpenShift-style pod values (no
    fixed uid, gid or fsGroup: its restricted SCC assigns them), so the pods run as the
    image's own user."""
    plane = node.plane
    out_dir = user_secret(plane, tmp_path)
    bundle = base64.b64encode((out_dir / "ca.crt").read_bytes()).decode()
    package = harness_release.release(changelog=tmp_path / "CHANGELOG.md",
                                      out_dir=tmp_path / "dist", today=dt.date.today(),
                                      base=harness_release.STAND_IN).artifacts.chart
    rel = Release(node, chart_path=package)
    no_fixed_ids = {"podSecurityContext": {"runAsUser": None, "runAsGroup": None,
                                           "fsGroup": None}}
    with ReadyWatch(plane, NAMESPACE) as watch:
        rel.install(merged(base_values(node), {
            "certificates": {"source": "secret", "caBundle": bundle},
            "webhook": no_fixed_ids, "reconciler": no_fixed_ids}))
    try:
        installed_and_checked(node, namespace, watch)
        for pod in pods(plane, NAMESPACE):
            context = pod["spec"].get("securityContext", {})
            assert not {"runAsUser", "runAsGroup", "fsGroup"} & set(context), context
    finally:
        rel.uninstall()
    check_writable_after_uninstall(plane, namespace)


@pytest.fixture
def real_cert_manager(node: NodeCluster) -> None:
    """cert-manager's CRDs and the real controller and cainjector, on the node's plane."""
    try:
        cert_manager.binary(cert_manager.CONTROLLER)
        directory = chart.crd_dirs()[0]
    except (UpstreamMissing, chart.ChartToolMissing) as err:
        pytest.fail(str(err), pytrace=False)
    node.plane.install_crds(crds.from_dir(directory))
    try:
        cert_manager.start(node.plane)
    except PlaneError as err:
        pytest.fail(f"cert-manager did not start: {err}", pytrace=False)


@pytest.mark.usefixtures("real_cert_manager")
def test_helm_install_with_cert_manager(node: NodeCluster, namespace: str) -> None:
    rel = release(node)
    with ReadyWatch(node.plane, NAMESPACE) as watch:
        rel.install(merged(base_values(node), {"certificates": {"source": "cert-manager"}}))
    try:
        bundles = {w["clientConfig"].get("caBundle", "") for kind in (
            "validatingwebhookconfiguration", "mutatingwebhookconfiguration")
            for w in node.plane.get_json(kind, "rollgate")["webhooks"]}
        assert len(bundles) == 1 and "" not in bundles, "the cainjector filled in the CA"
        installed_and_checked(node, namespace, watch)
    finally:
        rel.uninstall()
    check_writable_after_uninstall(node.plane, namespace)


def test_kubectl_apply_of_the_production_kustomization(node: NodeCluster, namespace: str,
                                                       tmp_path: Path) -> None:
    """The kustomize steps of docs/install.md "Deployment" (and the README's), with the
    image set in an overlay as a user points the kustomization at their registry; the
    serving Secret carries the CA that the webhook's ServiceMonitor trusts."""
    plane = node.plane
    install = Kustomized(node, tmp_path)
    with ReadyWatch(plane, NAMESPACE) as watch:
        install.install()
    try:
        installed_and_checked(node, namespace, watch)
        secret = plane.get_json("-n", NAMESPACE, "secret", "rollgate-webhook-tls")
        assert base64.b64decode(secret["data"]["ca.crt"]) == (
            install.certs_dir / "ca.crt").read_bytes()
        plane.get_json("-n", NAMESPACE, "cronjob", "rollgate-certs-renew")
    finally:
        install.uninstall()
    check_writable_after_uninstall(plane, namespace)
