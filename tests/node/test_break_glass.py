"""Break glass (docs/install.md "When the webhook is down") for the outage it exists for:
rollgate's image cannot be pulled, so the webhook pods cannot start and the fail-closed
webhook refuses every Stage create.

The outage is made as a registry outage makes it: the image leaves the node's containerd
(the pods ask for it with ``imagePullPolicy: Never``: ``ErrImageNeverPull``) and the
webhook pods are replaced; nothing of the install changes. Then every documented break
glass command runs as the page writes it (in ``bash``, the same flags; the Helm chart is
the directory the release was installed from instead of ``oci://...``), for Helm (its
value, and kubectl's ``delete`` undone by Helm and the renewal) and for kustomize, with the
install's ``ca.crt`` and without it: an invalid Stage is allowed within 60 s (the time
printed), no hook Job is created, and the configurations are as installed but for
``failurePolicy``. With the image back, the documented undo leaves the
webhook configurations (failurePolicy, rules, caBundle) and both Deployments' pod
templates (a kustomize image override included) exactly as installed, and rollgate
denies the invalid Stage again.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import chart
from harness.kits.node import (
    NAMESPACE,
    WEBHOOK,
    Kustomized,
    Release,
    create_invalid,
    denied_by_rollgate,
    image_values,
    pods,
    wait_ready,
)
from harness.kits.polling import Poller
from harness.node.cluster import NodeCluster
from harness.plane import ControlPlane
from testkit.waits import WaitTimeout, wait_for

VALIDATING = "validatingwebhookconfiguration"
MUTATING = "mutatingwebhookconfiguration"
DEPLOYMENTS = ("rollgate-webhook", "rollgate-reconciler")
PATCH = """kubectl patch validatingwebhookconfiguration rollgate --type=json -p '[
  {"op":"replace","path":"/webhooks/0/failurePolicy","value":"Ignore"},
  {"op":"replace","path":"/webhooks/1/failurePolicy","value":"Ignore"}]'"""
DELETE = "kubectl delete validatingwebhookconfiguration rollgate"
CA_FROM_MUTATING = ("kubectl get mutatingwebhookconfiguration rollgate -o jsonpath="
                    "'{.webhooks[0].clientConfig.caBundle}' | base64 -d > ca.crt\n"
                    "rollgate certs inject --ca-file ca.crt")


@dataclass(frozen=True)
class Shell:
    """``bash`` as a user's terminal: kubectl, helm and rollgate on ``PATH``, the node in
    ``KUBECONFIG``, helm's home the release's, in a directory of its own."""

    plane: ControlPlane
    cwd: Path

    def __call__(self, script: str) -> str:
        env = chart.cluster_env(self.plane.kubeconfig, self.plane.root / "helm")
        env["PATH"] = os.pathsep.join([str(self.plane.binaries.kubectl.parent),
                                       str(chart.helm_binary().parent),
                                       str(Path(sys.executable).parent), env["PATH"]])
        out = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=self.cwd,
                             env=env, capture_output=True, text=True, timeout=300,
                             check=False)
        assert out.returncode == 0, f"{script}\nfailed ({out.returncode}):\n{out.stderr}"
        return out.stdout


@dataclass
class HookJobs(Poller):
    """Jobs a Helm hook made in the release namespace, by name, while watched."""

    plane: ControlPlane
    seen: set[str] = field(default_factory=set)

    def poll_once(self) -> None:
        out = self.plane.kubectl("get", "jobs", "-n", NAMESPACE, "-o", "json", check=False,
                                 timeout=10)
        if out.returncode == 0:
            self.seen |= {j["metadata"]["name"] for j in json.loads(out.stdout)["items"]
                          if "helm.sh/hook" in (j["metadata"].get("annotations") or {})}


def installed(plane: ControlPlane) -> dict[str, Any]:
    """What the undo must restore: both configurations' webhooks (failurePolicy, rules,
    matchConditions, caBundle...) and both Deployments' pod templates (the image)."""
    return {"webhooks": {kind: plane.get_json(kind, "rollgate")["webhooks"]
                         for kind in (VALIDATING, MUTATING)},
            "templates": {name: plane.get_json("-n", NAMESPACE, "deployment", name)[
                "spec"]["template"] for name in DEPLOYMENTS}}


def broken_glass(before: dict[str, Any]) -> dict[str, Any]:
    """The install with the validating webhooks' failurePolicy Ignore, nothing else."""
    after = copy.deepcopy(before)
    for webhook in after["webhooks"][VALIDATING]:
        webhook["failurePolicy"] = "Ignore"
    return after


def not_pulled(pod: dict[str, Any]) -> bool:
    return any(c.get("state", {}).get("waiting", {}).get("reason") == "ErrImageNeverPull"
               for c in pod.get("status", {}).get("containerStatuses") or [])


@contextmanager
def image_gone(node: NodeCluster, namespace: str) -> Iterator[None]:
    """rollgate's image gone from the node and the webhook pods replaced: no pod can
    start, Stage creates are refused (fail closed). Afterwards the image is back and
    the stuck pods are replaced (not left to kubelet's back-off)."""
    plane = node.plane
    node.remove_image(node.images.rollgate)
    try:
        plane.kubectl("delete", "pods", "-n", NAMESPACE, "-l", WEBHOOK, "--wait=false")
        wait_for("new webhook pods that cannot get the image", lambda: (
            (found := pods(plane, NAMESPACE, WEBHOOK)) and all(map(not_pulled, found))),
            timeout=120)
        wait_for("Stage creates refused (the webhook fails closed)", lambda: (
            "failed calling webhook" in create_invalid(plane, namespace).stderr), timeout=60)
        yield
    finally:
        node.import_image(node.images.rollgate)
    plane.kubectl("delete", "pods", "-n", NAMESPACE, "-l", WEBHOOK, "--wait=false")
    wait_ready(plane, NAMESPACE, selector=WEBHOOK, count=2)


def break_glass(shell: Shell, script: str, *, name: str, namespace: str) -> float:
    """Run the documented commands; the seconds until an invalid Stage is allowed."""
    started = time.monotonic()
    shell(script)
    wait_for("the invalid Stage allowed (break glass)", lambda: create_invalid(
        shell.plane, namespace).returncode == 0, timeout=60, interval=0.5)
    seconds = round(time.monotonic() - started, 1)
    print(f"break glass ({name}): writes allowed after {seconds} s")
    return seconds


def test_helm_break_glass_when_the_image_cannot_be_pulled(node: NodeCluster, namespace: str,
                                                          tmp_path: Path) -> None:
    """`helm upgrade --no-hooks -f <the release's values> --set
    webhook.failurePolicy=Ignore`, undone by the same upgrade without the `--set`; then
    `kubectl delete` of the validating configuration (the break glass where the chart
    cannot be reached), undone by that upgrade and the renewal run now for the CA."""
    plane = node.plane
    rel = Release(node)
    rel.install(image_values(node.images.rollgate))
    shell = Shell(plane, tmp_path)
    keep = "helm get values rollgate -n rollgate-system -o yaml > rollgate-values.yaml"
    upgrade = (f"helm upgrade rollgate {chart.CHART} -n rollgate-system --no-hooks "
               "-f rollgate-values.yaml")
    renew = ("kubectl -n rollgate-system create job --from=cronjob/rollgate-certs-renew "
             "rollgate-certs-renew-manual-$(date +%s)")
    try:
        denied_by_rollgate(plane, namespace)
        before = installed(plane)
        values = rel.helm("get", "values", "rollgate", "-n", NAMESPACE, "-o", "json").stdout
        manifest = rel.helm("get", "manifest", "rollgate", "-n", NAMESPACE).stdout
        with HookJobs(plane) as jobs:
            with image_gone(node, namespace):
                break_glass(shell, f"{keep}\n{upgrade} --set webhook.failurePolicy=Ignore",
                            name="helm upgrade --no-hooks", namespace=namespace)
                assert installed(plane) == broken_glass(before), "only failurePolicy changed"
            shell(upgrade)
            assert installed(plane) == before
            with image_gone(node, namespace):
                break_glass(shell, f"{keep}\n{DELETE}", name="Helm, kubectl delete",
                            namespace=namespace)
            shell(f"{upgrade}\n{renew}")
            try:
                wait_for("the renewal to put the CA back", lambda: installed(plane) == before,
                         timeout=120)
            except WaitTimeout:
                assert installed(plane) == before  # shows what differs
        assert jobs.seen == set(), "a hook Job ran"
        assert rel.helm("get", "values", "rollgate", "-n", NAMESPACE, "-o",
                        "json").stdout == values
        assert rel.helm("get", "manifest", "rollgate", "-n", NAMESPACE).stdout == manifest
        denied_by_rollgate(plane, namespace)
    finally:
        rel.uninstall()


def test_kustomize_break_glass_when_the_image_cannot_be_pulled(
        node: NodeCluster, namespace: str, tmp_path: Path) -> None:
    """The user's overlay (its own image) installed as "Deployment" says; `kubectl patch`
    undone with the install's `certs-out/ca.crt`, then `kubectl delete` undone without
    it (the CA read from the mutating configuration): `kubectl apply -k <the overlay>`."""
    plane = node.plane
    install = Kustomized(node, tmp_path)  # certs-out is tmp_path / "certs-out"
    shell = Shell(plane, tmp_path)
    apply = f"kubectl apply -k {install.overlay}"
    install.install()
    try:
        denied_by_rollgate(plane, namespace)
        before = installed(plane)
        for glass, undo in ((PATCH, "rollgate certs inject --ca-file certs-out/ca.crt"),
                            (DELETE, CA_FROM_MUTATING)):
            with image_gone(node, namespace):
                break_glass(shell, glass, name=glass.split(" -p")[0], namespace=namespace)
                if glass == PATCH:
                    assert installed(plane) == broken_glass(before), "only failurePolicy"
            shell(f"{apply}\n{undo}")
            assert installed(plane) == before
            denied_by_rollgate(plane, namespace)
    finally:
        install.uninstall()
