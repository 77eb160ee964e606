"""The verification planner (reconciler/verification/plan.py): pure decisions, no API.

The Stages here have Kargo v1's shapes (freightHistory entries with ``id`` and
``items`` keyed ``Warehouse/<name>``, ``lastPromotion``, ``health``), as Kargo's
promotion writes them.
"""

from __future__ import annotations

import collections.abc
import copy
import dataclasses
import json
import typing
from collections.abc import Iterable
from typing import Any

import pytest

from reconciler.verification import plan as planner
from reconciler.verification.naming import freight_collection_id, label_value, run_name
from reconciler.verification.payloads import collection_id
from schemas.constants import (
    ANNOTATION_ABORT,
    ANNOTATION_REVERIFY,
    KARGO_FINALIZER,
    LABEL_FREIGHT_COLLECTION,
    LABEL_STAGE,
)
from schemas.references import TemplateKey
from testkit import objects

NS = "shop"
NOW = "2026-12-01T10:00:00Z"
CID = freight_collection_id(["f1"])
RUN1 = run_name("prod", CID, 1)
RUN2 = run_name("prod", CID, 2)


def stage(*, history: list[dict[str, Any]] | None = None, health: str = "Healthy",
          annotations: dict[str, str] | None = None, generation: int = 1,
          conditions: list[dict[str, Any]] | None = None,
          spec: dict[str, Any] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "freightHistory": history if history is not None else [collection("f1")],
        "health": {"status": health},
        "lastPromotion": {"name": "p1", "status": {"phase": "Succeeded",
                                                   "freightCollection": {"id": CID}}},
    }
    if conditions is not None:
        status["conditions"] = conditions
    return objects.stage(
        namespace=NS, uid="u", generation=generation, annotations=annotations or {},
        warehouse="w", freight=spec is None, spec=spec, status=status,
        verification=objects.verification("t") if spec is None else None)


def collection(*names: str, history: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return objects.freight_collection(*names, history=history)


def run(name: str, *, attempt: int, phase: str = "", cid: str = CID, ours: bool = True,
        terminate: bool = False, request: str | None = None) -> dict[str, Any]:
    labels = {LABEL_STAGE: "prod", LABEL_FREIGHT_COLLECTION: cid}
    if ours:
        labels.update({"rollgate.dev/attempt": str(attempt),
                       "app.kubernetes.io/managed-by": "rollgate"})
    annotations = {"rollgate.dev/request": request} if request is not None else {}
    out = objects.analysis_run(name, namespace=NS, metrics=[{"name": "m"}], labels=labels,
                               annotations=annotations, status={"phase": phase} if phase else None,
                               creationTimestamp="2026-12-01T09:00:00Z")
    if terminate:
        out["spec"]["terminate"] = True
    return out


def templates(*names: str) -> dict[TemplateKey, dict[str, Any]]:
    """The AnalysisTemplates ``names`` in the Stage's namespace, as the engine resolves
    them (each measuring ``m``, as ``run`` does)."""
    return {TemplateKey("AnalysisTemplate", NS, name): objects.analysis_template(
        name, namespace=NS, metrics=[{"name": "m"}]) for name in names}


# What the Stages here reference: ``t``, and ``t2`` once a test changes the Stage.
TEMPLATES = templates("t", "t2")
NOT_FOUND = "AnalysisTemplate shop/t not found"


def plan(st: dict[str, Any], runs: Iterable[dict[str, Any]] = (), freight=None,
         **kw: Any) -> planner.Plan:
    return planner.plan(planner.World(
        stage=st, runs=list(runs), freight=freight if freight is not None else {"f1": {
            "metadata": {"name": "f1"}, "status": {}}},
        templates=kw.pop("templates", TEMPLATES), now=NOW, **kw))


def applied(st: dict[str, Any], p: planner.Plan) -> dict[str, Any]:
    """The Stage after the plan's status write (what the API server would store)."""
    out = copy.deepcopy(st)
    for key, value in (p.status or {}).items():
        if value is None:
            out["status"].pop(key, None)
        else:
            out["status"][key] = value
    return out


def current_history(st: dict[str, Any]) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = st["status"]["freightHistory"][0].get(
        "verificationHistory", [])
    return entries


def condition(st: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in st["status"]["conditions"] if c["type"] == "Verified")


# ---------------------------------------------------------------- the whole flow


def test_ready_stage_gets_exactly_one_run_then_follows_it_to_success() -> None:
    st = stage()
    p = plan(st)
    assert p.create is not None and p.create["metadata"]["name"] == RUN1
    # The executor creates it and plans again with the run in the world.
    created = run(RUN1, attempt=1)
    p = plan(st, [created])
    assert p.create is None
    st = applied(st, p)
    entry = current_history(st)[0]
    assert entry["id"] == RUN1 and entry["actor"] == "rollgate" and entry["phase"] == "Pending"
    assert entry["analysisRun"] == {"name": RUN1, "namespace": NS, "phase": ""}
    assert condition(st)["reason"] == "VerificationPending"
    # The real controller runs it and it succeeds.
    p = plan(st, [run(RUN1, attempt=1, phase="Running")])
    st = applied(st, p)
    assert current_history(st)[0]["phase"] == "Running"
    assert (condition(st)["status"], condition(st)["reason"]) == ("Unknown", "VerificationRunning")
    p = plan(st, [run(RUN1, attempt=1, phase="Successful")])
    st = applied(st, p)
    entry = current_history(st)[0]
    assert entry["phase"] == "Successful" and entry["finishTime"]
    assert (condition(st)["status"], condition(st)["reason"]) == ("True", "Verified")
    assert condition(st)["observedGeneration"] == 1
    assert p.freight == [("f1", {"status": {"verifiedIn": {"prod": {
        "verifiedAt": entry["finishTime"]}}}})]
    assert [e.reason for e in p.events] == ["VerificationSucceeded"]
    # Freight written: the next pass over the unchanged world plans nothing at all.
    verified = {"f1": {"metadata": {"name": "f1"},
                       "status": {"verifiedIn": {"prod": {"verifiedAt": entry["finishTime"]}}}}}
    again = plan(st, [run(RUN1, attempt=1, phase="Successful")], freight=verified)
    assert again.empty, again


@pytest.mark.parametrize(("run_phase", "status", "reason"), [
    ("Failed", "False", "VerificationFailed"),
    ("Error", "False", "VerificationError"),
    ("Inconclusive", "Unknown", "VerificationInconclusive"),
])
def test_unsuccessful_outcomes_set_kargos_condition(run_phase: str, status: str,
                                                     reason: str) -> None:
    st = applied(stage(), plan(stage(), [run(RUN1, attempt=1)]))
    p = plan(st, [run(RUN1, attempt=1, phase=run_phase)])
    st = applied(st, p)
    assert current_history(st)[0]["phase"] == run_phase
    assert (condition(st)["status"], condition(st)["reason"]) == (status, reason)
    assert plan(st, [run(RUN1, attempt=1, phase=run_phase)]).empty


def test_failed_reverification_removes_verified_in() -> None:
    history = [{"id": RUN1, "actor": "rollgate", "phase": "Successful",
                "finishTime": NOW, "analysisRun": {"name": RUN1, "namespace": NS,
                                                   "phase": "Successful"}}]
    st = stage(history=[collection("f1", history=history)],
               annotations={ANNOTATION_REVERIFY: RUN1})
    st["status"]["conditions"] = [{"type": "Verified", "status": "True", "reason": "Verified",
                                   "message": "Freight has been verified",
                                   "observedGeneration": 1, "lastTransitionTime": NOW}]
    runs = [run(RUN1, attempt=1, phase="Successful"),
            run(RUN2, attempt=2, phase="Failed", request=RUN1)]
    freight = {"f1": {"metadata": {"name": "f1"},
                      "status": {"verifiedIn": {"prod": {"verifiedAt": NOW}}}}}
    p = plan(st, runs, freight=freight)
    assert p.freight == [("f1", {"status": {"verifiedIn": {"prod": None}}})]
    st = applied(st, p)
    assert [e["phase"] for e in current_history(st)] == ["Failed", "Successful"]
    # As in Kargo: one success of this freight keeps Verified True.
    assert condition(st)["status"] == "True"


# ---------------------------------------------------------------- plain data


def test_the_planner_plans_from_plain_data_alone() -> None:
    """A World of what JSON holds (and the templates by their key) is all the planner
    needs: the run it creates is built from the world's template, and the status of the
    same plan already records that run (a pass plans once)."""
    template = objects.analysis_template("t", namespace=NS, metrics=[{
        "name": "success-rate", "provider": {"web": {"url": "http://metrics.example"}}}])
    document = json.dumps({"stage": stage(), "runs": [], "now": NOW,
                           "freight": {"f1": {"metadata": {"name": "f1"}, "status": {}}}})
    world = planner.World(**json.loads(document), templates={
        TemplateKey("AnalysisTemplate", NS, "t"): json.loads(json.dumps(template))})
    p = planner.plan(world)
    assert p.create is not None and p.create["metadata"]["name"] == RUN1
    assert p.create["spec"]["metrics"] == template["spec"]["metrics"]
    st = applied(world.stage, p)  # type: ignore[arg-type]
    assert current_history(st)[0]["analysisRun"] == {"name": RUN1, "namespace": NS, "phase": ""}
    assert condition(st)["reason"] == "VerificationPending"


def _callables_in(hint: Any) -> list[Any]:
    """The callable types a type hint names, at any depth (``Mapping[str, Callable]``)."""
    origin = typing.get_origin(hint)
    if hint is collections.abc.Callable or origin is collections.abc.Callable:
        return [hint]
    if isinstance(hint, type) and issubclass(hint, collections.abc.Callable):  # type: ignore[arg-type]
        return [hint]
    return [c for arg in typing.get_args(hint) for c in _callables_in(arg)]


def test_a_world_holds_no_callable() -> None:
    """World's fields are data by type: none is, or holds, a callable (a look-up, a
    builder or a client would let planning set off a request)."""
    hints = typing.get_type_hints(planner.World)
    assert set(hints) == {f.name for f in dataclasses.fields(planner.World)}
    assert {name: _callables_in(hint) for name, hint in hints.items()} == {
        name: [] for name in hints}
    assert _callables_in(collections.abc.Mapping[str, collections.abc.Callable[[], None]])


# ---------------------------------------------------------------- the gate


@pytest.mark.parametrize(("change", "message"), [
    ({"health": {"status": "Progressing"}}, "health is Progressing"),
    ({"health": None}, "health is Unknown"),
    ({"currentPromotion": {"name": "p2"}}, "promotion p2 to finish"),
    ({"lastPromotion": {"name": "p1", "status": {"phase": "Running"}}}, "to succeed"),
])
def test_gate_waits_with_a_pending_entry_saying_what_for(change: dict[str, Any],
                                                         message: str) -> None:
    st = stage()
    for key, value in change.items():
        if value is None:
            st["status"].pop(key)
        else:
            st["status"][key] = value
    p = plan(st)
    assert p.create is None
    st = applied(st, p)
    entry = current_history(st)[0]
    assert entry["phase"] == "Pending" and message in entry["message"]
    assert "analysisRun" not in entry
    assert condition(st)["reason"] == "WaitingForVerification"
    assert message in condition(st)["message"]
    assert plan(st).empty


def test_no_freight_is_kargos_no_freight_condition() -> None:
    st = applied(stage(history=[]), plan(stage(history=[])))
    assert (condition(st)["status"], condition(st)["reason"]) == ("Unknown", "NoFreight")


def test_collection_id_is_computed_with_kargos_rule_when_absent() -> None:
    entry = collection("b", "a")
    entry.pop("id")
    assert collection_id(entry) == freight_collection_id(["a", "b"])
    assert freight_collection_id(["b", "a"]) == __import__("hashlib").sha1(b"a,b").hexdigest()


# ---------------------------------------------------------------- errors


def test_build_error_is_a_final_error_entry_that_says_how_to_retry() -> None:
    st = stage()
    p = plan(st, templates={})
    assert p.create is None
    st = applied(st, p)
    entry = current_history(st)[0]
    assert entry["phase"] == "Error" and "not found" in entry["message"]
    assert ANNOTATION_REVERIFY in entry["message"]
    assert (condition(st)["status"], condition(st)["reason"]) == ("False", "VerificationError")
    assert [e.reason for e in p.events] == ["VerificationError"]
    assert NOT_FOUND in entry["message"]
    assert plan(st, templates={}).empty


def test_a_changed_stage_after_an_error_starts_the_next_attempt() -> None:
    st = applied(stage(), plan(stage(), templates={}))
    st["metadata"]["generation"] = 2
    st["spec"]["verification"]["analysisTemplates"] = [{"name": "t2"}]
    p = plan(st)
    assert p.create is not None and p.create["metadata"]["name"] == RUN2
    st = applied(st, plan(st, [run(RUN2, attempt=2)]))
    assert [e["id"] for e in current_history(st)] == [RUN2, RUN1]
    assert condition(st)["observedGeneration"] == 2


def test_a_generation_change_that_builds_the_same_failure_only_moves_observed_generation() -> None:
    st = applied(stage(), plan(stage(), templates={}))
    assert NOT_FOUND in current_history(st)[0]["message"]
    st["metadata"]["generation"] = 2  # e.g. promotionTemplate edited
    p = plan(st, templates={})
    assert p.create is None and p.events == []
    st = applied(st, p)
    assert len(current_history(st)) == 1
    assert condition(st)["observedGeneration"] == 2
    assert plan(st, templates={}).empty


def test_blocked_name_is_an_error_naming_the_fix() -> None:
    p = plan(stage(), blocked={RUN1: "AnalysisRun x already exists but was not created by "
                                      "rollgate"})
    entry = current_history(applied(stage(), p))[0]
    assert entry["phase"] == "Error" and "already exists" in entry["message"]


def test_run_deleted_before_it_finished_is_an_error() -> None:
    st = applied(stage(), plan(stage(), [run(RUN1, attempt=1)]))
    entry = current_history(applied(st, plan(st, [])))[0]
    assert entry["phase"] == "Error" and "deleted before it finished" in entry["message"]


# ---------------------------------------------------------------- requests


@pytest.mark.parametrize("value", [
    RUN1, json.dumps({"id": RUN1, "actor": "admin", "controlPlane": False}), ""])
def test_reverify_of_a_finished_verification_starts_one_more_attempt(value: str) -> None:
    st = applied(stage(), plan(stage(), [run(RUN1, attempt=1, phase="Failed")]))
    st["metadata"]["annotations"][ANNOTATION_REVERIFY] = value
    p = plan(st, [run(RUN1, attempt=1, phase="Failed")])
    created = p.create
    assert created is not None and created["metadata"]["name"] == RUN2
    assert created["metadata"]["annotations"]["rollgate.dev/request"] == value
    runs = [run(RUN1, attempt=1, phase="Failed"), run(RUN2, attempt=2, request=value)]
    st = applied(st, plan(st, runs))
    assert [e["id"] for e in current_history(st)] == [RUN2, RUN1]
    # Acted on once: the request stays on the Stage (as with Kargo) and starts nothing more.
    runs[1] = run(RUN2, attempt=2, phase="Successful", request=value)
    st = applied(st, plan(st, runs))
    p = plan(st, runs,
             freight={"f1": {"status": {"verifiedIn": {"prod": {}}}}})
    assert p.create is None and p.empty


def test_reverify_while_running_waits_for_the_run_to_finish() -> None:
    st = applied(stage(), plan(stage(), [run(RUN1, attempt=1, phase="Running")]))
    st["metadata"]["annotations"][ANNOTATION_REVERIFY] = RUN1
    assert plan(st, [run(RUN1, attempt=1, phase="Running")]).create is None
    p = plan(st, [run(RUN1, attempt=1, phase="Successful")])
    assert p.create is not None and p.create["metadata"]["name"] == RUN2


def test_reverify_naming_an_older_verification_is_ignored_with_a_warning() -> None:
    st = applied(stage(), plan(stage(), [run(RUN1, attempt=1, phase="Failed")]))
    st["metadata"]["annotations"][ANNOTATION_REVERIFY] = "someone-elses-id"
    p = plan(st, [run(RUN1, attempt=1, phase="Failed")])
    assert p.create is None and p.status is None
    assert [(e.type, e.reason) for e in p.events] == [("Warning", "ReverifyIgnored")]
    assert RUN1 in p.events[0].message


@pytest.mark.parametrize("value", [RUN1, json.dumps({"id": RUN1, "actor": "admin"}), ""])
def test_abort_terminates_the_run_once_and_records_aborted(value: str) -> None:
    st = applied(stage(), plan(stage(), [run(RUN1, attempt=1, phase="Running")]))
    st["metadata"]["annotations"][ANNOTATION_ABORT] = value
    p = plan(st, [run(RUN1, attempt=1, phase="Running")])
    assert p.terminate == [planner.Terminate(RUN1, value)]
    st = applied(st, p)
    entry = current_history(st)[0]
    assert entry["phase"] == "Aborted"
    assert (condition(st)["status"], condition(st)["reason"]) == ("False", "VerificationAborted")
    assert [e.reason for e in p.events] == ["VerificationAborted"]
    # The run ends (Argo Rollouts reports a terminated run as Successful): still Aborted.
    done = run(RUN1, attempt=1, phase="Successful", terminate=True, request=value)
    assert plan(st, [done]).empty


def test_abort_naming_an_older_verification_warns_and_aborts_nothing() -> None:
    st = applied(stage(), plan(stage(), [run(RUN1, attempt=1, phase="Running")]))
    st["metadata"]["annotations"][ANNOTATION_ABORT] = "older"
    p = plan(st, [run(RUN1, attempt=1, phase="Running")])
    assert p.terminate == [] and p.status is None
    assert [e.reason for e in p.events] == ["AbortIgnored"]


# ---------------------------------------------------------------- new freight, conflicts


def test_new_freight_terminates_the_running_run_and_records_superseded() -> None:
    st = applied(stage(), plan(stage(), [run(RUN1, attempt=1, phase="Running")]))
    old = st["status"]["freightHistory"][0]
    st["status"]["freightHistory"] = [collection("f2"), old]
    cid2 = freight_collection_id(["f2"])
    st["status"]["lastPromotion"]["status"]["freightCollection"]["id"] = cid2
    p = plan(st, [run(RUN1, attempt=1, phase="Running")],
             freight={"f2": {"metadata": {"name": "f2"}}})
    assert p.terminate == [planner.Terminate(RUN1, None)]
    assert p.create is not None  # the new freight's first attempt
    st = applied(st, p)
    superseded = st["status"]["freightHistory"][1]["verificationHistory"][0]
    assert superseded["phase"] == "Aborted" and superseded["message"] == f"superseded by {cid2}"
    assert "VerificationAborted" in [e.reason for e in p.events]


def test_a_superseded_entry_written_before_its_run_terminates_the_run_of_its_id() -> None:
    """Issue 19, item 2: the entry was written while the gate waited (Pending, no
    analysisRun); a later pass created its run but its Stage write was refused (409, a
    promotion landed). The run is found by the entry's id, its deterministic name, and is
    terminated: no run of an ended entry stays Running."""
    waiting = {"id": RUN1, "actor": "rollgate", "phase": "Pending",
               "startTime": NOW, "message": "waiting for the Stage to be healthy"}
    cid2 = freight_collection_id(["f2"])
    st = stage(history=[collection("f2"), collection("f1", history=[waiting])])
    st["status"]["lastPromotion"]["status"]["freightCollection"]["id"] = cid2
    p = plan(st, [run(RUN1, attempt=1, phase="Running")],
             freight={"f2": {"metadata": {"name": "f2"}}})
    assert p.terminate == [planner.Terminate(RUN1, None)]
    done = applied(st, p)["status"]["freightHistory"][1]["verificationHistory"][0]
    assert done["phase"] == "Aborted" and done["message"] == f"superseded by {cid2}"
    assert done["analysisRun"]["name"] == RUN1


def test_a_run_that_succeeded_before_a_new_promotion_marks_its_own_freight() -> None:
    """Issue 19, 1b: the run succeeded before rollgate recorded it, and the Stage was
    promoted again meanwhile: the old entry is recorded Successful and the Freight of
    that older collection gets verifiedIn, as the current one would."""
    st = applied(stage(), plan(stage(), [run(RUN1, attempt=1, phase="Running")]))
    old = st["status"]["freightHistory"][0]
    cid2 = freight_collection_id(["f2"])
    st["status"]["freightHistory"] = [collection("f2"), old]
    st["status"]["lastPromotion"]["status"]["freightCollection"]["id"] = cid2
    freight = {"f1": {"metadata": {"name": "f1"}, "status": {}},
               "f2": {"metadata": {"name": "f2"}, "status": {}}}
    p = plan(st, [run(RUN1, attempt=1, phase="Successful")], freight=freight)
    assert p.terminate == []
    done = applied(st, p)["status"]["freightHistory"][1]["verificationHistory"][0]
    assert done["phase"] == "Successful"
    assert ("f1", {"status": {"verifiedIn": {"prod": {"verifiedAt": done["finishTime"]}}}}) in (
        p.freight)
    assert "VerificationSucceeded" in [e.reason for e in p.events]


def test_foreign_run_for_the_collection_is_a_conflict_with_no_write() -> None:
    p = plan(stage(), [run("prod.01jdq7.5f1e2d3", attempt=0, ours=False)])
    assert p.conflict and p.create is None and p.status is None and p.freight == []
    assert [(e.type, e.reason) for e in p.events] == [("Warning", "VerifierConflict")]


def test_a_stage_kargo_reconciles_is_a_conflict_before_kargo_has_a_run() -> None:
    """Kargo's finalizer is there from Kargo's first reconcile, before its run and entry."""
    st = stage()
    st["metadata"]["finalizers"] = [KARGO_FINALIZER]
    p = plan(st)
    assert p.conflict and "kargo.akuity.io/finalizer" in p.conflict  # the text users read
    assert p.create is None and p.status is None and p.freight == []
    assert [(e.type, e.reason) for e in p.events] == [("Warning", "VerifierConflict")]
    assert plan(stage()).create is not None  # the same Stage without it is verified


def test_foreign_entry_in_the_history_is_a_conflict() -> None:
    history = [{"id": "0b9c5e0e-uuid", "phase": "Running"}]
    p = plan(stage(history=[collection("f1", history=history)]))
    assert p.conflict and p.status is None


def test_crash_after_create_adopts_the_run_instead_of_creating_another() -> None:
    st = stage()
    p = plan(st, [run(RUN1, attempt=1, phase="Running")])
    assert p.create is None
    assert current_history(applied(st, p))[0]["id"] == RUN1


def test_removing_the_stanza_aborts_the_running_verification_and_drops_verified() -> None:
    st = applied(stage(), plan(stage(), [run(RUN1, attempt=1, phase="Running")]))
    st["spec"].pop("verification")
    p = plan(st, [run(RUN1, attempt=1, phase="Running")])
    assert p.terminate == [planner.Terminate(RUN1, None)]
    st = applied(st, p)
    assert current_history(st)[0]["phase"] == "Aborted"
    assert "Verified" not in [c["type"] for c in st["status"].get("conditions", [])]


def test_long_stage_names_use_kargos_label_shortening() -> None:
    name = "s" * 70
    short = label_value(name)
    assert len(short) == 63
    import hashlib
    assert short == "s" * 54 + "-" + hashlib.sha256(name.encode()).hexdigest()[:8]


def test_a_run_no_entry_records_is_recorded_and_terminated_once_superseded() -> None:
    """Issue 19, found by the property in test_plan_property.py: a pass created the run,
    a SIGKILL (or a 409) lost its entry, then the Stage was promoted. The older
    collection gets an entry for the run, ended as superseded, and the run is
    terminated: before, no entry named it, so it ran on and was recorded nowhere."""
    cid2 = freight_collection_id(["f2"])
    st = stage(history=[collection("f2"), collection("f1")])
    st["status"]["lastPromotion"]["status"]["freightCollection"]["id"] = cid2
    p = plan(st, [run(RUN1, attempt=1, phase="Running")],
             freight={"f2": {"metadata": {"name": "f2"}}})
    assert planner.Terminate(RUN1, None) in p.terminate
    done = applied(st, p)["status"]["freightHistory"][1]["verificationHistory"]
    assert [(e["id"], e["phase"], e["message"]) for e in done] == [
        (RUN1, "Aborted", f"superseded by {cid2}")]
    assert done[0]["analysisRun"]["name"] == RUN1


def test_a_run_for_freight_the_history_no_longer_holds_is_terminated() -> None:
    st = stage(history=[collection("f2")])
    st["status"]["lastPromotion"]["status"]["freightCollection"]["id"] = (
        freight_collection_id(["f2"]))
    p = plan(st, [run(RUN1, attempt=1, phase="Running")],
             freight={"f2": {"metadata": {"name": "f2"}}})
    assert planner.Terminate(RUN1, None) in p.terminate


def test_a_late_freight_of_an_older_verified_collection_gets_verified_in() -> None:
    """Issue 19, 1a for a collection that is no longer the current one: f1's run
    succeeded and was recorded while f1 was not in the cache, then f2 was promoted;
    when f1 arrives, it is marked (and nothing else is written)."""
    done = {"id": RUN1, "actor": "rollgate", "phase": "Successful", "startTime": NOW,
            "finishTime": NOW, "message": "ok",
            "analysisRun": {"name": RUN1, "namespace": NS, "phase": "Successful"}}
    cid2 = freight_collection_id(["f2"])
    st = stage(history=[collection("f2"), collection("f1", history=[done])])
    st["status"]["lastPromotion"]["status"]["freightCollection"]["id"] = cid2
    freight = {"f1": {"metadata": {"name": "f1"}, "status": {}}, "f2": None}
    p = plan(st, [run(RUN1, attempt=1, phase="Successful"),
                  run(run_name("prod", cid2, 1), attempt=1, cid=cid2, phase="Running")],
             freight=freight)
    assert ("f1", {"status": {"verifiedIn": {"prod": {"verifiedAt": NOW}}}}) in p.freight
