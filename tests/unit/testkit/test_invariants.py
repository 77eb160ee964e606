"""The shared settle-time rules (support/testkit/invariants.py) find each kind of defect: the
planner's property test and the fault suites assert zero defects, which only means
something if a broken state is reported."""

from __future__ import annotations

from typing import Any

from reconciler.verification.naming import freight_collection_id
from schemas.constants import LABEL_FREIGHT_COLLECTION, LABEL_MANAGED_BY, LABEL_STAGE, MANAGED_BY
from testkit import invariants, objects

CID = freight_collection_id(["f1"])


def run(name: str, phase: str, *, cid: str = CID) -> dict[str, Any]:
    return objects.analysis_run(name, status={"phase": phase}, labels={
        LABEL_MANAGED_BY: MANAGED_BY, LABEL_STAGE: "prod", LABEL_FREIGHT_COLLECTION: cid})


def stage(*entries: dict[str, Any]) -> dict[str, Any]:
    return objects.stage(freight=False, status={"freightHistory": [
        objects.freight_collection("f1", history=list(entries))]})


def entry(run_name: str, phase: str) -> dict[str, Any]:
    return {"id": run_name, "phase": phase, "actor": "rollgate",
            "analysisRun": {"name": run_name, "namespace": "ns", "phase": phase}}


def freight(*, verified: bool) -> dict[str, Any]:
    obj = objects.freight("f1", warehouse="w")
    obj["status"] = {"verifiedIn": {"prod": {}} if verified else {}}
    return obj


def counts(stages: list[Any], runs: list[Any], frt: list[Any]) -> dict[str, int]:
    found = invariants.defects(stages=stages, runs=runs, freight=frt)
    return {k: v for k, v in found.counts().items() if v}


def test_a_settled_success_has_no_defect() -> None:
    assert counts([stage(entry("r1", "Successful"))], [run("r1", "Successful")],
                  [freight(verified=True)]) == {}


def test_each_broken_state_is_reported_as_its_defect() -> None:
    ok_run = run("r1", "Successful")
    assert counts([stage(entry("r1", "Successful"))], [ok_run, run("r2", "Successful")],
                  [freight(verified=True)]) == {"duplicates": 1, "unrecorded": 1}
    assert counts([stage(entry("r1", "Running"))], [ok_run],
                  [freight(verified=False)]) == {"wrong_phases": 1}
    assert counts([stage(entry("r1", "Successful"))], [ok_run],
                  [freight(verified=False)]) == {"missing_verified_in": 1}
    assert counts([stage(entry("r1", "Failed"))], [run("r1", "Failed")],
                  [freight(verified=True)]) == {"false_verified_in": 1}
    assert counts([stage(entry("r1", "Successful"), entry("r2", "Successful"))],
                  [ok_run, run("r2", "Running")], [freight(verified=True)]) == {
        "left_running": 1, "wrong_phases": 1, "duplicates": 1}  # two runs, one collection
    assert counts([stage(entry("r1", "Successful"), entry("r1", "Successful"))], [ok_run],
                  [freight(verified=True)]) == {"duplicates": 1}
