"""Kargo's own admission webhooks and rollgate's, registered together (README, "When the
webhook is down" and "Stage verification").

Kargo's ``kubernetes-webhooks-server`` fills in what a user leaves out (Promotion names and
steps, Freight ids, the shard label); rollgate's validation then sees the object as Kargo
left it. Neither may block the other, and the real Kargo controller promotes and verifies
through both.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import controlplane
import pytest
import upstream
from kargo_kit import STEPS, KargoProject
from verification_kit import MetricServer, verdict_template, wait_for


@pytest.fixture(scope="module")
def kargo(control_plane: controlplane.ControlPlane) -> Iterator[controlplane.ManagedProcess]:
    try:
        webhooks = control_plane.start_kargo_webhooks()
        proc = control_plane.start_kargo_controller(name="kargo-controller-webhooks")
    except upstream.UpstreamMissing as err:
        pytest.fail(str(err), pytrace=False)
    yield proc
    control_plane.stop_process(proc)
    control_plane.stop_kargo_webhooks(webhooks)


@pytest.fixture
def project(control_plane: controlplane.ControlPlane, namespace: str, metrics: MetricServer,
            argo_rollouts: Any, kargo: Any) -> KargoProject:
    p = KargoProject(control_plane, namespace)
    two_step = verdict_template(metrics.url, name="two-step", count=2, interval="4s")
    p.apply(two_step)
    p.freight("w1")
    return p


def stage_doc(namespace: str, name: str, templates: list[dict[str, str]]) -> dict[str, Any]:
    return {"apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Stage",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"shard": "blue",
                     "requestedFreight": [{"origin": {"kind": "Warehouse", "name": "w"},
                                           "sources": {"direct": True}}],
                     "promotionTemplate": {"spec": {"steps": STEPS}},
                     "verification": {"analysisTemplates": templates,
                                      "args": [{"name": "verdict", "value": "pass"}]}}}


def test_a_stage_passes_kargos_defaulting_then_rollgates_validation(
        project: KargoProject) -> None:
    bad = stage_doc(project.ns, "bad", [{"name": "two-step"}, {"name": "two-step"}])
    out = project.kubectl("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert out.returncode != 0
    assert "validate-stages.rollgate.dev" in out.stderr
    assert "spec.verification.analysisTemplates[1]" in out.stderr
    good = stage_doc(project.ns, "good", [{"name": "two-step"}])
    project.kubectl("apply", "-f", "-", input=json.dumps(good))
    stored = project.get("stage", "good") or {}
    # Kargo's defaulter set the shard label from spec.shard; rollgate added nothing.
    assert stored["metadata"]["labels"][upstream.SHARD_LABEL] == "blue"
    assert stored["spec"]["verification"] == good["spec"]["verification"]
    again = project.kubectl("apply", "-f", "-", input=json.dumps(good))
    assert "unchanged" in again.stdout


def test_a_promotion_kargos_webhook_completes_is_promoted_and_verified(
        project: KargoProject) -> None:
    """Freight ids and Promotion names, steps and owner as Kargo's webhook fills them: a
    user's minimal Promotion (what `kargo promote` creates), through both webhooks."""
    project.stage("uat", templates=("two-step",))
    freight = project.freight_names["w1"]
    assert freight != "f-w1", "Kargo's webhook names Freight by its id"
    out = project.kubectl("create", "-o", "json", "-f", "-", input=json.dumps({
        "apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Promotion",
        "metadata": {"generateName": "promo-", "namespace": project.ns},
        "spec": {"stage": "uat", "freight": freight}}))
    promotion = json.loads(out.stdout)
    assert promotion["metadata"]["name"].startswith("uat.")
    assert promotion["spec"]["steps"] == STEPS
    assert promotion["metadata"]["ownerReferences"][0]["name"] == "uat"
    project.wait_promoted("uat", "w1")
    project.wait_verified("uat")
    assert "uat" in project.verified_in(freight)
    wait_for("Kargo's finalizer", lambda: "kargo.akuity.io/finalizer" in (
        project.get("stage", "uat") or {})["metadata"].get("finalizers", []))
