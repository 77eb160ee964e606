"""The observe-mode controller (reconciler/verification/observer.py) over the one fake
API (support/testkit/fakeapi/): what it reports, when it comes back, and its one write
(--refresh-lagging)."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry

from kubekit.kinds import ANALYSIS_RUN, FREIGHT, STAGE
from reconciler.runtime.types import Context, Key, Requeue
from reconciler.verification.naming import freight_collection_id
from reconciler.verification.observer import VerificationObserver
from reconciler.verification.options import VerificationOptions
from reconciler.verification.payloads import ANNOTATION_REFRESH
from schemas.constants import LABEL_FREIGHT_COLLECTION, LABEL_STAGE
from testkit import objects
from testkit.fakeapi import Events, FakeApi, Request, api_error, context

NS = "shop"
CID = freight_collection_id(["f1"])
RUN = f"prod.01jabcdefghjkmnpqrstvwxyz.{CID[:7]}"  # Kargo's run name


def stamp(seconds_ago: float) -> str:
    at = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds_ago)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


def make_api(*, entry_phase: str = "Running", run_phase: str = "Successful",
             completed: float | None = 30, labels: dict[str, str] | None = None) -> FakeApi:
    """A Stage as Kargo verifies it: an entry with a UUID id naming Kargo's run."""
    api = FakeApi()
    api.put(FREIGHT, objects.freight("f1", namespace=NS, warehouse="w"))
    api.put(STAGE, objects.stage(
        "prod", namespace=NS, uid="u", labels=labels or {}, freight=False,
        status={"freightHistory": [{
            "id": CID, "items": {"Warehouse/w": {"name": "f1"}},
            "verificationHistory": [{
                "id": "9b1c7e52-uuid", "phase": entry_phase, "startTime": stamp(60),
                "analysisRun": {"name": RUN, "namespace": NS, "phase": "Running"}}]}]}))
    status: dict[str, Any] = {"phase": run_phase}
    if completed is not None:
        status["completedAt"] = stamp(completed)
    api.put(ANALYSIS_RUN, objects.analysis_run(
        RUN, namespace=NS, creationTimestamp=stamp(60), status=status,
        labels={LABEL_STAGE: "prod", LABEL_FREIGHT_COLLECTION: CID}))
    return api


def observer(**options: Any) -> VerificationObserver:
    return VerificationObserver(
        options=VerificationOptions(**{"observe_lag_seconds": 10, **options}))


def reconcile(controller: VerificationObserver, ctx: Any) -> float | None:
    """One pass; the requeue delay it asked for, if any."""
    try:
        controller.reconcile(Key(NS, "prod"), ctx)
    except Requeue as rq:
        return rq.after
    return None


def events_of(ctx: Context) -> Events:
    """The events recorded in a ``testkit.fakeapi.context``."""
    assert isinstance(ctx.events, Events)
    return ctx.events


def sample(controller: VerificationObserver, name: str, **labels: str) -> float | None:
    """Metric ``name`` of Stage ``prod`` with ``labels``, as the controller exports it."""
    registry = CollectorRegistry()
    for collector in controller.collectors:
        registry.register(collector)
    return registry.get_sample_value(name, {"namespace": NS, "stage": "prod", **labels})


def anomaly_count(controller: VerificationObserver, kind: str) -> float | None:
    return sample(controller, "rollgate_verification_anomalies_total", kind=kind)


def refreshes(api: FakeApi) -> list[Request]:
    """The patches of the Stage (any subresource) that succeeded: its refresh requests."""
    return [r for r in api.requests if r.verb == "patch" and r.resource == STAGE
            and r.name == "prod" and r.error is None]


def test_a_lagging_entry_is_one_warning_event_and_one_count_and_nothing_written() -> None:
    api = make_api()
    controller = observer()
    ctx = context(api, controller=controller)
    assert reconcile(controller, ctx) is None
    assert reconcile(controller, ctx) is None  # found again: not reported again
    assert events_of(ctx).reasons() == ["VerificationNotRecorded"]
    assert events_of(ctx).emitted[0][0] == "Warning"
    assert RUN in events_of(ctx).emitted[0][2] and "9b1c7e52-uuid" in events_of(ctx).emitted[0][2]
    assert anomaly_count(controller, "VerificationNotRecorded") == 1
    assert api.writes() == []  # observe mode writes nothing without --refresh-lagging


def test_the_pass_comes_back_when_the_lag_becomes_due() -> None:
    api = make_api(completed=3)
    controller = observer()
    ctx = context(api, controller=controller)
    after = reconcile(controller, ctx)
    # completedAt has whole seconds: the run finished 3 to 4 s ago, so 6 to 7 s are left
    assert after is not None and 6.0 < after <= 7.2
    assert events_of(ctx).reasons() == []


def test_a_run_without_completed_at_is_timed_from_when_rollgate_saw_it_finished() -> None:
    api = make_api(completed=None)
    controller = observer(observe_lag_seconds=0.05)
    ctx = context(api, controller=controller)
    after = reconcile(controller, ctx)
    assert after is not None and after <= 0.2 and events_of(ctx).reasons() == []
    # the requeue's pass: first seen at the first pass, now past the lag
    time.sleep(after)
    assert reconcile(controller, ctx) is None
    assert events_of(ctx).reasons() == ["VerificationNotRecorded"]


def test_a_recorded_entry_is_not_lagging() -> None:
    api = make_api(entry_phase="Successful")
    controller = observer()
    ctx = context(api, controller=controller)
    assert reconcile(controller, ctx) is None
    assert events_of(ctx).reasons() == [] and api.writes() == []


def finished_count(controller: VerificationObserver, phase: str) -> float | None:
    return sample(controller, "rollgate_verifications_finished_total", phase=phase)


@pytest.mark.parametrize(("message", "counted"), [
    ("Verification aborted by user", "Aborted"),  # how Kargo v1.11.2 records an abort
    ('Metric "verdict" assessed Failed due to failed (2) > failureLimit (1)', "Failed"),
])
def test_kargos_abort_is_counted_aborted_and_a_failure_failed(message: str,
                                                              counted: str) -> None:
    """The failure alert pages on phase Failed; a user's abort must not be one."""
    controller = observer()
    api = make_api(entry_phase="Failed")
    stage = api.get(STAGE, NS, "prod")
    assert stage is not None
    stage["status"]["freightHistory"][0]["verificationHistory"][0].update(
        message=message, finishTime=stamp(-1))  # finished after the observer started
    api.put(STAGE, stage)
    reconcile(controller, context(api, controller=controller))
    other = ({"Aborted", "Failed"} - {counted}).pop()
    assert (finished_count(controller, counted), finished_count(controller, other)) == (1, None)


def test_refresh_lagging_sets_kargos_refresh_request_once_per_entry() -> None:
    api = make_api()
    controller = observer(refresh_lagging=True)
    ctx = context(api, controller=controller)
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    reconcile(controller, ctx)
    reconcile(controller, ctx)
    (call,) = refreshes(api)
    assert str(call) == "patch stages/prod"  # the Stage itself, not its status
    body = call.body
    value = body["metadata"]["annotations"][ANNOTATION_REFRESH]
    assert body == {"metadata": {"annotations": {ANNOTATION_REFRESH: value}}}  # metadata only
    value = body["metadata"]["annotations"][ANNOTATION_REFRESH]
    assert value.endswith("Z") and dt.datetime.fromisoformat(value) >= before  # RFC 3339
    stage = api.get(STAGE, NS, "prod")
    assert stage is not None and stage["metadata"]["annotations"][ANNOTATION_REFRESH] == value
    assert "status" not in body
    assert events_of(ctx).reasons() == ["VerificationNotRecorded"]


def test_a_new_lagging_entry_is_refreshed_again() -> None:
    api = make_api()
    controller = observer(refresh_lagging=True)
    ctx = context(api, controller=controller)
    reconcile(controller, ctx)
    stage = api.get(STAGE, NS, "prod")
    assert stage is not None
    stage["status"]["freightHistory"][0]["verificationHistory"][0]["id"] = "second-uuid"
    api.put(STAGE, stage)
    reconcile(controller, ctx)
    assert len(refreshes(api)) == 2
    assert events_of(ctx).reasons() == ["VerificationNotRecorded"] * 2


def test_a_failed_refresh_is_retried_without_a_second_event() -> None:
    api = make_api()
    controller = observer(refresh_lagging=True)
    ctx = context(api, controller=controller)
    api.fail("patch", 503)
    with pytest.raises(ApiException):
        reconcile(controller, ctx)
    assert refreshes(api) == []
    reconcile(controller, ctx)  # the runtime's retry
    reconcile(controller, ctx)
    assert len(refreshes(api)) == 1
    assert events_of(ctx).reasons() == ["VerificationNotRecorded"]


def test_a_stage_gone_before_its_refresh_is_no_error() -> None:
    api = make_api()
    controller = observer(refresh_lagging=True)
    ctx = context(api, controller=controller)
    api.fail("patch", api_error(404, "NotFound"))
    assert reconcile(controller, ctx) is None


def run_event(api: FakeApi, controller: VerificationObserver, ctx: Any, *,
              old_phase: str = "Running") -> None:
    """The run's completion as the informer hands it to the controller's mapping, with
    the cache as it is at that moment."""
    (watch,) = [w for w in controller.watches if w.resource == ANALYSIS_RUN]
    run = api.get(ANALYSIS_RUN, NS, RUN)
    assert run is not None
    old = {**run, "status": {"phase": old_phase}}
    assert watch.mapper(old, run, ctx.cache) == [Key(NS, "prod")]


def test_a_completion_before_kargos_entry_is_refreshed_at_once_without_a_finding() -> None:
    api = make_api(entry_phase="Successful", completed=0)  # the Stage shows an older entry
    stage = api.get(STAGE, NS, "prod")
    assert stage is not None
    entry = stage["status"]["freightHistory"][0]["verificationHistory"][0]
    entry["analysisRun"]["name"] = "older-run"
    api.put(STAGE, stage)
    controller = observer(refresh_lagging=True)
    ctx = context(api, controller=controller)
    run_event(api, controller, ctx)  # the run completes: no Stage names it yet
    # then Kargo's entry for the run arrives, still Pending, as Kargo never heard of the end
    entry["analysisRun"]["name"], entry["phase"], entry["id"] = RUN, "Pending", "new-uuid"
    api.put(STAGE, stage)
    after = reconcile(controller, ctx)
    (call,) = refreshes(api)  # at once: not after the 10 s lag
    assert ANNOTATION_REFRESH in call.body["metadata"]["annotations"]
    assert events_of(ctx).reasons() == []  # no finding yet: Kargo may still record it in time
    assert after is not None and after > 8  # the finding stays due at the lag
    reconcile(controller, ctx)
    assert len(refreshes(api)) == 1  # once per entry


def test_a_completion_kargo_could_map_waits_for_the_lag() -> None:
    api = make_api(completed=0)  # the entry names the run before it completes
    controller = observer(refresh_lagging=True)
    ctx = context(api, controller=controller)
    run_event(api, controller, ctx)
    assert reconcile(controller, ctx) is not None
    assert refreshes(api) == []  # Kargo's handler found the Stage: it is in Kargo's queue


def test_an_unmapped_completion_lagging_past_the_lag_is_one_refresh_and_one_finding() -> None:
    api = make_api(completed=30)
    stage = api.get(STAGE, NS, "prod")
    assert stage is not None
    controller = observer(refresh_lagging=True)
    ctx = context(api, controller=controller)
    stage["status"]["freightHistory"] = []
    api.put(STAGE, stage)
    run_event(api, controller, ctx)
    api.put(STAGE, make_api(completed=30).get(STAGE, NS, "prod") or {})
    reconcile(controller, ctx)
    reconcile(controller, ctx)
    assert len(refreshes(api)) == 1
    assert events_of(ctx).reasons() == ["VerificationNotRecorded"]


def test_without_refresh_lagging_an_unmapped_completion_writes_nothing() -> None:
    api = make_api(completed=0)
    stage = api.get(STAGE, NS, "prod")
    assert stage is not None
    stage["status"]["freightHistory"] = []
    api.put(STAGE, stage)
    controller = observer()
    ctx = context(api, controller=controller)
    run_event(api, controller, ctx)
    api.put(STAGE, make_api(completed=0).get(STAGE, NS, "prod") or {})
    reconcile(controller, ctx)
    assert api.writes() == []


def stage_event(api: FakeApi, controller: VerificationObserver, ctx: Any) -> None:
    """Kargo's entry appearing, as the informer hands the change to the controller's
    mapping: the Stage before (no freight history yet) and after, as the cache keeps them."""
    watch = next(w for w in controller.watches if w.resource.plural == "stages")
    stage = ctx.cache.get(watch.resource, NS, "prod")
    assert stage is not None
    before = {**stage, "status": {**stage["status"], "freightHistory": []}}
    assert watch.mapper(before, stage, ctx.cache) == [Key(NS, "prod")]


@pytest.mark.parametrize(("entry_age", "refreshed"), [
    (5.0, 0),  # the entry was there long before: Kargo's handler queued the Stage
    (0.3, 1),  # a completion close behind its entry: the caches may have raced
])
def test_a_completion_long_after_its_entry_is_reported_but_not_refreshed(
        entry_age: float, refreshed: int) -> None:
    api = make_api(completed=30)  # lagging past the 10 s lag either way
    controller = observer(refresh_lagging=True)
    ctx = context(api, controller=controller)
    now = [100.0]
    controller._clock = lambda: now[0]
    stage_event(api, controller, ctx)  # Kargo's entry naming the run appears
    now[0] += entry_age
    run_event(api, controller, ctx)  # then the run completes
    reconcile(controller, ctx)
    assert events_of(ctx).reasons() == ["VerificationNotRecorded"]  # the finding stands
    assert len(refreshes(api)) == refreshed


def test_a_deleted_stage_leaves_nothing_in_the_observers_memory() -> None:
    api = make_api(entry_phase="Successful", completed=0)
    stage = api.get(STAGE, NS, "prod")
    assert stage is not None
    stage["status"]["freightHistory"][0]["verificationHistory"][0]["analysisRun"]["name"] = (
        "older-run")
    api.put(STAGE, stage)
    controller = observer(refresh_lagging=True)
    ctx = context(api, controller=controller)
    run_event(api, controller, ctx)  # a completion no Stage names: remembered for "prod"
    memory = controller._memory
    assert memory.completion(Key(NS, "prod"), RUN) == "unmapped"
    api.remove(STAGE, NS, "prod")
    reconcile(controller, ctx)
    assert memory.completion(Key(NS, "prod"), RUN) is None
    assert memory.entry_seen(Key(NS, "prod"), RUN, 7.0) == 7.0  # nothing older kept
