"""Version skew (docs/install.md "Version skew"): an upstream upgraded before rollgate.

The plane serves the next minor of the Stage and RolloutManager CRDs (the ones in use,
ours or the upstream trees', plus one optional field under ``spec.verification`` and
under a ``spec.plugins`` entry: ``testkit.skew``). ``kubectl apply`` of objects using the
new fields is allowed with rollgate's warning naming the field and the versions it
checks, and the stored objects keep the fields (the mutating webhook included); a field
the served CRD does not declare is still the API server's refusal. The CRDs are put
back as they were afterwards.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from harness.host_rollgate import HostRollgate
from harness.kits.shapes import ServedCrds
from harness.plane import ControlPlane
from schemas.kinds import GROUP_ARGO, GROUP_KARGO
from testkit import objects
from testkit.skew import (
    PLUGIN_FIELD,
    PLUGIN_VALUE,
    VERIFICATION_FIELD,
    VERIFICATION_VALUE,
    next_minor,
)

CRDS = (f"stages.{GROUP_KARGO}", f"rolloutmanagers.{GROUP_ARGO}")


@pytest.fixture(scope="module")
def next_minor_served(control_plane: ControlPlane, rollgate: HostRollgate
                      ) -> Iterator[None]:
    crds = ServedCrds(control_plane)
    before = [crds.snapshot[name] for name in CRDS]
    crds.replace([next_minor(c) for c in before])
    try:
        yield
    finally:
        crds.replace(before)


def stage(namespace: str) -> dict[str, Any]:
    obj = objects.stage("uat", namespace=namespace, warehouse="w",
                        verification=objects.verification("smoke"))
    obj["spec"]["verification"][VERIFICATION_FIELD] = VERIFICATION_VALUE
    return obj


def rollout_manager(namespace: str) -> dict[str, Any]:
    return objects.rollout_manager("rollouts", namespace=namespace, metric=[{
        "name": "argoproj-labs/sample", "location": "https://plugins.example/m",
        # Upper case: the mutating webhook lower-cases it and must keep the rest.
        "sha256": "A" * 64, PLUGIN_FIELD: PLUGIN_VALUE}])


def test_a_new_verification_field_is_allowed_with_a_warning_and_kept(
        control_plane: ControlPlane, namespace: str, next_minor_served: None) -> None:
    out = control_plane.kubectl("apply", "-f", "-", input=json.dumps(stage(namespace)))
    assert (f"Warning: spec.verification.{VERIFICATION_FIELD}: field not known to rollgate "
            "(rollgate checks Stages as Kargo v1.11.2 defines them)") in out.stderr, out.stderr
    stored = control_plane.get_json("-n", namespace, "stage", "uat")
    assert stored["spec"]["verification"][VERIFICATION_FIELD] == VERIFICATION_VALUE


def test_a_new_plugin_field_is_allowed_and_kept_by_the_mutating_webhook(
        control_plane: ControlPlane, namespace: str, next_minor_served: None) -> None:
    out = control_plane.kubectl("apply", "-f", "-",
                                input=json.dumps(rollout_manager(namespace)))
    assert (f"spec.plugins.metric[0].{PLUGIN_FIELD}: field not known to rollgate "
            "(rollgate checks RolloutManagers as argo-rollouts-manager v0.0.9 defines "
            "them)") in out.stderr, out.stderr
    [entry] = control_plane.get_json("-n", namespace, "rolloutmanager", "rollouts")[
        "spec"]["plugins"]["metric"]
    assert entry[PLUGIN_FIELD] == PLUGIN_VALUE
    assert entry["sha256"] == "a" * 64


def test_a_field_the_served_crd_does_not_declare_is_still_refused(
        control_plane: ControlPlane, namespace: str, next_minor_served: None) -> None:
    obj = stage(namespace)
    obj["spec"]["verification"]["bogus"] = "x"
    out = control_plane.kubectl("apply", "-f", "-", input=json.dumps(obj), check=False)
    assert out.returncode != 0
    assert 'unknown field "spec.verification.bogus"' in out.stderr, out.stderr
    assert control_plane.kubectl("get", "-n", namespace, "stage", "uat",
                                 check=False).returncode != 0
