"""``python -m certs inject`` as an operator runs it on a workstation: it finds the
cluster the way kubectl does (``$KUBECONFIG``), and every failure is one line on stderr
with an exit status, never a traceback. The success path against a real API server is
in tests/e2e/admission/test_webhook_down.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import certs
from testkit.paths import REPO_ROOT


@pytest.fixture(scope="module")
def ca_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return certs.generate(tmp_path_factory.mktemp("certs")).ca_cert


def _certs(command: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items()
            if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")}
    return subprocess.run([sys.executable, "-m", "certs", command, *args], cwd=REPO_ROOT,
                          env={**base, **env}, capture_output=True, text=True, timeout=60)


def _inject(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return _certs("inject", *args, env=env)


def _one_line(result: subprocess.CompletedProcess[str], command: str = "inject") -> str:
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"python -m certs {command}: ")
    return lines[0]


def test_renew_without_a_cluster_is_one_line(tmp_path):
    result = _certs("renew", env={"HOME": str(tmp_path)})
    assert result.returncode == 1
    assert "pass --kubeconfig FILE" in _one_line(result, "renew")


def test_a_lifetime_that_is_not_a_duration_is_named(tmp_path):
    result = _certs("renew", "--lifetime", "1y", env={"HOME": str(tmp_path)})
    assert result.returncode == 2
    assert "argument --lifetime: '1y' is not a duration like 8760h" in result.stderr
    assert "Traceback" not in result.stderr


def test_kubeconfig_from_the_environment_is_used(tmp_path, ca_file):
    # A kubeconfig for a server that is not there: inject must try that server (the
    # error names it), not complain that it is not running in a pod.
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n")
    result = _inject("--ca-file", str(ca_file), env={"KUBECONFIG": str(kubeconfig)})
    assert result.returncode == 1
    line = _one_line(result)
    assert "cannot reach the API server (127.0.0.1:9)" in line
    assert "Service host/port is not set" not in line


def test_no_cluster_at_all_says_how_to_name_one(tmp_path, ca_file):
    result = _inject("--ca-file", str(ca_file), env={"HOME": str(tmp_path)})
    assert result.returncode == 1
    assert "pass --kubeconfig FILE, set KUBECONFIG, or run it in a pod" in _one_line(result)


def test_missing_files_are_exit_2(tmp_path, ca_file):
    missing_ca = _inject("--ca-file", str(tmp_path / "ca.crt"), env={})
    assert missing_ca.returncode == 2 and "ca.crt" in _one_line(missing_ca)
    missing_config = _inject("--kubeconfig", str(tmp_path / "kc"), "--ca-file", str(ca_file),
                             env={})
    assert missing_config.returncode == 2
    assert _one_line(missing_config).endswith("kc: no such file")
