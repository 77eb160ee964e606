"""Transient API errors are retried, never recorded as a final verification Error.

A stand-in for the REST layer lets a unit test make the API fail on purpose (the e2e
tests cover the real API); what is checked is that the error propagates to the
runtime (which retries with backoff) and that no status was written.
"""

from __future__ import annotations

import pytest
from kubernetes.client.exceptions import ApiException

from reconciler.controllers.stage_verification import StageVerificationController, _Sync
from reconciler.runtime.cache import CacheView, Store
from reconciler.runtime.types import ANALYSIS_TEMPLATE, STAGE, Context, Key

NS = "shop"
TEMPLATE = {"apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisTemplate",
            "metadata": {"name": "t", "namespace": NS},
            "spec": {"metrics": [{"name": "m", "provider": {"job": {}}}]}}
STAGE_OBJ = {
    "apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Stage",
    "metadata": {"name": "prod", "namespace": NS, "uid": "u", "generation": 1,
                 "resourceVersion": "1"},
    "spec": {"analysis": {"templates": [{"templateName": "t"}]}},
    "status": {"currentFreight": {"name": "f1"}},
}


class FailingRest:
    def __init__(self, *, fail_on: str, status: int):
        self.fail_on = fail_on
        self.status = status
        self.writes: list[str] = []

    def _maybe_fail(self, op):
        if op == self.fail_on:
            raise ApiException(status=self.status, reason="injected")

    def get(self, resource, namespace, name):
        self._maybe_fail(f"get-{resource.plural}")
        return None

    def create(self, resource, namespace, body):
        self._maybe_fail(f"create-{resource.plural}")
        self.writes.append(f"create {resource.plural}")
        return body

    def replace(self, resource, namespace, name, body, subresource=""):
        self._maybe_fail(f"replace-{resource.plural}")
        self.writes.append(f"replace {resource.plural}/{subresource}")
        return body

    def patch(self, *args, **kwargs):
        self.writes.append("patch")
        return {}


class Events:
    def __init__(self):
        self.emitted = []

    def emit(self, obj, *, type, reason, message):
        self.emitted.append(reason)


def context(with_template: bool) -> Context:
    # The caches the controller has at run time: one per resource it watches.
    stores = {r: Store(r) for r in StageVerificationController.watches}
    stores[STAGE].upsert(STAGE_OBJ)
    if with_template:
        stores[ANALYSIS_TEMPLATE].upsert(TEMPLATE)
    return Context(cache=CacheView(stores), api=None, events=Events(), options={})


@pytest.mark.parametrize("status", [0, 429, 500, 503, 504])
def test_transient_error_creating_the_run_propagates_without_a_status(status):
    ctx = context(with_template=True)
    rest = FailingRest(fail_on="create-analysisruns", status=status)
    sync = _Sync(StageVerificationController(), Key(NS, "prod"), STAGE_OBJ, ctx, rest)
    with pytest.raises(ApiException):
        sync.run()
    assert rest.writes == []
    assert ctx.events.emitted == []


@pytest.mark.parametrize("status", [0, 503])
def test_transient_error_looking_up_a_template_is_not_a_missing_template(status):
    ctx = context(with_template=False)  # cache miss -> the controller asks the API
    rest = FailingRest(fail_on="get-analysistemplates", status=status)
    sync = _Sync(StageVerificationController(), Key(NS, "prod"), STAGE_OBJ, ctx, rest)
    with pytest.raises(ApiException):
        sync.run()
    assert rest.writes == []


def test_a_template_missing_from_cache_and_api_is_a_recorded_error():
    ctx = context(with_template=False)
    rest = FailingRest(fail_on="nothing", status=0)
    sync = _Sync(StageVerificationController(), Key(NS, "prod"), STAGE_OBJ, ctx, rest)
    sync.run()
    assert rest.writes == ["replace stages/status"]
    assert sync.stage["status"]["verification"]["phase"] == "Error"
    assert ctx.events.emitted == ["VerificationError"]


def test_server_error_writing_status_propagates_for_a_retry():
    ctx = context(with_template=True)
    rest = FailingRest(fail_on="replace-stages", status=500)
    sync = _Sync(StageVerificationController(), Key(NS, "prod"), STAGE_OBJ, ctx, rest)
    with pytest.raises(ApiException):
        sync.run()
    assert ctx.events.emitted == []
