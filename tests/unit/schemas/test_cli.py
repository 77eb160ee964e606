"""``python -m schemas validate`` run as a user's CI would: a subprocess on files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from schemas.kinds import API_VERSION_KARGO
from testkit import objects

VALID = """\
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata:
  name: prod
  namespace: demo
spec:
  requestedFreight:
  - origin: {kind: Warehouse, name: guestbook}
    sources: {direct: true}
  verification:
    analysisTemplates:
    - name: success-rate
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: unrelated
data:
  verification: "not ours"
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
    requestedFreight: [{origin: {kind: Warehouse, name: w}, sources: {direct: true}}]
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

NO_SHA = (
    "spec.plugins.metric[0].sha256: warning: no sha256 for a remote location: Argo "
    "Rollouts will run whatever binary the URL serves; set sha256 to pin it"
)


def run(*args: str, cwd: Path, command: str = "validate",
        stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "schemas", command, *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=False,
    )


def test_clean_file_exits_zero_and_prints_warnings_and_a_summary(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(VALID)
    result = run("ok.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"ok.yaml: RolloutManager/argo-rollouts: {NO_SHA}",
        "checked 1 Stage and 1 RolloutManager in 1 file (1 other object skipped): "
        "0 errors, 1 warning",
    ]
    assert result.stderr == ""


def test_errors_exit_one_with_file_kind_name_path_lines(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(INVALID)
    (tmp_path / "ok.yaml").write_text(VALID)
    result = run("ok.yaml", "bad.yaml", cwd=tmp_path)
    assert result.returncode == 1
    lines = result.stdout.splitlines()
    assert lines[0] == f"ok.yaml: RolloutManager/argo-rollouts: {NO_SHA}"
    assert lines[1] == (
        'bad.yaml: Stage/uat: spec.verification.args[0].value: must be a string; YAML reads '
        '8080 as an integer, so quote it: "8080"'
    )
    assert lines[2].startswith(
        "bad.yaml: RolloutManager/rm: spec.plugins.trafficManagement[0].name: ")
    assert "<namespace>/<name>" in lines[2]
    assert lines[3:] == [
        "checked 2 Stages and 2 RolloutManagers in 2 files (1 other object skipped): "
        "2 errors, 1 warning"
    ]


def test_findings_come_in_document_order(tmp_path: Path) -> None:
    # Sorted by path, analysisTemplates would come before args; the file has it last.
    (tmp_path / "order.yaml").write_text(
        "kind: Stage\n"
        "metadata: {name: s}\n"
        "spec:\n"
        "  verification:\n"
        "    analysisRunMetadata:\n"
        "      labels: {rollgate.dev/attempt: '1'}\n"
        "    args:\n"
        "    - {name: b, value: 2}\n"
        "    - {name: a, value: '1'}\n"
        "    - {name: a, value: '3'}\n"
        "    analysisTemplates:\n"
        "    - name: Bad_Name\n"
    )
    result = run("order.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert [line.split(": ")[2] for line in result.stdout.splitlines()[:-1]] == [
        "spec.verification.analysisRunMetadata.labels[rollgate.dev/attempt]",
        "spec.verification.args[0].value",
        "spec.verification.args[2].name",
        "spec.verification.analysisTemplates[0].name",
    ]


def test_a_missing_field_is_placed_at_its_parent(tmp_path: Path) -> None:
    (tmp_path / "missing.yaml").write_text(
        "kind: Stage\nmetadata: {name: s}\nspec:\n"
        "  verification:\n"
        "    args: [{name: a}]\n"          # line 5: args[0].value is missing
        "    analysisTemplates: []\n"      # line 6
    )
    result = run("--output", "json", "missing.yaml", cwd=tmp_path)
    found = [(f["field"], f["line"], f["column"])
             for f in json.loads(result.stdout)["findings"]]
    assert found == [
        ("spec.verification.args[0].value", 5, 12),
        ("spec.verification.analysisTemplates", 6, 24),
    ]


def test_json_output_for_ci(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(INVALID)
    (tmp_path / "ok.yaml").write_text(VALID)
    result = run("-o", "json", "bad.yaml", "ok.yaml", "gone.yaml", cwd=tmp_path)
    assert result.returncode == 2
    document = json.loads(result.stdout)
    assert document["summary"] == {
        "files": 2, "unreadable": 1, "stages": 2, "rolloutManagers": 2, "skipped": 1,
        "errors": 2, "warnings": 1, "exitCode": 2,
    }
    assert document["unreadable"] == [
        "gone.yaml: cannot read file: No such file or directory"]
    first = document["findings"][0]
    assert first == {
        "file": "bad.yaml", "line": 15, "column": 16,
        "apiVersion": API_VERSION_KARGO, "kind": "Stage", "namespace": None,
        "name": "uat", "field": "spec.verification.args[0].value", "severity": "error",
        "message": 'must be a string; YAML reads 8080 as an integer, so quote it: "8080"',
    }
    assert [(f["file"], f["severity"]) for f in document["findings"]] == [
        ("bad.yaml", "error"), ("bad.yaml", "error"), ("ok.yaml", "warning")]


def test_json_output_when_clean(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(VALID.split("---")[0])
    result = run("--output=json", "ok.yaml", cwd=tmp_path)
    assert result.returncode == 0
    assert json.loads(result.stdout) == {
        "summary": {"files": 1, "unreadable": 0, "stages": 1, "rolloutManagers": 0,
                    "skipped": 0, "errors": 0, "warnings": 0, "exitCode": 0},
        "findings": [],
        "unreadable": [],
    }


def test_a_directory_means_its_manifest_files_in_name_order(tmp_path: Path) -> None:
    manifests = tmp_path / "manifests"
    (manifests / "nested").mkdir(parents=True)
    (manifests / "b.yml").write_text(INVALID)
    (manifests / "a.yaml").write_text(VALID)
    (manifests / "c.json").write_text(json.dumps(objects.stage(
        "from-json", warehouse="w",
        verification={"analysisTemplates": [{"name": "x", "kind": "Job"}]}),
        indent="\t"))  # tab-indented JSON is not YAML to PyYAML, but kubectl reads it
    (manifests / "README.md").write_text("kind: Stage\nspec: {verification: 1}\n")
    (manifests / "nested" / "deep.yaml").write_text(INVALID.replace("uat", "deep"))

    flat = run("manifests", cwd=tmp_path)
    assert flat.returncode == 1, flat.stderr
    files = [line.split(": ")[0] for line in flat.stdout.splitlines()[:-1]]
    assert files == ["manifests/a.yaml", "manifests/b.yml", "manifests/b.yml",
                     "manifests/c.json"]
    assert flat.stdout.splitlines()[-1].startswith(
        "checked 3 Stages and 2 RolloutManagers in 3 files")
    assert ("manifests/c.json: Stage/from-json: spec.verification.analysisTemplates[0].kind: "
            'invalid value "Job"') in flat.stdout

    recursive = run("-R", "manifests", cwd=tmp_path)
    assert "manifests/nested/deep.yaml: Stage/deep:" in recursive.stdout
    assert "in 4 files" in recursive.stdout.splitlines()[-1]


def test_a_directory_without_manifests_exits_two(tmp_path: Path) -> None:
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    (tmp_path / "empty" / "sub" / "x.yaml").write_text(VALID)
    result = run("empty", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        "empty: no .yaml, .yml, .json files in this directory "
        "(-R also searches its subdirectories)\n")
    assert run("-R", "empty", cwd=tmp_path).returncode == 0


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
    assert result.stdout.splitlines()[-1].endswith("; 1 path could not be read")


def test_stdin(tmp_path: Path) -> None:
    result = run("-", cwd=tmp_path, stdin=INVALID)
    assert result.returncode == 1
    assert "-: Stage/uat: spec.verification.args[0].value:" in result.stdout


def test_allow_http_plugins_flag(tmp_path: Path) -> None:
    (tmp_path / "http.yaml").write_text(
        "kind: RolloutManager\nmetadata: {name: rm}\nspec:\n  plugins:\n    metric:\n"
        "    - {name: a/b, location: 'http://example.com/p', sha256: '" + "0" * 64 + "'}\n"
    )
    assert run("http.yaml", cwd=tmp_path).returncode == 1
    assert run("--allow-http-plugins", "http.yaml", cwd=tmp_path).returncode == 0


def test_misspelt_options_and_commands_get_a_did_you_mean(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(VALID)
    option = run("--allow-http-plugin", "ok.yaml", cwd=tmp_path)
    # (argparse takes a unique prefix as the option itself)
    assert option.returncode == 0
    option = run("--alow-http-plugins", "ok.yaml", cwd=tmp_path)
    assert option.returncode == 2
    assert option.stderr.splitlines()[-1] == (
        "python -m schemas: error: unrecognized arguments: --alow-http-plugins; "
        "did you mean --allow-http-plugins?")
    command = run("ok.yaml", cwd=tmp_path, command="valdate")
    assert command.returncode == 2
    assert command.stderr.splitlines()[-1].endswith("; did you mean validate?")


def test_yaml_oddities_do_not_crash(tmp_path: Path) -> None:
    # Timestamps, non-string keys, empty documents and scalars are plain input to skip
    # or read as kubectl would.
    (tmp_path / "odd.yaml").write_text(
        "---\n---\n42\n---\n- a\n---\n"
        "kind: Stage\nmetadata: {name: s, creationTimestamp: 2024-01-01T00:00:00Z}\n"
        "spec:\n  verification:\n    analysisTemplates: [{name: a}]\n"
        "    analysisRunMetadata: {labels: {8080: x, true: y}}\n"
    )
    result = run("odd.yaml", cwd=tmp_path)
    # The keys arrive as the strings "8080" and "true", which are valid label keys.
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        "checked 1 Stage and 0 RolloutManagers in 1 file: 0 errors, 0 warnings\n")


def test_duplicate_keys_exit_two_naming_the_key_and_line(tmp_path: Path) -> None:
    # kubectl refuses this file; checking the last value would check something else.
    (tmp_path / "dup.yaml").write_text(
        "apiVersion: kargo.akuity.io/v1alpha1\n"
        "kind: Stage\n"
        "metadata: {name: uat, namespace: demo}\n"
        "spec:\n"
        "  verification:\n"
        "    analysisTemplates: [{name: a}]\n"
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
        "    verification:\n"
        "      analysisTemplates: [{name: a}]\n"
        "      args: [{name: a, value: on}, {name: b, value: 010}]\n"
        "      analysisRunMetadata: {labels: {enabled: yes}}\n"
    )
    result = run("on.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert (
        'on.yaml: Stage/uat: spec.verification.args[0].value: must be a string; YAML reads '
        'on as a boolean, so quote it: "on"'
    ) in result.stdout.splitlines()
    assert 'YAML reads 010 as an integer, so quote it: "010"' in result.stdout
    assert 'so quote it: "yes"' in result.stdout
    assert '"true"' not in result.stdout


def test_non_ascii_is_printed_as_written(tmp_path: Path) -> None:
    (tmp_path / "accents.yaml").write_text(
        "kind: Stage\nmetadata: {name: s}\nspec:\n  verification:\n"
        "    analysisTemplates: [{name: succès-rate}]\n"
        "    analysisRunMetadata: {labels: {team: \"équipe\u202e\"}}\n",
        encoding="utf-8",
    )
    text = run("accents.yaml", cwd=tmp_path).stdout
    assert 'invalid value "succès-rate"' in text
    # A bidi override would reorder what the reader sees: that one stays escaped.
    assert 'invalid label value "équipe\\u202e"' in text
    as_json = run("-o", "json", "accents.yaml", cwd=tmp_path).stdout
    assert "succès-rate" in as_json and "\\u00e8" not in as_json  # JSON text too
    messages = [f["message"] for f in json.loads(as_json)["findings"]]
    assert any('"succès-rate"' in m for m in messages)


def test_spec_analysis_is_an_error_that_names_the_migration(tmp_path: Path) -> None:
    (tmp_path / "old.yaml").write_text(
        "apiVersion: kargo.akuity.io/v1alpha1\nkind: Stage\nmetadata: {name: prod}\n"
        "spec:\n  requestedFreight: [{origin: {kind: Warehouse, name: w}, sources: {}}]\n"
        "  analysis:\n    templates: [{templateName: success-rate}]\n"
    )
    result = run("old.yaml", cwd=tmp_path)
    assert result.returncode == 1
    [line, summary] = result.stdout.splitlines()
    assert line.startswith("old.yaml: Stage/prod: spec.analysis: no released Kargo Stage has "
                           "spec.analysis")
    assert "the API server refuses it" in line
    assert line.endswith("`rollgate migrate old.yaml` (add --write to change the file)")
    assert summary.endswith(": 1 error, 0 warnings")


TEMPLATE = """\
apiVersion: argoproj.io/v1alpha1
kind: AnalysisTemplate
metadata:
  name: success-rate
spec:
  args:
  - name: service-name
  - name: threshold
    value: "0.95"
  metrics:
  - name: success-rate
    provider: {web: {url: "http://127.0.0.1/{{args.service-name}}"}}
"""

STAGE_WITH_ARGS = """\
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata:
  name: prod
spec:
  requestedFreight:
  - origin: {kind: Warehouse, name: guestbook}
    sources: {direct: true}
  verification:
    analysisTemplates:
    - name: success-rate
    args:
    - name: service-nme
      value: guestbook
"""


def test_templates_among_the_files_give_the_cross_object_warnings(tmp_path: Path) -> None:
    (tmp_path / "template.yaml").write_text(TEMPLATE)
    (tmp_path / "stage.yaml").write_text(STAGE_WITH_ARGS)
    result = run("stage.yaml", "template.yaml", cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.splitlines()[:-1] == [
        'stage.yaml: Stage/prod: spec.verification.args: warning: AnalysisTemplate '
        '"success-rate" declares arg "service-name" without a value; set it here (name and '
        'value), or the verification will end in Error',
        'stage.yaml: Stage/prod: spec.verification.args[0].name: warning: no referenced '
        'template declares arg "service-nme" (did you mean "service-name"?); it is passed '
        'to the AnalysisRun anyway',
    ]


def test_a_template_not_among_the_files_is_unknown_not_missing(tmp_path: Path) -> None:
    (tmp_path / "stage.yaml").write_text(STAGE_WITH_ARGS)
    result = run("stage.yaml", cwd=tmp_path)
    assert (result.returncode, result.stdout.splitlines()[:-1]) == (0, [])
