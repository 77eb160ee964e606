"""Version skew (docs/install.md "Version skew"): a field rollgate does not know is a
newer upstream's in an object the API server accepted (a warning naming the versions
rollgate checks, never a denial), and an error offline unless a CRD declares it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from reconciler.plugins.render import render_plugin_config
from reconciler.verification.analysis_run import check_stanza
from schemas import check_rollout_manager, check_stage, errors, warnings
from testkit import objects
from testkit.paths import REPO_ROOT
from testkit.skew import (
    PLUGIN_FIELD,
    PLUGIN_VALUE,
    VERIFICATION_FIELD,
    VERIFICATION_VALUE,
    next_minor,
)

DIGEST = "a" * 64


def stage_with_new_field() -> dict[str, Any]:
    stage = objects.stage("uat", namespace="ns", warehouse="w",
                          verification=objects.verification("smoke"))
    stage["spec"]["verification"][VERIFICATION_FIELD] = VERIFICATION_VALUE
    return stage


def rm_with_new_field() -> dict[str, Any]:
    return objects.rollout_manager("rollouts", namespace="ns", metric=[{
        "name": "argoproj-labs/sample", "location": "https://plugins.example/m",
        "sha256": DIGEST, PLUGIN_FIELD: PLUGIN_VALUE}])


def test_a_served_stage_with_a_new_field_is_allowed_with_a_warning_naming_kargo() -> None:
    findings = check_stage(stage_with_new_field(), served=True)
    assert errors(findings) == []
    [warning] = warnings(findings)
    assert warning.field == f"spec.verification.{VERIFICATION_FIELD}"
    assert "rollgate checks Stages as Kargo v1.11.2 defines them" in warning.message
    assert "the served CRD declares it" in warning.message


def test_a_served_rollout_manager_with_a_new_plugin_field_is_allowed() -> None:
    findings = check_rollout_manager(rm_with_new_field(), served=True)
    assert errors(findings) == []
    assert [w.field for w in warnings(findings)] == [
        f"spec.plugins.metric[0].{PLUGIN_FIELD}"]
    assert "argo-rollouts-manager v0.0.9" in warnings(findings)[0].message


def test_unknown_fields_stay_errors_when_nothing_says_a_crd_declares_them() -> None:
    [error] = errors(check_stage(stage_with_new_field()))
    assert error.field == f"spec.verification.{VERIFICATION_FIELD}"
    assert error.message.startswith(f'unknown field "{VERIFICATION_FIELD}"')


def test_a_served_misspelling_of_a_required_field_still_misses_the_field() -> None:
    """Served, an unknown field is no misspelling, so the required one is missing."""
    stage = objects.stage("uat", namespace="ns", warehouse="w",
                          verification={"analysisTemplates": [{"nmae": "smoke"}]})
    findings = check_stage(stage, served=True)
    assert [e.field for e in errors(findings)] == [
        "spec.verification.analysisTemplates[0].name"]
    assert [w.field for w in warnings(findings)] == [
        "spec.verification.analysisTemplates[0].nmae"]


def test_the_reconciler_builds_and_renders_from_the_fields_it_knows() -> None:
    spec = check_stanza(stage_with_new_field())
    assert [t["name"] for t in spec["templates"]] == ["smoke"]
    data, _ = render_plugin_config(rm_with_new_field())
    [entry] = yaml.safe_load(data["metricProviderPlugins"])
    assert entry == {"name": "argoproj-labs/sample", "location": "https://plugins.example/m",
                     "sha256": DIGEST}


def validate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all(
        [stage_with_new_field(), rm_with_new_field()]))
    return subprocess.run([sys.executable, "-m", "schemas", "validate", *args,
                           "objects.yaml"], cwd=tmp_path, capture_output=True, text=True,
                          check=False)


def test_validate_offline_names_the_versions_it_checks(tmp_path: Path) -> None:
    out = validate(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    assert (f"Stage/uat: spec.verification.{VERIFICATION_FIELD}: unknown field "
            f'"{VERIFICATION_FIELD}"') in out.stdout
    assert "rollgate checks Stages as Kargo v1.11.2 defines them" in out.stdout
    assert "argo-rollouts-manager v0.0.9" in out.stdout


def test_validate_with_the_next_minors_crds_warns_instead(tmp_path: Path) -> None:
    crds = tmp_path / "crds"
    crds.mkdir()
    for name in ("kargo_stages.yaml", "argoproj_rolloutmanagers.yaml"):
        crd = yaml.safe_load((REPO_ROOT / "manifests" / "crds" / name).read_text())
        (crds / name).write_text(yaml.safe_dump(next_minor(crd)))
    out = validate(tmp_path, "--crds", str(crds))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"spec.verification.{VERIFICATION_FIELD}: warning: field not known" in out.stdout
    assert f"spec.plugins.metric[0].{PLUGIN_FIELD}: warning: field not known" in out.stdout
