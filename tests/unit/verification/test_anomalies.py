"""Observe mode's pure part (reconciler/verification/anomalies.py): what it reports
about another verifier's work, one function per finding."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from reconciler.verification.anomalies import (
    anomalies,
    duplicate_runs,
    not_recorded,
    phase_change_unmapped,
    recheck_after,
    stale_runs,
    verified_despite_failure,
)
from reconciler.verification.naming import freight_collection_id
from schemas.constants import LABEL_FREIGHT_COLLECTION, LABEL_STAGE
from testkit import objects

NOW = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
OLD = "2026-12-01T11:00:00Z"
C1, C2 = freight_collection_id(["f1"]), freight_collection_id(["f2"])


def run(name: str, cid: str, phase: str = "Running", created: str = OLD,
        completed: str | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase}
    if completed is not None:
        status["completedAt"] = completed
    return objects.analysis_run(name, creationTimestamp=created, status=status,
                                labels={LABEL_STAGE: "prod",
                                        LABEL_FREIGHT_COLLECTION: cid})


def ago(seconds: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def stage(*collections: dict[str, Any]) -> dict[str, Any]:
    return objects.stage(freight=False, status={"freightHistory": list(collections)})


def collection(name: str, *entries: dict[str, Any]) -> dict[str, Any]:
    return objects.freight_collection(name, history=list(entries))


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


def test_each_finding_is_its_own_function() -> None:
    st = stage(collection("f2"), collection("f1", entry("a", "Failed")))
    runs = [run("a", C1), run("b", C1)]
    assert kinds(duplicate_runs(st, runs, now=NOW)) == ["DuplicateVerificationRuns"]
    assert kinds(stale_runs(st, runs)) == ["StaleVerificationRun"] * 2
    st = stage(collection("f1", entry("a", "Failed")))
    freight: dict[str, Any] = {"f1": {"status": {"verifiedIn": {"prod": {}}}}}
    assert kinds(verified_despite_failure(st, freight)) == ["VerifiedDespiteFailure"]
    assert verified_despite_failure(st, {"f1": None}) == []


# ---------------------------------------------------------------- VerificationNotRecorded


def test_a_finished_run_the_current_entry_does_not_record_is_reported_past_the_lag() -> None:
    st = stage(collection("f1", entry("a", "Running")))
    runs = [run("a", C1, "Successful", completed=ago(30))]
    found = not_recorded(st, runs, now=NOW, lag=10)
    assert kinds(found) == ["VerificationNotRecorded"]
    assert found[0].subject == "uuid-a"  # one finding per entry, by its id
    assert "AnalysisRun a finished Successful 30s ago" in found[0].message
    assert "still says Running" in found[0].message
    assert kinds(anomalies(st, runs, {}, now=NOW, lag=10)) == ["VerificationNotRecorded"]


def test_within_the_lag_nothing_yet_and_the_pass_comes_back_when_it_is_due() -> None:
    st = stage(collection("f1", entry("a", "Pending")))
    runs = [run("a", C1, "Failed", completed=ago(4))]
    assert not_recorded(st, runs, now=NOW, lag=10) == []
    assert recheck_after(st, runs, now=NOW, lag=10) == 6.1
    assert recheck_after(st, runs, now=NOW + dt.timedelta(seconds=7), lag=10) is None
    assert kinds(not_recorded(st, runs, now=NOW + dt.timedelta(seconds=7), lag=10)) == [
        "VerificationNotRecorded"]


def test_the_earlier_of_the_grace_and_the_lag_decides_the_recheck() -> None:
    st = stage(collection("f1", entry("a", "Running")))
    young = run("b", C1, created=ago(55))
    runs = [run("a", C1, "Successful", completed=ago(8)), young]
    assert recheck_after(st, runs, now=NOW, grace=60, lag=10) == 2.1
    assert recheck_after(st, runs, now=NOW, grace=60, lag=30) == 6.0  # grace: 5 s + 1


@pytest.mark.parametrize("phase", ["Successful", "Failed", "Error", "Inconclusive"])
def test_every_completed_run_phase_counts(phase: str) -> None:
    st = stage(collection("f1", entry("a", "Running")))
    assert kinds(not_recorded(st, [run("a", C1, phase, completed=ago(11))], now=NOW,
                              lag=10)) == ["VerificationNotRecorded"]


@pytest.mark.parametrize(("entry_phase", "run_phase"), [
    ("Successful", "Successful"),  # recorded
    ("Failed", "Failed"),
    ("Aborted", "Successful"),
    ("Running", "Running"),  # still running: nothing to record
    ("Pending", "Pending"),
    ("Running", ""),
])
def test_a_recorded_entry_or_a_running_run_is_not_lagging(entry_phase: str,
                                                           run_phase: str) -> None:
    st = stage(collection("f1", entry("a", entry_phase)))
    runs = [run("a", C1, run_phase, completed=ago(60))]
    assert not_recorded(st, runs, now=NOW, lag=10) == []
    assert recheck_after(st, runs, now=NOW, lag=10) is None


def test_only_the_current_entry_of_the_current_freight_counts() -> None:
    done = [run("a", C1, "Successful", completed=ago(60)),
            run("b", C2, "Successful", completed=ago(60))]
    older_entry = stage(collection("f1", entry("b", "Successful"), entry("a", "Running")))
    older_freight = stage(collection("f2", entry("b", "Successful")),
                          collection("f1", entry("a", "Running")))
    for st in (older_entry, older_freight):
        assert not_recorded(st, done, now=NOW, lag=10) == []


def test_the_run_is_found_by_the_entrys_analysis_run_name_not_its_id() -> None:
    st = stage(collection("f1", {"id": "a", "phase": "Running"}))  # no run reference
    assert not_recorded(st, [run("a", C1, "Successful", completed=ago(60))], now=NOW) == []
    st = stage(collection("f1", entry("other", "Running")))
    assert not_recorded(st, [run("a", C1, "Successful", completed=ago(60))], now=NOW) == []


def test_without_completed_at_the_time_rollgate_first_saw_it_finished_counts() -> None:
    st = stage(collection("f1", entry("a", "Running")))
    runs = [run("a", C1, "Successful")]  # no status.completedAt
    assert not_recorded(st, runs, now=NOW, lag=10) == []  # when it finished is unknown
    assert recheck_after(st, runs, now=NOW, lag=10) is None
    seen = {"a": NOW - dt.timedelta(seconds=12)}
    assert kinds(not_recorded(st, runs, now=NOW, lag=10, first_seen=seen)) == [
        "VerificationNotRecorded"]
    seen = {"a": NOW - dt.timedelta(seconds=2)}
    assert recheck_after(st, runs, now=NOW, lag=10, first_seen=seen) == pytest.approx(8.1)


# ---------------------------------------------------------------- Kargo's handler's lookup


def test_a_completion_no_stage_names_yet_is_unmapped_as_kargos_handler_finds_none() -> None:
    running, done = run("a", C1, "Running"), run("a", C1, "Successful", completed=ago(0))
    # Kargo's entry for run a not yet in the cache: the Stage still shows its previous run
    before_entry = stage(collection("f0", entry("z", "Successful")))
    assert phase_change_unmapped(running, done, before_entry)
    assert phase_change_unmapped(running, done, stage())  # no freight history yet
    assert phase_change_unmapped(running, done, None)  # the Stage not cached at all
    # the entry is there: Kargo's index maps the change to the Stage
    assert not phase_change_unmapped(running, done, stage(collection("f1", entry("a", "Running"))))
    # an older entry naming the run does not count: Kargo indexes the current one only
    assert phase_change_unmapped(running, done, stage(
        collection("f1", entry("b", "Running"), entry("a", "Running"))))


@pytest.mark.parametrize(("old", "new"), [
    (None, "Successful"),  # first seen completed (a list): no change, Kargo ignores creates
    ("Successful", "Successful"),  # no phase change
    ("", "Running"),  # a change, but not into a completed phase
    ("Pending", "Running"),
])
def test_only_a_change_into_a_completed_phase_counts(old: str | None, new: str) -> None:
    previous = None if old is None else run("a", C1, old)
    assert not phase_change_unmapped(previous, run("a", C1, new), stage())


@pytest.mark.parametrize("phase", ["Successful", "Failed", "Error", "Inconclusive"])
def test_every_completed_phase_is_looked_up(phase: str) -> None:
    assert phase_change_unmapped(run("a", C1, "Running"), run("a", C1, phase), stage())
