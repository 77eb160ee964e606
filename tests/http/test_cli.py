"""``python -m webhook`` refuses to start without its certificate files, with a message
instead of a gunicorn traceback."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

import certs
from certs import pki
from testkit.paths import REPO_ROOT


def test_missing_certificate_file_is_a_clear_error(tmp_path):
    missing = tmp_path / "tls.crt"
    result = subprocess.run(
        [sys.executable, "-m", "webhook", "--bind", "127.0.0.1:0",
         "--tls-cert-file", str(missing), "--tls-key-file", str(tmp_path / "tls.key")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert f"{missing}: no such file" in result.stderr
    assert "Traceback" not in result.stderr


def _start(tmp_path: Path, cert: Path, key: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webhook", "--bind", "127.0.0.1:0",
         "--tls-cert-file", str(cert), "--tls-key-file", str(key)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=60,
    )


def test_a_key_that_is_not_the_certificates_is_a_clear_error(tmp_path: Path) -> None:
    """Files of two generations (a half-updated Secret): refused at start, naming both."""
    first = certs.generate(tmp_path / "first")
    second = certs.generate(tmp_path / "second")
    result = _start(tmp_path, first.tls_cert, second.tls_key)
    assert result.returncode == 2
    assert "the key is not the certificate's" in result.stderr
    assert str(first.tls_cert) in result.stderr and str(second.tls_key) in result.stderr
    assert "Traceback" not in result.stderr


def test_a_file_that_is_not_pem_is_a_clear_error(tmp_path: Path) -> None:
    paths = certs.generate(tmp_path / "certs")
    (tmp_path / "garbage").write_text("not a certificate\n")
    result = _start(tmp_path, tmp_path / "garbage", paths.tls_key)
    assert result.returncode == 2
    assert "the certificate file holds no PEM certificate" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_expired_certificate_is_logged_and_served(tmp_path: Path) -> None:
    """Served (a renewed Secret is picked up without a restart), with an error line that
    says what the API server will do and when the certificate expired."""
    ca, ca_key = pki.build_ca(common_name="old CA", lifetime=dt.timedelta(days=30),
                              now=dt.datetime.now(dt.UTC) - dt.timedelta(days=40))
    cert, key = pki.issue_certificate(ca, ca_key, common_name="rollgate-webhook",
                                      sans=["localhost"], server=True,
                                      lifetime=dt.timedelta(days=30),
                                      now=dt.datetime.now(dt.UTC) - dt.timedelta(days=40))
    (tmp_path / "tls.crt").write_bytes(pki.cert_pem(cert))
    (tmp_path / "tls.key").write_bytes(pki.key_pem(key))
    proc = subprocess.Popen(
        [sys.executable, "-m", "webhook", "--bind", "127.0.0.1:0",
         "--tls-cert-file", str(tmp_path / "tls.crt"),
         "--tls-key-file", str(tmp_path / "tls.key")],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        record = json.loads(line)
        assert record["msg"].startswith("the serving certificate has expired"), line
        assert record["notAfter"] == cert.not_valid_after_utc.isoformat()
        assert record["level"] == "error"
        time.sleep(1)
        assert proc.poll() is None, "the webhook did not stay up"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
