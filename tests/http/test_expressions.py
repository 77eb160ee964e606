"""The checks of issue-level "what the real controllers refuse" that a webhook can see
give the same field path and the same message from the webhook and from
``python -m schemas validate`` (docs/verification.md "Kargo expressions in verification args",
docs/plugins.md "RolloutManager plugins"): Kargo expressions in arg values, and the names
argo-rollouts-manager refuses or collides with."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from testkit import objects
from testkit.reviews import review

STAGE = objects.stage("uat", namespace="demo", warehouse="w", verification=objects.verification(
    "t", args=[
        {"name": "a", "value": "plain"},
        {"name": "b", "value": "${{ ctx.namespace }}"},
        {"name": "c", "value": "${{ ctx.stage + }}"},
        {"name": "d", "value": "${% ctx.stage"},
    ]))
OPENSHIFT = {"name": "argoproj-labs/openshift", "location": "file:///plugins/os"}


def _manager(list_name: str) -> dict[str, Any]:
    return objects.rollout_manager("rollouts", namespace="demo",
                                   plugins={list_name: [OPENSHIFT]})


def _validate(tmp_path: Path, obj: dict[str, Any]) -> tuple[set[str], set[str]]:
    (tmp_path / "o.json").write_text(json.dumps(obj))
    out = subprocess.run([sys.executable, "-m", "schemas", "validate", "o.json"],
                         cwd=tmp_path, capture_output=True, text=True, check=False)
    prefix = f"o.json: {obj['kind']}/{obj['metadata']['name']}: "
    lines = [line[len(prefix):] for line in out.stdout.splitlines() if line.startswith(prefix)]
    errors = {line for line in lines if ": warning: " not in line}
    warnings = {line.replace(": warning: ", ": ", 1) for line in lines if ": warning: " in line}
    return errors, warnings


def test_stage_expression_findings_are_the_same_in_the_webhook_and_validate(post, tmp_path):
    response = post("/validate/stages", review(STAGE))
    causes = {f"{c['field']}: {c['message']}" for c in response["status"]["details"]["causes"]
              if c["field"]}
    errors, warnings = _validate(tmp_path, STAGE)
    assert causes == errors
    assert {c.split(":", 1)[0] for c in causes} == {
        "spec.verification.args[2].value", "spec.verification.args[3].value"}
    assert set(response.get("warnings") or []) == warnings
    assert [w.split(":", 1)[0] for w in warnings] == ["spec.verification.args[1].value"]


@pytest.mark.parametrize(("list_name", "says"), [
    ("trafficManagement",
     "an edited one keeps its previous plugins, a new one never gets its Deployment"),
    ("metric", "Argo Rollouts stores both binaries at plugin-bin/argoproj-labs/openshift"),
])
def test_operator_name_warnings_are_the_same_in_the_webhook_and_validate(
        post, tmp_path, list_name, says):
    manager = _manager(list_name)
    response = post("/validate/rolloutmanagers", review(manager))
    assert response["allowed"] is True
    errors, warnings = _validate(tmp_path, manager)
    assert errors == set()
    assert set(response["warnings"]) == warnings
    assert len(warnings) == 1
    (warning,) = warnings
    assert warning.startswith(f"spec.plugins.{list_name}[0].name: argo-rollouts-manager")
    assert says in warning
