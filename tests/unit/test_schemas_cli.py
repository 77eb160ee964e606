"""``python -m schemas validate`` run as a user's CI would: a subprocess on files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

VALID = """\
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata:
  name: prod
  namespace: demo
spec:
  analysis:
    templates:
    - templateName: success-rate
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: unrelated
data:
  analysis: "not ours"
---
apiVersion: argoproj.io/v1alpha1
kind: RolloutManager
metadata:
  name: argo-rollouts
spec:
  plugins:
    metric:
    - name: argoproj-labs/sample-prometheus
      location: https://example.com/plugin
"""

INVALID = """\
apiVersion: v1
kind: List
items:
- apiVersion: kargo.akuity.io/v1alpha1
  kind: Stage
  metadata:
    name: uat
  spec:
    verification:
      analysisTemplates:
      - name: smoke
      args:
      - name: port
        value: 8080
- apiVersion: argoproj.io/v1alpha1
  kind: RolloutManager
  metadata:
    name: rm
  spec:
    plugins:
      trafficManagement:
      - name: gatewayAPI
        location: file:///plugins/gw
"""


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "schemas", "validate", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def test_clean_file_exits_zero_and_prints_warnings(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(VALID)
    result = run("ok.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "ok.yaml: RolloutManager/argo-rollouts: spec.plugins.metric[0].sha256: warning: "
        "no sha256 for a remote location: Argo Rollouts will run whatever binary the URL "
        "serves; set sha256 to pin it"
    ]


def test_errors_exit_one_with_file_kind_name_path_lines(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(INVALID)
    (tmp_path / "ok.yaml").write_text(VALID)
    result = run("ok.yaml", "bad.yaml", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert (
        'bad.yaml: Stage/uat: spec.verification.args[0].value: must be a string; YAML reads '
        '8080 as an integer, so quote it: "8080"'
    ) in lines
    assert any(
        line.startswith("bad.yaml: RolloutManager/rm: spec.plugins.trafficManagement[0].name: ")
        and "<namespace>/<name>" in line
        for line in lines
    )
    assert any(line.startswith("ok.yaml: RolloutManager/argo-rollouts: ") for line in lines)


def test_bad_yaml_exits_two_with_a_reason_and_no_traceback(tmp_path: Path) -> None:
    (tmp_path / "broken.yaml").write_text("kind: Stage\nspec: [unclosed\n")
    result = run("broken.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "broken.yaml: invalid YAML" in result.stderr
    assert "Traceback" not in result.stderr


def test_unreadable_file_exits_two_even_when_others_have_errors(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(INVALID)
    result = run("bad.yaml", "missing.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "missing.yaml: cannot read file" in result.stderr
    assert "Traceback" not in result.stderr
    # The readable file was still checked.
    assert "bad.yaml: Stage/uat:" in result.stdout


def test_allow_http_plugins_flag(tmp_path: Path) -> None:
    (tmp_path / "http.yaml").write_text(
        "kind: RolloutManager\nmetadata: {name: rm}\nspec:\n  plugins:\n    metric:\n"
        "    - {name: a/b, location: 'http://example.com/p', sha256: '" + "0" * 64 + "'}\n"
    )
    assert run("http.yaml", cwd=tmp_path).returncode == 1
    assert run("--allow-http-plugins", "http.yaml", cwd=tmp_path).returncode == 0


def test_yaml_oddities_do_not_crash(tmp_path: Path) -> None:
    # Timestamps, non-string keys, empty documents and scalars are plain input to skip
    # or read as kubectl would.
    (tmp_path / "odd.yaml").write_text(
        "---\n---\n42\n---\n- a\n---\n"
        "kind: Stage\nmetadata: {name: s, creationTimestamp: 2024-01-01T00:00:00Z}\n"
        "spec:\n  analysis:\n    templates: [{templateName: a}]\n"
        "    analysisRunMetadata: {labels: {8080: x, true: y}}\n"
    )
    result = run("odd.yaml", cwd=tmp_path)
    # The keys arrive as the strings "8080" and "true", which are valid label keys.
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_duplicate_keys_exit_two_naming_the_key_and_line(tmp_path: Path) -> None:
    # kubectl refuses this file; checking the last value would check something else.
    (tmp_path / "dup.yaml").write_text(
        "apiVersion: kargo.akuity.io/v1alpha1\n"
        "kind: Stage\n"
        "metadata: {name: uat, namespace: demo}\n"
        "spec:\n"
        "  analysis:\n"
        "    templates: [{templateName: a}]\n"
        "    args:\n"
        "    - name: port\n"
        "      value: '80'\n"
        "      value: 8080\n"
    )
    result = run("dup.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert 'duplicate key "value" (first at line 9)' in result.stderr
    assert "line 10" in result.stderr
    assert "Traceback" not in result.stderr


def test_quote_hint_shows_the_value_as_written(tmp_path: Path) -> None:
    (tmp_path / "on.yaml").write_text(
        "apiVersion: kargo.akuity.io/v1alpha1\n"
        "kind: List\n"
        "items:\n"
        "- kind: Stage\n"
        "  metadata: {name: uat, namespace: demo}\n"
        "  spec:\n"
        "    analysis:\n"
        "      templates: [{templateName: a}]\n"
        "      args: [{name: a, value: on}, {name: b, value: 010}]\n"
        "      analysisRunMetadata: {labels: {enabled: yes}}\n"
    )
    result = run("on.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert (
        'on.yaml: Stage/uat: spec.analysis.args[0].value: must be a string; YAML reads on '
        'as a boolean, so quote it: "on"'
    ) in result.stdout.splitlines()
    assert 'YAML reads 010 as an integer, so quote it: "010"' in result.stdout
    assert 'so quote it: "yes"' in result.stdout
    assert '"true"' not in result.stdout
