"""Stage verification controller flows against an in-memory API (tests/unit/fake_kube.py).

Each test reproduces a failure a real API server cannot be told to produce on cue: a
request failing between two writes, a cache lagging the API, a template deleted after
its run was created. The e2e tests cover the same controller on a real control plane.
"""

from __future__ import annotations

from typing import Any

import pytest
from fake_kube import FakeApi, api_error, context
from kubernetes.client.exceptions import ApiException

from reconciler.analysis import build_analysis_run, freight_collection_id
from reconciler.controllers import stage_verification as sv
from reconciler.runtime.cache import CacheView
from reconciler.runtime.types import (
    ANALYSIS_RUN,
    ANALYSIS_TEMPLATE,
    APPLICATION,
    FREIGHT,
    STAGE,
    Key,
    Requeue,
    Resource,
)

NS = "shop"
REVERIFY = "kargo.akuity.io/reverify"
ABORT = "kargo.akuity.io/abort"
RUN1 = f"prod.{freight_collection_id(['f1'])[:7]}.1"
RUN2 = f"prod.{freight_collection_id(['f1'])[:7]}.2"


@pytest.fixture(autouse=True)
def rest_is_the_fake(monkeypatch: pytest.MonkeyPatch) -> None:
    # The controller wraps ctx.api in Rest; here ctx.api already is the REST surface.
    monkeypatch.setattr(sv, "Rest", lambda api: api)


def make_api(**spec: Any) -> FakeApi:
    api = FakeApi()
    api.put(ANALYSIS_TEMPLATE, {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisTemplate",
        "metadata": {"name": "t", "namespace": NS},
        "spec": {"metrics": [{"name": "m", "provider": {"job": {}}}]}})
    api.put(FREIGHT, {"apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Freight",
                      "metadata": {"name": "f1", "namespace": NS}})
    api.put(STAGE, {
        "apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Stage",
        "metadata": {"name": "prod", "namespace": NS, "uid": "u", "generation": 1},
        "spec": spec or {"analysis": {"templates": [{"templateName": "t"}]}},
        "status": {"freightHistory": [{"items": {"W/w": {"name": "f1"}}}]}})
    return api


def reconcile(api: FakeApi, ctx: Any = None) -> Any:
    ctx = ctx or context(api)
    sv.StageVerificationController().reconcile(Key(NS, "prod"), ctx)
    return ctx


def stage(api: FakeApi) -> dict[str, Any]:
    found = api.get(STAGE, NS, "prod")
    assert found is not None
    return found


def verification(api: FakeApi) -> dict[str, Any]:
    return stage(api)["status"]["verification"]


def set_run_phase(api: FakeApi, name: str, phase: str) -> None:
    run = api.get(ANALYSIS_RUN, NS, name)
    assert run is not None
    run.setdefault("status", {})["phase"] = phase
    api.put(ANALYSIS_RUN, run)


def annotate(api: FakeApi, key: str, value: str) -> None:
    st = stage(api)
    st["metadata"].setdefault("annotations", {})[key] = value
    api.put(STAGE, st)


def annotations(api: FakeApi) -> dict[str, str]:
    return stage(api)["metadata"].get("annotations") or {}


def removes(key: str):  # a JSON patch that removes annotation ``key``
    pointer = "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")
    return lambda verb, resource, name, body: (
        api_error(503) if verb == "patch" and isinstance(body, list)
        and {"op": "remove", "path": pointer} in body else None)


def verified_run(api: FakeApi) -> None:
    reconcile(api)
    set_run_phase(api, RUN1, "Successful")
    reconcile(api)
    assert verification(api)["phase"] == "Successful"


# ---------------------------------------------------------------- reverify (item 1)


def test_empty_reverify_survives_a_failed_annotation_removal_with_one_new_attempt():
    api = make_api()
    verified_run(api)
    annotate(api, REVERIFY, "")
    api.fail_once(removes(REVERIFY))  # the 503 lands after attempt 2 is recorded
    with pytest.raises(ApiException):
        reconcile(api)
    assert api.names(ANALYSIS_RUN) == [RUN1, RUN2]
    reconcile(api)  # the retry
    assert REVERIFY not in annotations(api)
    set_run_phase(api, RUN2, "Successful")
    reconcile(api)
    reconcile(api)
    assert api.names(ANALYSIS_RUN) == [RUN1, RUN2]  # no attempt 3
    assert verification(api)["attempt"] == 2


def test_empty_reverify_is_pinned_before_anything_is_created():
    api = make_api()
    verified_run(api)
    annotate(api, REVERIFY, "")
    # A crash right after the pin: the value now names attempt 1, which is still the
    # latest, so the next pass starts attempt 2 (once).
    api.fail_once(lambda verb, r, name, body: api_error(503) if verb == "create" else None)
    with pytest.raises(ApiException):
        reconcile(api)
    assert annotations(api)[REVERIFY] == RUN1
    reconcile(api)
    assert api.names(ANALYSIS_RUN) == [RUN1, RUN2]
    assert REVERIFY not in annotations(api)


def test_reverify_from_a_stale_cache_creates_no_extra_attempt():
    api = make_api()
    verified_run(api)
    annotate(api, REVERIFY, "")
    old_view = CacheView({r: type(s)(r) for r, s in api.stores.items()})
    for r, s in api.stores.items():
        for o in s.list():
            old_view._store(r).upsert(o)
    reconcile(api)  # attempt 2 starts, annotation removed
    reconcile(api, context(api, cache=old_view))  # a cache that still shows reverify ""
    assert api.names(ANALYSIS_RUN) == [RUN1, RUN2]


# ---------------------------------------------------------------- abort value (item 7)


def test_abort_naming_an_older_verification_is_dropped_without_aborting():
    api = make_api()
    reconcile(api)
    annotate(api, ABORT, "prod.0000000.9")
    ctx = reconcile(api)
    assert verification(api)["phase"] == "Running"
    assert ABORT not in annotations(api)
    assert ctx.events.reasons() == ["AbortIgnored"]
    assert "prod.0000000.9" in ctx.events.emitted[0][2]
    assert not any("terminate" in c for c in api.calls)


@pytest.mark.parametrize("value", ["", RUN1])
def test_abort_empty_or_naming_the_latest_aborts(value):
    api = make_api()
    reconcile(api)
    annotate(api, ABORT, value)
    reconcile(api)
    assert verification(api)["phase"] == "Aborted"
    assert api.get(ANALYSIS_RUN, NS, RUN1)["spec"]["terminate"] is True
    assert ABORT not in annotations(api)


# ---------------------------------------------------------------- adoption (items 4, 10)


def _run_created_before_a_crash(api: FakeApi) -> None:
    def lookup(kind: str, namespace: str, name: str) -> Any:
        return api.get(ANALYSIS_TEMPLATE, namespace, name)

    run = build_analysis_run(stage(api), lookup, freight=["f1"])
    api.create(ANALYSIS_RUN, NS, run)


def test_adoption_does_not_rebuild_the_run_after_its_template_was_deleted():
    api = make_api()
    _run_created_before_a_crash(api)
    template = api.get(ANALYSIS_TEMPLATE, NS, "t")
    api.stores[ANALYSIS_TEMPLATE].remove(template)
    reconcile(api)
    assert verification(api)["phase"] == "Running"
    assert verification(api)["analysisRun"]["name"] == RUN1


def test_adoption_does_not_rebuild_the_run_after_its_template_changed():
    api = make_api()
    _run_created_before_a_crash(api)
    template = api.get(ANALYSIS_TEMPLATE, NS, "t")
    template["spec"]["args"] = [{"name": "needs-a-value"}]  # would now be a build error
    api.put(ANALYSIS_TEMPLATE, template)
    reconcile(api)
    assert verification(api)["phase"] == "Running"


def test_adoption_still_refuses_a_run_with_foreign_labels():
    api = make_api()
    api.create(ANALYSIS_RUN, NS, {"metadata": {"name": RUN1, "labels": {"x": "y"}},
                                  "spec": {}})
    reconcile(api)
    assert verification(api)["phase"] == "Error"
    assert "labels differ" in verification(api)["message"]


class LaggingCache:
    """A cache that has not seen any AnalysisRun yet (its list raced the create)."""

    def __init__(self, api: FakeApi) -> None:
        self.view = CacheView(api.stores)

    def get(self, resource: Resource, namespace: str, name: str) -> Any:
        return None if resource == ANALYSIS_RUN else self.view.get(resource, namespace, name)

    def list(self, resource: Resource, namespace: str | None = None) -> list[Any]:
        return [] if resource == ANALYSIS_RUN else self.view.list(resource, namespace)


def test_lagging_cache_create_already_exists_get_adopt_exactly_one_run():
    api = make_api()
    _run_created_before_a_crash(api)
    api.calls.clear()
    seen: list[str] = []
    api.fail_once(lambda verb, r, name, body: seen.append(f"{verb} {name}") if (
        r == ANALYSIS_RUN and verb == "get") else None)
    reconcile(api, context(api, cache=LaggingCache(api)))
    assert api.names(ANALYSIS_RUN) == [RUN1]
    assert seen == [f"get {RUN1}"]  # the GET after AlreadyExists
    assert not any(c.startswith("create") for c in api.calls)  # the create was refused
    assert verification(api)["phase"] == "Running"
    assert verification(api)["analysisRun"]["name"] == RUN1


# ---------------------------------------------------------------- error classes (item 9)


@pytest.mark.parametrize("status", [403, 400, 422])
def test_definite_rejection_of_the_create_is_a_recorded_error(status):
    api = make_api()
    api.fail_once(lambda verb, r, name, body: api_error(status) if verb == "create" else None)
    reconcile(api)
    assert verification(api)["phase"] == "Error"
    assert "rejected" in verification(api)["message"]


@pytest.mark.parametrize("status", [0, 408, 429, 500, 503])
def test_transient_failure_of_the_create_is_retried_not_recorded(status):
    api = make_api()
    api.fail_once(lambda verb, r, name, body: api_error(status) if verb == "create" else None)
    with pytest.raises(ApiException):
        reconcile(api)
    assert "verification" not in stage(api)["status"]


# ---------------------------------------------------------------- unwatched Application (3)


def _gated_on_app(namespace: str) -> FakeApi:
    api = make_api(
        analysis={"templates": [{"templateName": "t"}]},
        promotionMechanisms={"argoCDAppUpdates": [{"appName": "web", "appNamespace": namespace}]},
    )
    api.put(APPLICATION, {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
                          "metadata": {"name": "web", "namespace": namespace},
                          "status": {"health": {"status": "Progressing"},
                                     "sync": {"status": "Synced"}}})
    return api


class NoApplications(LaggingCache):
    """The cache of a reconciler that watches only the Stage's namespace."""

    def get(self, resource: Resource, namespace: str, name: str) -> Any:
        return None if resource == APPLICATION else self.view.get(resource, namespace, name)

    def list(self, resource: Resource, namespace: str | None = None) -> list[Any]:
        return [] if resource == APPLICATION else self.view.list(resource, namespace)


def test_waiting_on_an_unwatched_application_polls_it():
    api = _gated_on_app("argocd")
    ctx = context(api, cache=NoApplications(api), namespaces=[NS])
    with pytest.raises(Requeue) as raised:
        reconcile(api, ctx)
    assert raised.value.after > 0
    assert "Progressing" in verification(api)["message"]  # status written before polling


def test_waiting_on_a_watched_application_relies_on_its_events():
    api = _gated_on_app(NS)
    reconcile(api, context(api, namespaces=[NS]))  # no Requeue: its events wake the Stage
    assert "Progressing" in verification(api)["message"]


# ---------------------------------------------------------------- stanza removed (item 5)


def _drop_stanza(api: FakeApi) -> None:
    st = stage(api)
    st["spec"].pop("analysis")
    api.put(STAGE, st)


def test_removing_the_stanza_terminates_the_active_run_and_clears_status():
    api = make_api()
    reconcile(api)
    _drop_stanza(api)
    ctx = reconcile(api)
    status = stage(api)["status"]
    assert "verification" not in status
    assert not any(c["type"] == "Verified" for c in status.get("conditions") or [])
    assert status["verificationHistory"][0]["id"] == RUN1
    assert status["verificationHistory"][0]["phase"] == "Aborted"
    assert api.get(ANALYSIS_RUN, NS, RUN1)["spec"]["terminate"] is True
    assert ctx.events.reasons() == ["VerificationAborted"]
    api.calls.clear()
    reconcile(api)
    assert api.calls == []  # nothing left to do


def test_removing_the_stanza_after_success_keeps_history_and_verified_in():
    api = make_api()
    verified_run(api)
    _drop_stanza(api)
    reconcile(api)
    status = stage(api)["status"]
    assert "verification" not in status and "conditions" not in status
    assert [h["phase"] for h in status["verificationHistory"]] == ["Successful"]
    # The freight was verified; removing the check later does not un-verify it.
    assert "prod" in api.get(FREIGHT, NS, "f1")["status"]["verifiedIn"]
    assert not any("terminate" in c for c in api.calls)
