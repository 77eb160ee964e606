"""The job source's certificates renewed in the cluster as the chart runs it (docs/install.md
"Certificate renewal"): the CronJob ``rollgate-certs-renew`` every minute, a serving
certificate of 6 minutes and a CA of 10, under a steady stream of admission calls. Serving
certificates are re-issued, and the CA ages into its rotation, through the kubelet's
refresh of the webhook pods' Secret volume; no call fails and no webhook pod restarts or
is replaced. (The rotation of a CA whose key was lost runs the same steps after another
first reason: tests/e2e/install/test_chart.py.)"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
from cryptography import x509

from harness.kits.node import NAMESPACE, WEBHOOK, Release, image_values, pods, restarts
from harness.kits.plane import ca_bundles
from harness.kits.stream import streaming
from harness.node.cluster import NodeCluster
from harness.plane import ControlPlane
from testkit.denials import EXAMPLES

# Certificates are back-dated 5 minutes (clock skew). The CA spans 15 minutes and is due
# 5 minutes after the install; a serving certificate spans 11 at most (it is cut at the
# CA's end) and is due 2-3 minutes after it was issued, so it has 3 minutes or more left
# for the kubelet to refresh the pods' Secret volume, the CA rotation included: the first
# leaf of the new CA is issued the minute after the CA, the old leaf lasts until 9.
VALUES = {"certificates": {"source": "job", "job": {
    "lifetime": "6m", "caLifetime": "10m", "renewSchedule": "* * * * *"}}}
ROTATION_TIMEOUT = 15 * 60  # a wait, not an assertion on speed


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

    def rotated(self, plane: ControlPlane) -> bool:
        """A second CA came, and is now the only one every caBundle holds."""
        if len(self.cas) < 2:
            return False
        return ca_bundles(plane) == {base64.b64encode(self.cas[-1]).decode()}


@pytest.fixture
def release(node: NodeCluster) -> Iterator[Release]:
    rel = Release(node)
    rel.install({**image_values(node.images.rollgate), **VALUES})
    try:
        yield rel
    finally:
        rel.uninstall()


def test_renewals_and_a_ca_rotation_fail_no_call(release: Release, namespace: str) -> None:
    plane = release.plane
    plane.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "analysistemplate.yaml"))
    before = {p["metadata"]["name"] for p in pods(plane, NAMESPACE, WEBHOOK)}
    seen = Seen()
    with streaming(plane, namespace) as stream:
        seen.poll(plane)
        deadline = time.monotonic() + ROTATION_TIMEOUT
        while not (seen.rotated(plane) and len(seen.serving) >= 3):
            assert time.monotonic() < deadline, (
                f"no CA rotation and 2 renewals in {ROTATION_TIMEOUT} s: {seen}\n"
                + plane.kubectl("get", "jobs", "-n", NAMESPACE).stdout)
            seen.poll(plane)
            time.sleep(5)
        # A minute more: calls made after the old CA left the bundles.
        time.sleep(60)
    totals = stream.totals
    print(f"{totals.answered} calls answered, {totals.failed} failed; "
          f"{len(seen.cas)} CAs, {len(seen.serving)} serving certificates, "
          f"bundle sizes {sorted(seen.bundle_sizes)}")
    assert totals.failed == 0, "\n".join(totals.errors)
    assert totals.answered > 0
    assert seen.bundle_sizes == {1, 2}  # the new CA joined before the old one left
    after = pods(plane, NAMESPACE, WEBHOOK)
    assert {p["metadata"]["name"] for p in after} == before
    assert all(restarts(p) == 0 for p in after), [restarts(p) for p in after]
    jobs = json.loads(plane.kubectl("get", "jobs", "-n", NAMESPACE, "-o", "json").stdout)
    failed = [j["metadata"]["name"] for j in jobs["items"] if j["status"].get("failed")]
    assert failed == [], failed
