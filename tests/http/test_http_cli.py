"""``python -m webhook`` refuses to start without its certificate files, with a message
instead of a gunicorn traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_missing_certificate_file_is_a_clear_error(tmp_path):
    missing = tmp_path / "tls.crt"
    result = subprocess.run(
        [sys.executable, "-m", "webhook", "--bind", "127.0.0.1:0",
         "--tls-cert-file", str(missing), "--tls-key-file", str(tmp_path / "tls.key")],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    assert f"{missing}: no such file" in result.stderr
    assert "Traceback" not in result.stderr
