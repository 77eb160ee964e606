"""``python -m schemas migrate``: spec.analysis rewritten as spec.verification, run as a
user would (a subprocess on files), plus the conversion rules on their own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import schemas
from schemas.cli.migrate import convert, legacy_findings
from testkit import objects
from testkit.paths import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "migrate" / "stage-analysis.yaml"


def run(*args: str, cwd: Path, command: str = "migrate") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "schemas", command, *args],
        cwd=cwd, capture_output=True, text=True, encoding="utf-8", check=False,
    )


def test_the_example_is_migrated_and_everything_else_is_kept(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "stage.yaml")
    before = (tmp_path / "stage.yaml").read_text()
    result = run("stage.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "stage.yaml: Stage/prod: spec.analysis rewritten as spec.verification\n"
    head, _, old_stanza = before.partition("  analysis:\n")
    assert result.stdout == head + (
        "  verification:\n"
        "    analysisTemplates:\n"
        "    - name: success-rate\n"
        "    - name: error-budget\n"
        "      kind: ClusterAnalysisTemplate\n"
        "    args:\n"
        "    - name: service-name\n"
        "      value: guestbook.guestbook-prod.svc.cluster.local\n"
        "    analysisRunMetadata:\n"
        "      labels:\n"
        "        team: guestbook\n"
    )
    assert "# shared by every team" in old_stanza  # a comment inside the stanza is lost
    assert (tmp_path / "stage.yaml").read_text() == before  # stdout only
    # What it prints is what validate accepts, with nothing left to migrate.
    (tmp_path / "out.yaml").write_text(result.stdout)
    checked = run("out.yaml", cwd=tmp_path, command="validate")
    assert checked.returncode == 0, checked.stdout
    assert checked.stdout == (
        "checked 1 Stage and 0 RolloutManagers in 1 file: 0 errors, 0 warnings\n")


def test_write_rewrites_in_place_keeping_the_mode(tmp_path: Path) -> None:
    target = tmp_path / "stage.yaml"
    shutil.copy(EXAMPLE, target)
    os.chmod(target, 0o640)
    expected = run("stage.yaml", cwd=tmp_path).stdout
    result = run("--write", "stage.yaml", cwd=tmp_path)
    assert (result.returncode, result.stdout) == (0, "")
    assert target.read_text() == expected
    assert os.stat(target).st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["stage.yaml"]  # no temporary left
    again = run("--write", "stage.yaml", cwd=tmp_path)
    assert (again.returncode, again.stderr) == (0, "stage.yaml: nothing to migrate\n")
    assert target.read_text() == expected


VALUE_FROM = """\
kind: Stage
metadata: {name: prod}
spec:
  analysis:
    templates: [{templateName: a}]
    args:
    - {name: service-name, value: svc}
    - {name: token, valueFrom: {secretKeyRef: {name: api, key: token}}}
"""


def test_value_from_is_refused_naming_the_arg(tmp_path: Path) -> None:
    (tmp_path / "stage.yaml").write_text(VALUE_FROM)
    (tmp_path / "fine.yaml").write_text(VALUE_FROM.replace("- {name: token", "# - {name: token"))
    for flags in ((), ("--write",)):
        result = run(*flags, "fine.yaml", "stage.yaml", cwd=tmp_path)
        assert result.returncode == 1
        assert result.stdout == ""  # half a migration is not offered on stdout
        assert ("stage.yaml: Stage/prod: spec.analysis.args[1].valueFrom: cannot be migrated: "
                "spec.verification args take only a string value") in result.stderr
    assert (tmp_path / "stage.yaml").read_text() == VALUE_FROM  # refused: not written
    assert "verification:" in (tmp_path / "fine.yaml").read_text()  # the other file was


@pytest.mark.parametrize(
    ("text", "path", "reason"),
    [
        ("kind: Stage\nmetadata: {name: s}\nspec:\n  analysis: {templates: [{templateName: a}]}\n"
         "  verification: {analysisTemplates: [{name: a}]}\n",
         "spec.analysis", "also has spec.verification"),
        ("kind: Stage\nmetadata: {name: s}\nspec:\n  analysis:\n"
         "    templates: [{templateName: a}]\n    args: [{name: p, value: 8080}]\n",
         "spec.analysis.args[0].value", "until fixed: must be a string"),
        ("kind: Stage\nmetadata: {name: s}\nspec:\n  analysis: &stanza\n"
         "    templates: [{templateName: a}]\n  copy: *stanza\n",
         "spec.analysis", "shares YAML anchors"),
    ],
    ids=["both-spellings", "invalid-stanza", "anchor"],
)
def test_what_cannot_be_migrated_is_refused(tmp_path: Path, text: str, path: str,
                                            reason: str) -> None:
    (tmp_path / "s.yaml").write_text(text)
    result = run("--write", "s.yaml", cwd=tmp_path)
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(f"s.yaml: Stage/s: {path}: cannot be migrated")
    assert reason in line
    assert (tmp_path / "s.yaml").read_text() == text


def test_lists_flow_style_json_and_null(tmp_path: Path) -> None:
    (tmp_path / "list.yaml").write_text(
        "# kept\n"
        "apiVersion: v1\nkind: List\nitems:\n"
        "- kind: Stage\n"
        "  metadata: {name: a}\n"
        "  spec: {analysis: {templates: [{templateName: t, clusterScope: true}]}, x: 1}\n"
        "- kind: Stage\n"
        "  metadata: {name: b}\n"
        "  spec:\n"
        "    analysis: null  # absent\n"
        "    verification: {analysisTemplates: [{name: t}]}\n"
        "- kind: ConfigMap\n"
        "  metadata: {name: c}\n"
        "  data: {analysis: x}\n"
    )
    (tmp_path / "stage.json").write_text(json.dumps(objects.stage("j", freight=False, spec={
        "analysis": {"templates": [{"templateName": "t"}],
                     "args": [{"name": "msg", "value": "café\nbar"}]}}),
        indent=2, ensure_ascii=False))
    result = run("--write", "list.yaml", "stage.json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "list.yaml: Stage/a: spec.analysis rewritten as spec.verification",
        "list.yaml: Stage/b: spec.analysis: null (the same as absent) removed",
        "stage.json: Stage/j: spec.analysis rewritten as spec.verification",
    ]
    assert (tmp_path / "list.yaml").read_text() == (
        "# kept\n"
        "apiVersion: v1\nkind: List\nitems:\n"
        "- kind: Stage\n"
        "  metadata: {name: a}\n"
        '  spec: {verification: {"analysisTemplates": [{"name": "t", '
        '"kind": "ClusterAnalysisTemplate"}]}, x: 1}\n'
        "- kind: Stage\n"
        "  metadata: {name: b}\n"
        "  spec:\n"
        "    verification: {analysisTemplates: [{name: t}]}\n"
        "- kind: ConfigMap\n"
        "  metadata: {name: c}\n"
        "  data: {analysis: x}\n"
    )
    migrated = json.loads((tmp_path / "stage.json").read_text())  # still JSON
    assert migrated["spec"] == {"verification": {
        "analysisTemplates": [{"name": "t"}], "args": [{"name": "msg", "value": "café\nbar"}]}}


def test_a_multi_line_value_stays_the_same_string(tmp_path: Path) -> None:
    text = ("kind: Stage\nmetadata: {name: s}\nspec:\n  analysis:\n"
            "    templates: [{templateName: t}]\n"
            "    analysisRunMetadata:\n      annotations:\n"
            "        example.com/runbook: |\n          line one\n          line two\n"
            "        example.com/owner: 'équipe: \"web\"'\n")
    (tmp_path / "s.yaml").write_text(text)
    result = run("s.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout)["spec"]["verification"]["analysisRunMetadata"] == {
        "annotations": {"example.com/runbook": "line one\nline two\n",
                        "example.com/owner": 'équipe: "web"'}}
    assert "example.com/runbook: |" in result.stdout


def test_several_files_print_as_one_stream(tmp_path: Path) -> None:
    shutil.copy(EXAMPLE, tmp_path / "a.yaml")
    (tmp_path / "b.yaml").write_text("kind: ConfigMap\nmetadata: {name: x}")  # no newline
    result = run("a.yaml", "b.yaml", cwd=tmp_path)
    assert result.returncode == 0
    documents = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert [d["kind"] for d in documents] == ["Stage", "ConfigMap"]
    assert result.stderr.splitlines()[-1] == "b.yaml: nothing to migrate"


def test_write_refuses_stdin_and_unreadable_files_exit_two(tmp_path: Path) -> None:
    assert run("--write", "-", cwd=tmp_path).returncode == 2
    result = run("missing.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "missing.yaml: cannot read file" in result.stderr


# ---------------------------------------------------------------- the rules themselves


def test_convert_maps_each_field() -> None:
    body, refused = convert({
        "analysisRunMetadata": {"labels": {"a": "b"}, "annotations": None},
        "templates": [{"templateName": "x"}, {"templateName": "y", "clusterScope": False},
                      {"templateName": "z", "clusterScope": True}],
        "args": [{"name": "p", "value": "1", "valueFrom": None}],
    })
    assert refused == []
    assert body == {
        "analysisRunMetadata": {"labels": {"a": "b"}},  # key order as written
        "analysisTemplates": [{"name": "x"}, {"name": "y"},
                              {"name": "z", "kind": "ClusterAnalysisTemplate"}],
        "args": [{"name": "p", "value": "1"}],
    }
    assert list(body) == ["analysisRunMetadata", "analysisTemplates", "args"]


def test_legacy_finding_only_for_stages_with_the_old_stanza() -> None:
    stage = objects.stage(freight=False, spec={"analysis": {"templates": [{"templateName": "a"}]}})
    [finding] = legacy_findings(stage, file="my stage.yaml")
    assert (finding.field, finding.warning) == ("spec.analysis", False)
    assert "rollgate migrate 'my stage.yaml'" in finding.message
    assert legacy_findings({**stage, "spec": {"analysis": None}}) == []
    assert legacy_findings({**stage, "apiVersion": "example.com/v1"}) == []
    assert legacy_findings({**stage, "kind": "ConfigMap"}) == []
    # The webhook and the builder still accept the old spelling (a real API server never
    # lets it reach them); only the offline CLI reports it.
    assert schemas.errors(schemas.check(stage)) == []


def test_crlf_line_endings_are_kept(tmp_path: Path) -> None:
    text = ("kind: Stage\r\nmetadata: {name: s}\r\nspec:\r\n  analysis:\r\n"
            "    templates:\r\n    - templateName: a\r\n  x: 1\r\n")
    (tmp_path / "s.yaml").write_bytes(text.encode())
    assert run("--write", "s.yaml", cwd=tmp_path).returncode == 0
    assert (tmp_path / "s.yaml").read_bytes().decode() == (
        "kind: Stage\r\nmetadata: {name: s}\r\nspec:\r\n  verification:\r\n"
        "    analysisTemplates:\r\n    - name: a\r\n  x: 1\r\n")


# ---------------------------------------------------------------- Kargo v0 shapes

KARGO_V0 = """\
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata: {name: test, namespace: demo}
spec:
  subscriptions:
    warehouse: guestbook
---
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata: {name: prod, namespace: demo}
spec:
  subscriptions:
    upstreamStages:
    - name: test
"""


def test_subscriptions_become_requested_freight(tmp_path: Path) -> None:
    (tmp_path / "old.yaml").write_text(KARGO_V0)
    result = run("old.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == [
        "old.yaml: Stage/test: spec.subscriptions rewritten as spec.requestedFreight",
        "old.yaml: Stage/prod: spec.subscriptions rewritten as spec.requestedFreight",
    ]
    test, prod = yaml.safe_load_all(result.stdout)
    assert test["spec"] == {"requestedFreight": [
        {"origin": {"kind": "Warehouse", "name": "guestbook"}, "sources": {"direct": True}}]}
    assert prod["spec"] == {"requestedFreight": [
        {"origin": {"kind": "Warehouse", "name": "guestbook"}, "sources": {"stages": ["test"]}}]}
    (tmp_path / "new.yaml").write_text(result.stdout)
    checked = run("new.yaml", cwd=tmp_path, command="validate")
    assert checked.returncode == 0, checked.stdout


def test_an_upstream_stage_in_another_file_is_followed(tmp_path: Path) -> None:
    first, second = KARGO_V0.split("---\n")
    (tmp_path / "a.yaml").write_text(first)
    (tmp_path / "b.yaml").write_text(second)
    alone = run("b.yaml", cwd=tmp_path)
    assert alone.returncode == 1
    assert alone.stderr.startswith(
        'b.yaml: Stage/prod: spec.subscriptions: cannot be migrated: the Warehouse upstream '
        'Stage "test" gets its Freight from is not known')
    both = run("a.yaml", "b.yaml", cwd=tmp_path)
    assert both.returncode == 0, both.stderr
    assert "sources:\n        stages:\n        - test\n" in both.stdout


def test_promotion_mechanisms_are_refused_naming_the_steps(tmp_path: Path) -> None:
    (tmp_path / "old.yaml").write_text(
        KARGO_V0.split("---\n")[0] + "  promotionMechanisms:\n    argoCDAppUpdates:\n"
        "    - appName: guestbook\n")
    before = (tmp_path / "old.yaml").read_text()
    result = run("--write", "old.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.splitlines() == [
        "old.yaml: Stage/test: spec.promotionMechanisms: cannot be migrated: Kargo v1 "
        "replaced it with spec.promotionTemplate.spec.steps (promotion steps such as "
        "git-clone, git-update, argocd-update); write the steps by hand, remove "
        "spec.promotionMechanisms, and migrate again"]
    assert (tmp_path / "old.yaml").read_text() == before


@pytest.mark.parametrize(("subscriptions", "reason"), [
    ("{warehouse: a, upstreamStages: [{name: b}]}", "exactly one of warehouse"),
    ("{}", "exactly one of warehouse"),
    ("[a]", "not a mapping"),
    ("{warehouse: 5}", "must be a Warehouse name"),
])
def test_subscriptions_that_cannot_be_migrated(tmp_path: Path, subscriptions: str,
                                               reason: str) -> None:
    (tmp_path / "s.yaml").write_text(
        "apiVersion: kargo.akuity.io/v1alpha1\nkind: Stage\nmetadata: {name: s}\n"
        f"spec:\n  subscriptions: {subscriptions}\n")
    result = run("s.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert reason in result.stderr and "Traceback" not in result.stderr


def test_null_old_fields_are_removed(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(
        "apiVersion: kargo.akuity.io/v1alpha1\nkind: Stage\nmetadata: {name: s}\nspec:\n"
        "  requestedFreight: [{origin: {kind: Warehouse, name: w}, sources: {direct: true}}]\n"
        "  subscriptions: null\n  promotionMechanisms: null\n")
    result = run("s.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert yaml.safe_load(result.stdout)["spec"] == {"requestedFreight": [
        {"origin": {"kind": "Warehouse", "name": "w"}, "sources": {"direct": True}}]}
