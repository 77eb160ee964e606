"""The engine-mode executor (reconciler/verification/engine.py) over the one
fake API (support/testkit/fakeapi/).

Each test makes the API do what a real server cannot be told to do on cue: fail one
request, answer AlreadyExists for a run the cache has not seen, refuse a stale write.
The e2e tests run the same controller against a real control plane.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from prometheus_client import CollectorRegistry

from kubekit.kinds import ANALYSIS_RUN, ANALYSIS_TEMPLATE, EVENT, FREIGHT, STAGE, Resource
from kubekit.rest import is_already_exists
from reconciler.runtime.cache import CacheView, Store
from reconciler.runtime.status import Conflict
from reconciler.runtime.types import Key
from reconciler.verification import plan as planner
from reconciler.verification.engine import StageVerificationController
from reconciler.verification.naming import freight_collection_id, run_name
from testkit import objects
from testkit.fakeapi import FakeApi, api_error, context

NS = "shop"
CID = freight_collection_id(["f1"])
RUN1 = run_name("prod", CID, 1)


def make_api() -> FakeApi:
    api = FakeApi()
    api.put(ANALYSIS_TEMPLATE, objects.analysis_template("t", namespace=NS, metrics=[
        {"name": "m", "provider": {"web": {"url": "http://x"}}}]))
    api.put(FREIGHT, objects.freight("f1", namespace=NS, warehouse="w"))
    api.put(STAGE, objects.stage(
        "prod", namespace=NS, uid="u", generation=1, freight=False,
        spec={"requestedFreight": []}, verification=objects.verification("t"),
        status={"freightHistory": [{"id": CID, "items": {"Warehouse/w": {"name": "f1"}}}],
                "health": {"status": "Healthy"}}))
    return api


def reconcile(api: FakeApi, ctx: Any = None) -> Any:
    controller = StageVerificationController()
    ctx = ctx or context(api, controller=controller)
    controller.reconcile(Key(NS, "prod"), ctx)
    return ctx


def history(api: FakeApi) -> list[dict[str, Any]]:
    stage = api.get(STAGE, NS, "prod")
    assert stage is not None
    entries: list[dict[str, Any]] = stage["status"]["freightHistory"][0].get(
        "verificationHistory", [])
    return entries


def finish_run(api: FakeApi, phase: str) -> None:
    run = api.get(ANALYSIS_RUN, NS, RUN1)
    assert run is not None
    run["status"] = {"phase": phase}
    api.put(ANALYSIS_RUN, run)


def writes(api: FakeApi) -> list[str]:
    return [w for w in api.writes() if not w.startswith("create events")]


def stores(api: FakeApi, controller: StageVerificationController, *,
           live: bool = True) -> dict[Resource, Store]:
    """The stores of a cache of what ``controller`` watches, with its indexes and cache
    transforms."""
    return api.stores(*(w.resource for w in controller.watches), live=live,
                      indexes=controller.indexes, transforms=controller.transforms)


def test_one_pass_creates_the_run_and_writes_the_status_once() -> None:
    api = make_api()
    reconcile(api)
    assert writes(api) == [f"create analysisruns/{RUN1}", "patch stages/prod/status"]
    assert history(api)[0]["id"] == RUN1


def test_success_marks_freight_then_an_unchanged_world_is_not_written() -> None:
    api = make_api()
    reconcile(api)
    finish_run(api, "Successful")
    api.requests.clear()
    reconcile(api)
    assert writes(api) == ["patch freights/f1/status", "patch stages/prod/status"]
    freight = api.get(FREIGHT, NS, "f1")
    assert freight is not None and "prod" in freight["status"]["verifiedIn"]
    api.requests.clear()
    reconcile(api)
    reconcile(api)
    assert writes(api) == []


def test_create_already_exists_for_a_run_the_cache_has_not_seen_adopts_it() -> None:
    api = make_api()
    reconcile(api)
    stage = api.get(STAGE, NS, "prod")
    assert stage is not None
    stage["status"].pop("freightHistory")
    stage["status"]["freightHistory"] = [{"id": CID, "items": {"Warehouse/w": {"name": "f1"}}}]
    api.put(STAGE, stage)  # status lost (as if the write never happened)
    # A cache that has not seen the run: creating it again answers AlreadyExists.
    controller = StageVerificationController()
    unseen = stores(api, controller, live=False)
    for run in unseen[ANALYSIS_RUN].list():
        unseen[ANALYSIS_RUN].remove(run)
    ctx = context(api, cache=CacheView(unseen), controller=controller)
    api.requests.clear()
    controller.reconcile(Key(NS, "prod"), ctx)
    [refused] = [r for r in api.requests if r.error is not None]
    assert str(refused) == f"create analysisruns/{RUN1}"
    assert isinstance(refused.error, ApiException) and is_already_exists(refused.error)
    assert api.names(ANALYSIS_RUN) == [RUN1]
    assert history(api)[0]["id"] == RUN1


def test_a_foreign_object_holding_the_name_is_an_error_entry() -> None:
    api = make_api()
    api.put(ANALYSIS_RUN, objects.analysis_run(RUN1, namespace=NS, labels={}))
    reconcile(api)
    entry = history(api)[0]
    assert entry["phase"] == "Error" and "not created by rollgate" in entry["message"]


@pytest.mark.parametrize("status", [0, 429, 503])
def test_transient_create_failure_is_retried_not_recorded(status: int) -> None:
    api = make_api()
    api.fail("create", status, when=lambda r: r.resource == ANALYSIS_RUN)
    with pytest.raises(ApiException):
        reconcile(api)
    stage = api.get(STAGE, NS, "prod")
    assert stage is not None and "verificationHistory" not in stage["status"]["freightHistory"][0]
    reconcile(api)
    assert api.names(ANALYSIS_RUN) == [RUN1]


def test_definite_rejection_of_the_create_is_an_error_entry() -> None:
    api = make_api()
    api.fail("create", api_error(422, "Invalid"), when=lambda r: r.resource == ANALYSIS_RUN)
    reconcile(api)
    assert history(api)[0]["phase"] == "Error"
    assert "rejected" in history(api)[0]["message"]


@pytest.mark.parametrize("status", [0, 503])
def test_transient_template_lookup_is_not_a_missing_template(status: int) -> None:
    api = make_api()
    api.remove(ANALYSIS_TEMPLATE, NS, "t")
    api.fail("get", status, when=lambda r: r.resource == ANALYSIS_TEMPLATE)
    with pytest.raises(ApiException):
        reconcile(api)
    stage = api.get(STAGE, NS, "prod")
    assert stage is not None and "verificationHistory" not in stage["status"]["freightHistory"][0]


def test_stale_stage_write_is_a_conflict_for_the_runtime_to_retry() -> None:
    api = make_api()
    stale = api.get(STAGE, NS, "prod")
    assert stale is not None
    api.put(STAGE, stale)  # someone else wrote it: our copy is now stale
    controller = StageVerificationController()

    class Stale(CacheView):
        def get(self, resource, namespace, name):
            return stale if resource == STAGE else super().get(resource, namespace, name)

    ctx = context(api, cache=Stale(stores(api, controller)), controller=controller)
    with pytest.raises(Conflict):
        controller.reconcile(Key(NS, "prod"), ctx)
    assert api.names(ANALYSIS_RUN) == [RUN1]  # the next pass adopts it
    controller.reconcile(Key(NS, "prod"), context(api, controller=controller))
    assert api.names(ANALYSIS_RUN) == [RUN1] and history(api)[0]["id"] == RUN1


def test_deleted_stage_leaves_no_verified_in_and_no_runs() -> None:
    api = make_api()
    reconcile(api)
    finish_run(api, "Successful")
    reconcile(api)
    api.remove(STAGE, NS, "prod")
    reconcile(api)
    freight = api.get(FREIGHT, NS, "f1")
    assert freight is not None and freight["status"]["verifiedIn"] == {}
    assert api.names(ANALYSIS_RUN) == []


def test_a_finished_verification_is_counted_in_the_controllers_own_metrics() -> None:
    api = make_api()
    controller = StageVerificationController()
    ctx = context(api, controller=controller)
    controller.reconcile(Key(NS, "prod"), ctx)
    finish_run(api, "Successful")
    controller.reconcile(Key(NS, "prod"), ctx)
    controller.reconcile(Key(NS, "prod"), ctx)  # nothing new: not counted again
    registry = CollectorRegistry()
    for collector in controller.collectors:
        registry.register(collector)
    assert registry.get_sample_value("rollgate_verifications_finished_total", {
        "namespace": NS, "stage": "prod", "phase": "Successful"}) == 1


def test_a_run_of_older_freight_that_succeeded_marks_that_freight_through_the_engine() -> None:
    """Issue 19, 1b, end to end through the executor: the run of f1 succeeded after the
    Stage was promoted to f2 but before rollgate recorded it. The pass gives the planner
    the Freight of every collection in the history, so f1 gets ``verifiedIn`` (with only
    the current collection's Freight, the planner could not mark it)."""
    api = make_api()
    reconcile(api)  # RUN1 created for f1, recorded Pending
    finish_run(api, "Successful")
    api.put(FREIGHT, objects.freight("f2", namespace=NS, warehouse="w"))
    stage = api.get(STAGE, NS, "prod")
    assert stage is not None
    cid2 = freight_collection_id(["f2"])
    stage["status"]["freightHistory"].insert(
        0, {"id": cid2, "items": {"Warehouse/w": {"name": "f2"}}})
    api.put(STAGE, stage)  # promoted to f2 before the success was recorded
    reconcile(api)
    older = api.get(STAGE, NS, "prod")["status"]["freightHistory"][1]  # type: ignore[index]
    assert older["verificationHistory"][0]["phase"] == "Successful"
    freight = api.get(FREIGHT, NS, "f1")
    assert freight is not None and "prod" in freight["status"]["verifiedIn"]


def test_a_pass_plans_once_from_plain_data_it_read_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine reads a template the cache has not seen from the API before planning,
    then plans once: the run it creates and the status recording that run come from one
    plan over plain data. A create that comes out other than planned (a foreign object
    holds the name) is the one case of a second pass, planned from what the create found."""
    worlds: list[planner.World] = []
    plan = planner.plan

    def counted(world: planner.World) -> planner.Plan:
        worlds.append(world)
        return plan(world)

    monkeypatch.setattr(planner, "plan", counted)
    api = make_api()
    controller = StageVerificationController()
    unseen = stores(api, controller, live=False)
    for template in unseen[ANALYSIS_TEMPLATE].list():
        unseen[ANALYSIS_TEMPLATE].remove(template)  # created a moment ago
    ctx = context(api, cache=CacheView(unseen), controller=controller)
    api.requests.clear()
    controller.reconcile(Key(NS, "prod"), ctx)
    assert [str(r) for r in api.requests if r.verb != "create" or r.resource != EVENT] == [
        "get analysistemplates/t", f"create analysisruns/{RUN1}", "patch stages/prod/status"]
    assert len(worlds) == 1
    assert not _callables(dataclasses.asdict(worlds[0]))
    assert history(api)[0]["analysisRun"]["name"] == RUN1

    worlds.clear()
    foreign = make_api()
    foreign.put(ANALYSIS_RUN, objects.analysis_run(RUN1, namespace=NS, labels={}))
    reconcile(foreign)
    assert [w.blocked for w in worlds] == [{}, {RUN1: worlds[1].blocked[RUN1]}]
    assert "not created by rollgate" in worlds[1].blocked[RUN1]


def _callables(value: Any) -> list[Any]:
    """Every callable in a JSON-like value, at any depth."""
    if callable(value):
        return [value]
    if isinstance(value, dict):
        return [c for k, v in value.items() for c in (*_callables(k), *_callables(v))]
    if isinstance(value, list | tuple):
        return [c for v in value for c in _callables(v)]
    return []
