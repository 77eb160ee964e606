"""The certificate notAfter and notBefore gauges across gunicorn workers: a worker that
has loaded the app but not yet read its certificate must not show on /metrics as 0,
which would fire the expiry and renewal-overdue alerts while a worker starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cryptography import x509

import certs
from testkit.paths import REPO_ROOT

# Runs as a worker does: PROMETHEUS_MULTIPROC_DIR set before prometheus-client is
# imported, the metrics module imported with the app, the certificate recorded later.
_WORKER = """
import json, sys
from webhook import metrics

def samples():
    text = metrics.exposition()[0].decode()
    return {name: [float(line.split()[-1]) for line in text.splitlines()
                   if line.startswith(f"rollgate_webhook_certificate_{name}_timestamp_seconds")]
            for name in ("not_after", "not_before")}

booting = samples()
metrics.record_certificate(sys.argv[1])
print(json.dumps({"booting": booting, "ready": samples()}))
"""


def test_a_starting_worker_shows_no_validity_until_it_read_its_certificate(
        tmp_path: Path) -> None:
    paths = certs.generate(tmp_path / "certs")
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    result = subprocess.run(
        [sys.executable, "-c", _WORKER, str(paths.tls_cert)], cwd=REPO_ROOT,
        env={**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)},
        capture_output=True, text=True, timeout=60, check=True,
    )
    seen = json.loads(result.stdout)
    cert = x509.load_pem_x509_certificate(paths.tls_cert.read_bytes())
    assert seen == {"booting": {"not_after": [], "not_before": []},
                    "ready": {"not_after": [cert.not_valid_after_utc.timestamp()],
                              "not_before": [cert.not_valid_before_utc.timestamp()]}}
