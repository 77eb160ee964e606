"""Kargo's own admission webhooks and rollgate's, registered together (docs/install.md
"When the webhook is down", docs/verification.md "Stage verification").

Kargo's ``kubernetes-webhooks-server`` fills in what a user leaves out (Promotion names and
steps, Freight ids, the shard label); rollgate's validation then sees the object as Kargo
left it. Neither may block the other, and the real Kargo controller promotes and verifies
through both. Kargo's webhooks are registered as Kargo's chart registers them (they gate
every namespace), next to its management controller; each test works in a Kargo Project.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from harness.host_rollgate import HostRollgate
from harness.kits.kargo import STEPS, KargoProject, kargo_project, metric, running_kargo
from harness.kits.verification import MetricServer, verdict_template
from harness.plane import ControlPlane
from harness.process import ManagedProcess
from reconciler.verification.shards import LABEL_SHARD
from schemas.constants import KARGO_FINALIZER, LABEL_FREIGHT_COLLECTION
from schemas.kinds import API_VERSION_KARGO
from testkit import objects
from testkit.waits import wait_for


@pytest.fixture(scope="module")
def kargo(control_plane: ControlPlane) -> Iterator[ManagedProcess]:
    with running_kargo(control_plane, name="kargo-controller-webhooks", webhooks=True) as proc:
        yield proc


@pytest.fixture
def project(control_plane: ControlPlane, metrics: MetricServer, argo_rollouts: Any,
            kargo: Any) -> Iterator[KargoProject]:
    """A Kargo Project (Kargo's webhooks admit its kinds nowhere else), deleted with its
    namespace, Promotions included, while Kargo still runs."""
    with kargo_project(control_plane) as p:
        two_step = verdict_template(metrics.url, name="two-step", count=2, interval="4s")
        p.apply(two_step)
        p.freight("w1")
        yield p


def stage_doc(namespace: str, name: str, templates: list[dict[str, str]]) -> dict[str, Any]:
    return objects.stage(name, namespace=namespace, warehouse="w", verification={
        "analysisTemplates": templates, "args": [{"name": "verdict", "value": "pass"}]},
        spec={"shard": "blue", "promotionTemplate": {"spec": {"steps": STEPS}}})


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
    assert stored["metadata"]["labels"][LABEL_SHARD] == "blue"
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
    out = project.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(
        objects.promotion("", stage="uat", freight=freight, namespace=project.ns,
                          generateName="promo-")))
    promotion = json.loads(out.stdout)
    assert promotion["metadata"]["name"].startswith("uat.")
    assert promotion["spec"]["steps"] == STEPS
    assert promotion["metadata"]["ownerReferences"][0]["name"] == "uat"
    project.wait_promoted("uat", "w1")
    project.wait_verified("uat")
    assert "uat" in project.verified_in(freight)
    wait_for("Kargo's finalizer", lambda: KARGO_FINALIZER in (
        project.get("stage", "uat") or {})["metadata"].get("finalizers", []))


def test_auto_promotion_from_a_direct_source_runs_one_verification(
        project: KargoProject, control_plane: ControlPlane, rollgate: HostRollgate) -> None:
    """Kargo issue #6619 (duplicate runs after an auto-promotion from a direct source):
    the real Kargo auto-promotes the Freight the Stage may take and verifies it. What
    rollgate's observer reports is what happened: one run per collection and no finding,
    or a DuplicateVerificationRuns warning naming the extra run."""
    proc = rollgate.start_reconciler(
        "--controllers", "stage-verification", "--stage-verification", "observe",
        "--observe-grace-seconds", "2", "--namespaces", project.ns, "--no-leader-elect",
        name="reconciler-kargo-auto")
    try:
        proc.wait_ready(60)
        project.apply({"apiVersion": API_VERSION_KARGO, "kind": "ProjectConfig",
                       "metadata": {"name": project.ns},
                       "spec": {"promotionPolicies": [
                           {"stage": "auto", "autoPromotionEnabled": True}]}})
        project.stage("auto", templates=("two-step",))
        project.wait_promoted("auto", "w1")
        project.wait_verified("auto")
        collection = (project.get("stage", "auto") or {})["status"]["freightHistory"][0]["id"]
        wait_for("the verification counted", lambda: _finished(proc, project, "auto") == 1)
        runs = [r for r in project.runs("auto") if r["metadata"]["labels"].get(
            LABEL_FREIGHT_COLLECTION) == collection]
        entries = project.history("auto")
        duplicates = project.events("DuplicateVerificationRuns")
        print(f"auto-promotion: {len(runs)} run(s) and {len(entries)} verification "
              f"entr{'y' if len(entries) == 1 else 'ies'} for collection {collection}")
        if len(runs) > len(entries):
            found = wait_for("DuplicateVerificationRuns",
                             lambda: project.events("DuplicateVerificationRuns"))
            assert found[0]["type"] == "Warning"
        else:
            assert len(runs) == len(entries) == 1, (runs, entries)
            assert duplicates == []
        assert project.rollgate_writes() == {}
    finally:
        control_plane.stop_process(proc)


def _finished(proc: ManagedProcess, project: KargoProject, stage: str) -> float:
    return metric(proc, "rollgate_verifications_finished_total", namespace=project.ns,
                  stage=stage, phase="Successful")
