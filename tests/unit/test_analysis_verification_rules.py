"""The pure verification rules: current freight, the ready gate, phases, status."""

from __future__ import annotations

import pytest

from reconciler import verification as vf
from reconciler.controllers.stage_verification import StageVerificationController, owning_stage
from reconciler.runtime.types import ANALYSIS_RUN, APPLICATION, FREIGHT, STAGE, Key

NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T00:05:00Z"


def stage(status=None, spec=None, annotations=None):
    meta = {"name": "prod", "namespace": "shop", "generation": 4}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": spec or {}, "status": status or {}}


def app(health="Healthy", sync="Synced"):
    return {"status": {"health": {"status": health}, "sync": {"status": sync}}}


def no_apps(namespace, name):
    return None


# ------------------------------------------------------------ current freight


def test_current_freight_from_freight_history_map_sorted():
    st = stage({"freightHistory": [{"items": {"o1": {"name": "zz"}, "o2": {"name": "aa"}}},
                                   {"items": {"o1": {"name": "old"}}}]})
    assert vf.current_freight(st) == ["aa", "zz"]


def test_current_freight_from_freight_history_list():
    assert vf.current_freight(stage({"freightHistory": [{"items": [{"name": "f"}]}]})) == ["f"]


def test_current_freight_falls_back_to_current_freight():
    assert vf.current_freight(stage({"currentFreight": {"name": "f1"}})) == ["f1"]


def test_no_current_freight():
    assert vf.current_freight(stage({})) == []
    assert vf.current_freight(stage({"freightHistory": []})) == []


# ------------------------------------------------------------ gate

FREIGHTED = {"currentFreight": {"name": "f1"}}


def test_gate_waits_for_freight():
    assert "freight to be promoted" in vf.waiting_for(stage({}), no_apps)


def test_gate_waits_for_a_running_promotion():
    st = stage({**FREIGHTED, "currentPromotion": {"name": "p-1"}})
    assert vf.waiting_for(st, no_apps) == "waiting for promotion p-1 to finish"


def test_gate_uses_stage_health_when_present():
    st = stage({**FREIGHTED, "health": {"status": "Progressing"}},
               spec={"promotionMechanisms": {"argoCDAppUpdates": [{"appName": "x"}]}})
    assert vf.waiting_for(st, no_apps) == (
        "waiting for the Stage to become Healthy (health is Progressing)")
    st["status"]["health"]["status"] = "Healthy"
    assert vf.waiting_for(st, no_apps) is None  # Stage health wins over Applications


def test_gate_checks_every_argocd_application_with_default_namespace():
    spec = {"promotionMechanisms": {"argoCDAppUpdates": [
        {"appName": "a"}, {"appName": "b", "appNamespace": "apps"}]}}
    apps = {("argocd", "a"): app(), ("apps", "b"): app("Degraded", "OutOfSync")}
    reason = vf.waiting_for(stage(FREIGHTED, spec), lambda ns, n: apps.get((ns, n)))
    assert reason == ("waiting for Argo CD Application apps/b to be Healthy and Synced "
                      "(health: Degraded, sync: OutOfSync)")
    apps[("apps", "b")] = app()
    assert vf.waiting_for(stage(FREIGHTED, spec), lambda ns, n: apps.get((ns, n))) is None


def test_gate_names_a_missing_application():
    spec = {"promotionMechanisms": {"argoCDAppUpdates": [{"appName": "a"}]}}
    assert "argocd/a (not found)" in vf.waiting_for(stage(FREIGHTED, spec), no_apps)


def test_healthy_but_out_of_sync_application_still_waits():
    spec = {"promotionMechanisms": {"argoCDAppUpdates": [{"appName": "a"}]}}
    assert vf.waiting_for(stage(FREIGHTED, spec), lambda ns, n: app(sync="OutOfSync"))


def test_no_gate_without_health_or_applications():
    assert vf.waiting_for(stage(FREIGHTED), no_apps) is None


# ------------------------------------------------------------ phases and conditions


@pytest.mark.parametrize(
    ("run_phase", "phase"),
    [(None, "Running"), ("Pending", "Running"), ("Running", "Running"),
     ("Successful", "Successful"), ("Failed", "Failed"), ("Error", "Error"),
     ("Inconclusive", "Inconclusive"), ("SomethingNew", "Running")],
)
def test_run_phase_maps_to_verification_phase(run_phase, phase):
    run = {"metadata": {"name": "r"}, "status": {"phase": run_phase} if run_phase else {}}
    assert vf.verification_phase(run) == phase


@pytest.mark.parametrize(
    ("phase", "status", "reason"),
    [("Successful", "True", "Verified"), ("Failed", "False", "VerificationFailed"),
     ("Error", "False", "VerificationError"), ("Aborted", "False", "VerificationAborted"),
     ("Pending", "Unknown", "Pending"), ("Running", "Unknown", "Running"),
     ("Inconclusive", "Unknown", "Inconclusive")],
)
def test_condition_per_phase(phase, status, reason):
    v = {"id": "r", "phase": phase, "message": "m"}
    out = vf.status_with({}, v, generation=4, now=NOW)
    cond = out["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"], cond["observedGeneration"]) == (
        "Verified", status, reason, 4)


def test_run_message_includes_the_runs_message():
    run = {"metadata": {"name": "r"}, "status": {"phase": "Failed", "message": "metric x"}}
    assert vf.run_message(run) == "AnalysisRun r is Failed: metric x"


# ------------------------------------------------------------ reverify


@pytest.mark.parametrize(
    ("value", "latest", "expected"),
    [
        (None, {"id": "a", "phase": "Successful"}, "none"),
        ("", {"id": "a", "phase": "Successful"}, "start"),
        ("a", {"id": "a", "phase": "Failed"}, "start"),
        ("old", {"id": "a", "phase": "Failed"}, "stale"),
        ("", {"id": "a", "phase": "Running"}, "wait"),
        ("", {"id": "a", "phase": "Pending"}, "wait"),
        ("", None, "stale"),
    ],
)
def test_reverify_requested(value, latest, expected):
    assert vf.reverify_requested(value, latest) == expected


# ------------------------------------------------------------ status and history


def test_latest_verification_only_for_the_same_collection():
    st = stage({"verification": {"id": "r", "collection": "c1", "phase": "Running"}})
    assert vf.latest_verification(st, "c1")["id"] == "r"
    assert vf.latest_verification(st, "c2") is None


def test_history_is_newest_first_replaces_the_same_id_and_keeps_ten():
    history = [{"id": f"v{i}"} for i in range(10)]
    out = vf.with_history(history, {"id": "new", "phase": "Running"})
    assert [h["id"] for h in out] == ["new", *[f"v{i}" for i in range(9)]]
    out2 = vf.with_history(out, {"id": "new", "phase": "Successful"})
    assert out2[0]["phase"] == "Successful" and len(out2) == 10
    assert [h["id"] for h in out2].count("new") == 1


def test_status_with_keeps_other_status_fields_and_conditions():
    status = {"currentFreight": {"name": "f"}, "conditions": [{"type": "Ready", "status": "True"}]}
    out = vf.status_with(status, {"id": "r", "phase": "Running", "message": "m"},
                         generation=1, now=NOW)
    assert out["currentFreight"] == {"name": "f"}
    assert [c["type"] for c in out["conditions"]] == ["Ready", "Verified"]
    assert status == {"currentFreight": {"name": "f"},
                      "conditions": [{"type": "Ready", "status": "True"}]}


def test_unchanged_status_is_detected_so_nothing_is_written():
    v = {"id": "r", "phase": "Running", "message": "m"}
    first = vf.status_with({}, v, generation=1, now=NOW)
    again = vf.status_with(first, v, generation=1, now=LATER)
    assert vf.same_status(first, again)
    changed = vf.status_with(first, {**v, "phase": "Successful"}, generation=1, now=LATER)
    assert not vf.same_status(first, changed)


def test_finish_sets_times_once():
    v = vf.new_verification(run_name="r", freight=["f"], collection="c", attempt=1, message="")
    done = vf.finish({**v, "startTime": NOW}, phase="Failed", message="bad", now=LATER)
    assert (done["startTime"], done["finishTime"], done["phase"]) == (NOW, LATER, "Failed")
    assert v["phase"] == "Pending"


# ------------------------------------------------------------ event mapping


def run_obj(owner="prod", labels=None, annotations=None):
    meta = {"name": "r", "namespace": "shop", "labels": labels or {}}
    if owner:
        meta["ownerReferences"] = [{"kind": "Stage", "name": owner, "controller": True}]
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta}


def test_run_maps_to_its_owner_stage():
    c = StageVerificationController()
    assert list(c.map_event(ANALYSIS_RUN, run_obj())) == [Key("shop", "prod")]


def test_run_without_owner_maps_by_label_and_full_name_annotation():
    labels = {"app.kubernetes.io/managed-by": "rollgate", "kargo.akuity.io/stage": "short-abc"}
    assert owning_stage(run_obj(owner=None, labels=labels)) == "short-abc"
    full = {"kargo.akuity.io/stage": "the-full-long-name"}
    assert owning_stage(run_obj(owner=None, labels=labels, annotations=full)) == (
        "the-full-long-name")
    assert owning_stage(run_obj(owner=None)) is None


def test_freight_maps_to_the_stages_it_is_verified_in():
    c = StageVerificationController()
    freight = {"metadata": {"name": "f", "namespace": "shop"},
               "status": {"verifiedIn": {"prod": {}, "qa": {}}}}
    assert set(c.map_event(FREIGHT, freight)) == {Key("shop", "prod"), Key("shop", "qa")}


def test_application_maps_to_the_stages_gated_on_it():
    c = StageVerificationController()
    st = stage(spec={"promotionMechanisms": {"argoCDAppUpdates": [{"appName": "web"}]}})
    assert list(c.map_event(STAGE, st)) == []
    application = {"metadata": {"name": "web", "namespace": "argocd"}}
    assert list(c.map_event(APPLICATION, application)) == [Key("shop", "prod")]
    st["spec"] = {}
    c.map_event(STAGE, st)  # no longer gated on it
    assert list(c.map_event(APPLICATION, application)) == []
