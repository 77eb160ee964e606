"""The webhook's start checks leave a Warning Event on its Pod (docs/install.md "Certificates"),
written with the webhook's own ServiceAccount and RBAC (manifests/webhook): a key that is
not the certificate's stops the start with ``InvalidCertificate``; an expired certificate
is served, with ``CertificateExpired``. The Pod is the one the downward API names."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import certs
from certs import pki
from harness.host_rollgate import WEBHOOK_SA, HostRollgate
from harness.plane import ControlPlane
from testkit.paths import REPO_ROOT
from testkit.waits import wait_for

NAMESPACE = "rollgate-system"


def _pod_env(plane: ControlPlane, pod: str) -> dict[str, str]:
    return plane.child_env(PYTHONPATH=str(REPO_ROOT), POD_NAME=pod, POD_NAMESPACE=NAMESPACE,
                           POD_UID="0a1b2c3d-0000-4000-8000-000000000001")


def _events(plane: ControlPlane, pod: str) -> list[dict[str, Any]]:
    out = plane.kubectl("get", "events", "-n", NAMESPACE, "-o", "json",
                        f"--field-selector=involvedObject.name={pod}")
    items: list[dict[str, Any]] = json.loads(out.stdout)["items"]
    return items


def _webhook(plane: ControlPlane, cert: Path, key: Path) -> list[str]:
    kubeconfig = plane.serviceaccount_kubeconfig(NAMESPACE, WEBHOOK_SA)
    return [sys.executable, "-m", "webhook", "--bind", "127.0.0.1:0", "--kubeconfig",
            str(kubeconfig), "--tls-cert-file", str(cert), "--tls-key-file", str(key)]


def test_a_key_of_another_certificate_is_an_event_on_the_pod(
        rollgate: HostRollgate, tmp_path: Path) -> None:
    plane = rollgate.plane
    first = certs.generate(tmp_path / "first")
    second = certs.generate(tmp_path / "second")
    result = subprocess.run(_webhook(plane, first.tls_cert, second.tls_key), cwd=REPO_ROOT,
                            env=_pod_env(plane, "rollgate-webhook-mismatch"),
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    (event,) = _events(plane, "rollgate-webhook-mismatch")
    assert (event["type"], event["reason"]) == ("Warning", "InvalidCertificate")
    assert event["involvedObject"]["kind"] == "Pod"
    assert f"{first.tls_cert}, {second.tls_key}: the key is not the certificate's" in (
        event["message"])
    assert event["source"]["component"] == "rollgate-webhook"


def test_an_expired_certificate_is_served_with_an_event_on_the_pod(
        rollgate: HostRollgate, tmp_path: Path) -> None:
    plane = rollgate.plane
    past = dt.datetime.now(dt.UTC) - dt.timedelta(days=40)
    ca, ca_key = pki.build_ca(common_name="old CA", lifetime=dt.timedelta(days=30), now=past)
    cert, key = pki.issue_certificate(ca, ca_key, common_name="rollgate-webhook",
                                      sans=["localhost"], server=True,
                                      lifetime=dt.timedelta(days=30), now=past)
    (tmp_path / "tls.crt").write_bytes(pki.cert_pem(cert))
    (tmp_path / "tls.key").write_bytes(pki.key_pem(key))
    proc = subprocess.Popen(_webhook(plane, tmp_path / "tls.crt", tmp_path / "tls.key"),
                            cwd=REPO_ROOT, env=_pod_env(plane, "rollgate-webhook-expired"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        (event,) = wait_for("the CertificateExpired Event",
                            lambda: _events(plane, "rollgate-webhook-expired"), timeout=60)
        assert proc.poll() is None, "an expired certificate is served, not a failed start"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert (event["type"], event["reason"]) == ("Warning", "CertificateExpired")
    assert "the serving certificate has expired" in event["message"]
    assert cert.not_valid_after_utc.isoformat() in event["message"]
