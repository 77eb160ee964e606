"""The job source's certificates renewed in the cluster as the chart and manifests/ run them
(docs/install.md "Certificate renewal"): the CronJob ``rollgate-certs-renew`` every minute
and a serving certificate of 6 minutes, under a steady stream of admission calls, for a
Helm install (`certificates.source=job`) and a kustomize one (the steps of
docs/install.md "Deployment", an overlay setting the lifetimes and the schedule). Serving
certificates are re-issued through the kubelet's refresh of the webhook pods' Secret
volume; no call fails and no webhook pod restarts or is replaced. The CronJob is one
object in both installs (tests/e2e/install/test_chart.py), so the CA's rotation, the
longest wait here, is run once, on the kustomize install (a CA of 10 minutes ages into
it); the Helm install's CA of an hour stays. (The rotation of a CA whose key was lost
runs the same steps after another first reason: tests/e2e/install/test_chart.py.) On the
kustomize install, renewal then breaks and is repaired as docs/operating.md
"RollgateWebhookCertificateRenewalOverdue" says."""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import yaml
from cryptography import x509

from harness.kits.node import (
    NAMESPACE,
    RENEW_CRONJOB,
    WEBHOOK,
    Kustomized,
    Release,
    image_values,
    pods,
    renew_now,
    restarts,
)
from harness.kits.plane import ca_bundles
from harness.kits.stream import streaming
from harness.node.cluster import NodeCluster
from harness.plane import ControlPlane
from testkit.denials import EXAMPLES
from testkit.paths import REPO_ROOT
from testkit.waits import wait_for

# Certificates are back-dated 5 minutes (clock skew). The CA spans 15 minutes and is due
# 5 minutes after the install; a serving certificate spans 11 at most (it is cut at the
# CA's end) and is due 2-3 minutes after it was issued, so it has 3 minutes or more left
# for the kubelet to refresh the pods' Secret volume, the CA rotation included: the first
# leaf of the new CA is issued the minute after the CA, the old leaf lasts until 9.
LIFETIME, CA_LIFETIME, SCHEDULE = "6m", "10m", "* * * * *"
# The Helm install's CA outlives the test: its serving certificate is renewed by the CA
# the pre-install hook made.
VALUES = {"certificates": {"source": "job", "job": {
    "lifetime": LIFETIME, "caLifetime": "1h", "renewSchedule": SCHEDULE}}}
ROTATION_TIMEOUT = 15 * 60  # a wait, not an assertion on speed
SERVING = "rollgate-webhook-tls"


@dataclass
class Seen:
    """What the test saw change, polled every few seconds."""

    cas: list[bytes] = field(default_factory=list)  # each CA Secret's ca.crt, in order
    serving: list[bytes] = field(default_factory=list)  # each serving tls.crt, in order
    bundle_sizes: set[int] = field(default_factory=set)

    def poll(self, plane: ControlPlane) -> None:
        for name, key, into in (("rollgate-webhook-ca", "ca.crt", self.cas),
                                ("rollgate-webhook-tls", "tls.crt", self.serving)):
            secret = plane.get_json("-n", NAMESPACE, "secret", name)
            value = base64.b64decode(secret["data"][key])
            if not into or into[-1] != value:
                into.append(value)
        # The two configurations are patched one after the other: each bundle counts.
        self.bundle_sizes |= {len(x509.load_pem_x509_certificates(base64.b64decode(bundle)))
                              for bundle in ca_bundles(plane)}

    def done(self, plane: ControlPlane, *, rotation: bool) -> bool:
        """Two renewals of the serving certificate, and with ``rotation`` a second CA
        that is now the only one every caBundle holds."""
        if len(self.serving) < 3:
            return False
        if not rotation:
            return True
        if len(self.cas) < 2:
            return False
        return ca_bundles(plane) == {base64.b64encode(self.cas[-1]).decode()}


def short_lifetimes() -> list[dict[str, Any]]:
    """The kustomize overlay's patches of the CronJob: VALUES' schedule, and its
    `rollgate certs renew` with VALUES' lifetimes instead of the manifest's."""
    cronjob = yaml.safe_load((REPO_ROOT / "manifests" / "certificates" / "cronjob.yaml")
                             .read_text())
    (script,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0][
        "args"]
    shipped = "--lifetime 8760h --ca-lifetime 43800h"
    assert shipped in script, script
    short = script.replace(shipped, f"--lifetime {LIFETIME} --ca-lifetime {CA_LIFETIME}")
    return [{"target": {"kind": "CronJob", "name": RENEW_CRONJOB}, "patch": json.dumps([
        {"op": "replace", "path": "/spec/schedule", "value": SCHEDULE},
        {"op": "replace", "path": "/spec/jobTemplate/spec/template/spec/containers/0/args/0",
         "value": short}])}]


@pytest.fixture(scope="module")
def installed(request: pytest.FixtureRequest, node: NodeCluster,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[Release | Kustomized]:
    """rollgate with the short lifetimes, by ``request.param``: `helm` or `kustomize`."""
    install: Release | Kustomized
    if request.param == "helm":
        install = Release(node)
        install.install({**image_values(node.images.rollgate), **VALUES})
    else:
        install = Kustomized(node, tmp_path_factory.mktemp("kustomize"),
                             patches=short_lifetimes(),
                             generate_args=("--lifetime", LIFETIME, "--ca-lifetime", CA_LIFETIME))
        install.install()
    try:
        yield install
    finally:
        install.uninstall()


@pytest.mark.parametrize("installed", ["helm", "kustomize"], indirect=True)
def test_renewals_fail_no_call(installed: Release | Kustomized, namespace: str) -> None:
    """Two serving renewals on either install; on the kustomize one a CA rotation too."""
    plane = installed.plane
    rotation = isinstance(installed, Kustomized)
    plane.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "analysistemplate.yaml"))
    before = {p["metadata"]["name"] for p in pods(plane, NAMESPACE, WEBHOOK)}
    seen = Seen()
    with streaming(plane, namespace) as stream:
        seen.poll(plane)
        deadline = time.monotonic() + ROTATION_TIMEOUT
        while not seen.done(plane, rotation=rotation):
            assert time.monotonic() < deadline, (
                f"not done in {ROTATION_TIMEOUT} s (rotation: {rotation}): {seen}\n"
                + plane.kubectl("get", "jobs", "-n", NAMESPACE).stdout)
            seen.poll(plane)
            time.sleep(5)
        # Half a minute more of the stream: calls made after the last
        # renewal (the old CA gone from the bundles) reached the pods.
        time.sleep(30)
    totals = stream.totals
    print(f"{totals.answered} calls answered, {totals.failed} failed; "
          f"{len(seen.cas)} CAs, {len(seen.serving)} serving certificates, "
          f"bundle sizes {sorted(seen.bundle_sizes)}")
    assert totals.failed == 0, "\n".join(totals.errors)
    assert totals.answered > 0
    # With a rotation the new CA joined before the old one left; without, one CA stayed.
    assert seen.bundle_sizes == ({1, 2} if rotation else {1})
    assert len(seen.cas) >= 2 if rotation else len(seen.cas) == 1
    after = pods(plane, NAMESPACE, WEBHOOK)
    assert {p["metadata"]["name"] for p in after} == before
    assert all(restarts(p) == 0 for p in after), [restarts(p) for p in after]
    assert failed_jobs(plane) == []


def failed_jobs(plane: ControlPlane) -> list[str]:
    """The renewal Jobs that failed (their Failed condition: out of retries)."""
    jobs = json.loads(plane.kubectl("get", "jobs", "-n", NAMESPACE, "-o", "json").stdout)
    return [j["metadata"]["name"] for j in jobs["items"]
            if any(c["type"] == "Failed" and c["status"] == "True"
                   for c in j["status"].get("conditions") or [])]


def serving(plane: ControlPlane) -> x509.Certificate:
    secret = plane.get_json("-n", NAMESPACE, "secret", SERVING)
    return x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))


def overdue(cert: x509.Certificate) -> bool:
    """Past its renewal point (two thirds of its lifetime), where
    RollgateWebhookCertificateRenewalOverdue starts counting."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return dt.datetime.now(dt.UTC) > start + (end - start) * 2 / 3


def runbook_renewal(plane: ControlPlane, *, timeout: float = 300) -> list[str]:
    """docs/operating.md's `kubectl create job --from=cronjob/rollgate-certs-renew` and
    its logs, again until a run prints `nothing to do`; each run's log."""
    logs: list[str] = []
    deadline = time.monotonic() + timeout
    while not logs or "nothing to do" not in logs[-1]:
        assert time.monotonic() < deadline, "\n---\n".join(logs)
        logs.append(renew_now(plane, f"{RENEW_CRONJOB}-manual-{int(time.time())}"))
        time.sleep(2)
    return logs


@pytest.mark.parametrize("installed", ["kustomize"], indirect=True)
def test_the_runbook_repairs_a_failing_renewal(installed: Kustomized, namespace: str) -> None:
    """RollgateWebhookCertificateRenewalOverdue's runbook, on the install above: the
    renewal's Role loses `get` on the Secrets, so every run fails; once the certificate is
    past its renewal point, the failed Job is there with the pod of each attempt and
    their logs say why; `kubectl apply -k` restores the RBAC and the runbook's
    `kubectl create job --from=cronjob/...` renews the certificate. No call fails."""
    plane = installed.plane
    plane.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "analysistemplate.yaml"))
    with streaming(plane, namespace) as stream:
        # Broken just after a renewal, so the certificate lasts through the outage.
        first = serving(plane)
        wait_for("a renewal", lambda: serving(plane) != first, timeout=300, interval=2)
        broken = serving(plane)
        plane.kubectl("-n", NAMESPACE, "patch", "role", RENEW_CRONJOB, "--type=json", "-p",
                      json.dumps([{"op": "replace", "path": "/rules/0/verbs",
                                   "value": ["update"]}]))
        (job, *_) = wait_for("a failed renewal Job", lambda: failed_jobs(plane), timeout=240,
                            interval=2)
        wait_for("the certificate past its renewal point", lambda: overdue(serving(plane)),
                 timeout=240, interval=2)
        assert serving(plane) == broken
        attempts = pods(plane, NAMESPACE, f"job-name={job}")
        log = plane.kubectl("-n", NAMESPACE, "logs", f"job/{job}", "--all-pods").stdout
        installed.apply()
        logs = runbook_renewal(plane)
        renewed = serving(plane)
    totals = stream.totals
    print(f"failed Job {job}: {len(attempts)} pods, log:\n{log}\nrunbook runs:\n"
          + "\n---\n".join(logs) + f"\n{totals.answered} calls answered, {totals.failed} failed")
    assert len(attempts) == 4  # backoffLimit 3, restartPolicy Never: each attempt's pod
    assert "403" in log and "forbidden" in log, log
    assert renewed != broken and not overdue(renewed)
    assert totals.failed == 0, "\n".join(totals.errors)
    assert totals.answered > 0
