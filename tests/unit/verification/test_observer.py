"""Observe mode's pure part: what it reports about another verifier's work."""

from __future__ import annotations

import datetime as dt
from typing import Any

from reconciler.verification.anomalies import anomalies, recheck_after
from reconciler.verification.naming import freight_collection_id

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
OLD = "2026-12-01T11:00:00Z"
C1, C2 = freight_collection_id(["f1"]), freight_collection_id(["f2"])


def run(name: str, cid: str, phase: str = "Running", created: str = OLD) -> dict[str, Any]:
    return {"metadata": {"name": name, "creationTimestamp": created,
                         "labels": {"kargo.akuity.io/stage": "prod",
                                    "kargo.akuity.io/freight-collection": cid}},
            "status": {"phase": phase}}


def stage(*collections: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "prod"}, "status": {"freightHistory": list(collections)}}


def collection(name: str, *entries: dict[str, Any]) -> dict[str, Any]:
    return {"id": freight_collection_id([name]),
            "items": {"Warehouse/w": {"name": name}}, "verificationHistory": list(entries)}


def entry(run_name: str, phase: str) -> dict[str, Any]:
    return {"id": "uuid-" + run_name, "phase": phase,
            "analysisRun": {"name": run_name, "namespace": "ns", "phase": phase}}


def kinds(found: list[Any]) -> list[str]:
    return [a.kind for a in found]


def test_a_healthy_history_reports_nothing() -> None:
    st = stage(collection("f1", entry("a", "Successful")))
    assert anomalies(st, [run("a", C1, "Successful")], {"f1": {}}, now=NOW) == []


def test_an_unrecorded_second_run_for_the_collection_is_a_duplicate() -> None:
    st = stage(collection("f1", entry("a", "Running")))
    found = anomalies(st, [run("a", C1), run("b", C1)], {}, now=NOW)
    assert kinds(found) == ["DuplicateVerificationRuns"] and found[0].subject == "b"


def test_a_reverify_is_not_a_duplicate() -> None:
    st = stage(collection("f1", entry("b", "Running"), entry("a", "Failed")))
    assert anomalies(st, [run("a", C1, "Failed"), run("b", C1)], {}, now=NOW) == []


def test_a_just_created_run_gets_its_grace_and_a_recheck() -> None:
    st = stage(collection("f1", entry("a", "Running")))
    young = run("b", C1, created="2026-12-01T11:59:50Z")
    assert anomalies(st, [run("a", C1), young], {}, now=NOW, grace=60) == []
    assert recheck_after(st, [run("a", C1), young], now=NOW, grace=60) == 51.0


def test_a_run_still_running_for_old_freight_is_stale() -> None:
    st = stage(collection("f2"), collection("f1", entry("a", "Running")))
    found = anomalies(st, [run("a", C1)], {}, now=NOW)
    assert kinds(found) == ["StaleVerificationRun"] and C2 in found[0].message


def test_failed_but_still_verified_in() -> None:
    st = stage(collection("f1", entry("a", "Failed")))
    freight = {"f1": {"status": {"verifiedIn": {"prod": {"verifiedAt": OLD}}}}}
    found = anomalies(st, [run("a", C1, "Failed")], freight, now=NOW)
    assert kinds(found) == ["VerifiedDespiteFailure"] and found[0].subject == "f1"
