"""``rollgate explain stage``'s pure builder (``reconciler.verification.explain``) and its
text (``explain_text``): the timeline's order and content, the one-sentence answer for
each state a user asks about, and the findings observe mode would report (the same
functions, not a copy). The shapes are those the real Kargo v1.11.2 and Argo Rollouts
v1.9.1 wrote in tests/e2e/verification/test_explain.py."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

from reconciler.verification.anomalies import anomalies
from reconciler.verification.explain import explain_stage
from reconciler.verification.explain_text import render
from schemas.constants import LABEL_FREIGHT_COLLECTION, LABEL_STAGE
from testkit import objects

NOW = dt.datetime(2026, 12, 1, 22, 30, tzinfo=dt.UTC)
CID = "c0b5e9fe7008f207ee03d92fa559410d5ee76e8c"
RUN = "test.01m8stxz5r1tqfzrrf9nzcyj95.c0b5e9f"
ENTRY = "0941559f-d75c-4a68-a3e6-f0fb9395a549"


def measurement(phase: str, value: str, at: str) -> dict[str, Any]:
    return {"phase": phase, "value": value, "startedAt": at, "finishedAt": at}


def run(phase: str = "Successful", *, name: str = RUN, cid: str = CID,
        values: tuple[str, ...] = ('"pass"', '"pass"'), created: str = "2026-12-01T22:17:15Z",
        ) -> dict[str, Any]:
    measured = "Successful" if phase == "Successful" else phase
    status: dict[str, Any] = {
        "phase": phase, "startedAt": created,
        "metricResults": [{
            "name": "verdict", "phase": measured, "count": len(values),
            "successful": len(values) if phase == "Successful" else 0,
            "failed": len(values) if phase == "Failed" else 0,
            "measurements": [measurement(measured, v, f"2026-12-01T22:17:{15 + 4 * i}Z")
                             for i, v in enumerate(values)]}]}
    if phase in ("Successful", "Failed", "Error", "Inconclusive"):
        status["completedAt"] = "2026-12-01T22:17:19Z"
    if phase == "Failed":
        status["message"] = 'Metric "verdict" assessed Failed due to failed (2) > failureLimit (1)'
        status["metricResults"][0]["message"] = status["message"]
    return objects.analysis_run(name, namespace="ns", creationTimestamp=created, status=status,
                                labels={LABEL_STAGE: "test",
                                        LABEL_FREIGHT_COLLECTION: cid})


def entry(phase: str = "Successful", *, ident: str = ENTRY, name: str = RUN,
          message: str = "") -> dict[str, Any]:
    found: dict[str, Any] = {"id": ident, "actor": "kargo", "startTime": "2026-12-01T22:17:15Z",
                             "phase": phase, "analysisRun": {"name": name, "namespace": "ns",
                                                             "phase": phase}}
    if phase not in ("Pending", "Running"):
        found["finishTime"] = "2026-12-01T22:17:19Z"
    if message:
        found["message"] = message
    return found


def stage(*entries: dict[str, Any], verified: str = "True", health: str = "Healthy",
          promotion: str = "Succeeded", freight: bool = True) -> dict[str, Any]:
    status: dict[str, Any] = {
        "health": {"status": health},
        "lastPromotion": {"name": "test.01m8stx.f-a1", "finishedAt": "2026-12-01T22:17:15Z",
                          "status": {"phase": promotion,
                                     "freightCollection": {"id": CID}}},
        "conditions": [{"type": "Verified", "status": verified,
                        "reason": "Verified" if verified == "True" else "VerificationFailed",
                        "message": "Freight has been verified" if verified == "True" else "m",
                        "lastTransitionTime": "2026-12-01T22:17:10Z"}],
    }
    if freight:
        status["freightHistory"] = [objects.freight_collection("f-a1", history=list(entries))]
    return objects.stage("test", namespace="ns", uid="u", freight=False, status=status)


def freight(*, verified: bool) -> dict[str, Any]:
    obj = objects.freight("f-a1", namespace="ns", warehouse="w")
    obj["status"] = {"verifiedIn": {"test": {"verifiedAt": "2026-12-01T22:17:19Z"}}
                     if verified else {}}
    return obj


def whats(doc: dict[str, Any]) -> list[str]:
    return [i["what"] for i in doc["timeline"]]


def test_a_verified_freight_reads_in_the_order_it_happened():
    doc = explain_stage(stage(entry()), [run()], {"f-a1": freight(verified=True)}, now=NOW)

    assert doc["answer"] == "verified"
    assert doc["stage"] == {"namespace": "ns", "name": "test"}
    assert doc["freight"] == {"collection": CID, "names": ["f-a1"]}
    assert whats(doc) == ["promotion", "health", "verification-started",
                          "analysis-run-started", "measurement", "measurement",
                          "analysis-run-completed", "verification", "condition", "freight"]
    texts = [i["text"] for i in doc["timeline"]]
    assert texts[0] == "promotion test.01m8stx.f-a1 finished: Succeeded"
    assert texts[2] == f"verification {ENTRY} started by kargo (AnalysisRun {RUN})"
    assert texts[4] == 'metric verdict measurement 1: Successful, value "pass"'
    assert texts[-2] == "condition Verified=True (Verified): Freight has been verified"
    assert texts[-1] == "Freight f-a1 is verified in test"
    assert doc["findings"] == []


def test_a_failed_verification_names_the_failing_metric_and_its_last_value():
    failed = run("Failed", values=('"fail"', '"fail"'))
    doc = explain_stage(stage(entry("Failed", message="Metric failed"), verified="False"),
                        [failed], {"f-a1": freight(verified=False)}, now=NOW)

    assert doc["answer"] == (
        f"not verified: the latest verification ({ENTRY}) is Failed: Metric failed; "
        'metric verdict: Failed, last value "fail" (Metric "verdict" assessed Failed due '
        "to failed (2) > failureLimit (1))")
    measurements = [i for i in doc["timeline"] if i["what"] == "measurement"]
    assert [(m["phase"], m["value"], m["number"]) for m in measurements] == [
        ("Failed", '"fail"', 1), ("Failed", '"fail"', 2)]
    assert doc["timeline"][-1]["text"] == "Freight f-a1 is not verified in test"


def test_findings_are_observe_modes_own():
    """A failed reverify after a success while verifiedIn still names the Stage: the
    document holds exactly what ``anomalies`` finds, and the answer names it."""
    first = entry(ident="first", name="test.first.c0b5e9f")
    latest = entry("Failed", ident="second", name=RUN)
    obj = stage(latest, first)
    runs = [run(name="test.first.c0b5e9f", created="2026-12-01T22:10:00Z"),
            run("Failed", values=('"fail"',))]
    found = {"f-a1": freight(verified=True)}

    doc = explain_stage(obj, runs, found, now=NOW)

    expected = anomalies(obj, runs, found, now=NOW)
    assert [(f["kind"], f["subject"], f["message"]) for f in doc["findings"]] == [
        (a.kind, a.subject, a.message) for a in expected]
    assert [f["kind"] for f in doc["findings"]] == ["VerifiedDespiteFailure"]
    assert doc["answer"] == ("verified (an earlier verification succeeded; the latest, "
                             "second, is Failed); VerifiedDespiteFailure")
    # Oldest first.
    starts = [i["id"] for i in doc["timeline"] if i["what"] == "verification-started"]
    assert starts == ["first", "second"]


def test_a_finished_run_kargo_has_not_recorded():
    lagging = stage(entry("Running"), verified="Unknown")
    doc = explain_stage(lagging, [run()], {"f-a1": freight(verified=False)}, now=NOW, lag=10)

    assert [f["kind"] for f in doc["findings"]] == ["VerificationNotRecorded"]
    assert doc["answer"].startswith(f"not verified: the latest verification ({ENTRY}) is "
                                    "Running; VerificationNotRecorded")


def test_waiting_before_any_verification_says_what_for():
    def answer(**kw: Any) -> str:
        return str(explain_stage(stage(verified="Unknown", **kw), [], {}, now=NOW)["answer"])

    assert answer(health="Progressing") == (
        "not verified: waiting for the Stage to become Healthy (health is Progressing)")
    assert answer(promotion="Failed").startswith(
        "not verified: waiting for promotion test.01m8stx.f-a1 to succeed")
    assert answer() == (
        "not verified: no verification has started yet (the verifier has not picked the "
        "Stage up)")
    assert answer(freight=False) == (
        "no freight: nothing has been promoted into this Stage yet")


def test_a_running_run_and_an_unrecorded_one_are_shown():
    running = run("Running", values=('"pass"',))
    stray = run(name="test.stray.c0b5e9f", created="2026-12-01T22:18:00Z")
    doc = explain_stage(stage(entry("Running"), verified="Unknown"), [running, stray],
                        {"f-a1": None}, now=NOW)

    texts = [i["text"] for i in doc["timeline"]]
    assert f"AnalysisRun {RUN} is Running" in texts
    assert "AnalysisRun test.stray.c0b5e9f started [in no verification entry]" in texts
    assert "Freight f-a1 not found" in texts


def test_malformed_objects_give_a_document_not_an_exception():
    broken = copy.deepcopy(stage(entry()))
    broken["status"]["freightHistory"][0]["verificationHistory"] = ["x", None, {}]
    broken["status"]["conditions"] = "nope"
    bad_run = {"metadata": {"name": RUN}, "status": {"metricResults": [
        None, {"measurements": "x"}]}}

    doc = explain_stage(broken, [bad_run], {}, now=NOW)

    assert doc["timeline"][-1]["text"] == "condition Verified: not set"


def test_the_text_has_every_item_and_the_answer():
    doc = explain_stage(stage(entry()), [run()], {"f-a1": freight(verified=True)}, now=NOW)

    text = render(doc)

    lines = text.splitlines()
    assert lines[0] == f"Stage ns/test, freight collection {CID} (Freight f-a1)"
    assert lines[1] == "Answer: verified"
    assert lines[3] == "2026-12-01T22:17:15Z  promotion test.01m8stx.f-a1 finished: Succeeded"
    assert lines[4] == " " * 22 + "health: Healthy"
    assert lines[7] == ('2026-12-01T22:17:15Z      metric verdict measurement 1: Successful, '
                        'value "pass"')
    assert lines[-1] == "Findings: none"
    assert all(i["text"] in text for i in doc["timeline"])
