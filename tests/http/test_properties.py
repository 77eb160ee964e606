"""Property: whatever arrives, the webhook answers deliberately (never a 5xx), and any
well-formed AdmissionReview gets an AdmissionReview back with its uid."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import webhook
from testkit import objects, reviews
from testkit.webhook_client import Client
from webhook.config import Lookups, WebhookConfig

ENDPOINTS = ["/validate/stages", "/mutate/stages",
             "/validate/rolloutmanagers", "/mutate/rolloutmanagers"]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=30,
)


def _mess_with(base: Any, data: st.DataObject) -> Any:
    """Replace random sub-trees of a realistic object with random JSON."""
    if isinstance(base, dict):
        out = {}
        for key, value in base.items():
            choice = data.draw(st.integers(0, 9))
            if choice == 0:
                continue  # drop the field
            out[key] = data.draw(json_values) if choice == 1 else _mess_with(value, data)
        if data.draw(st.integers(0, 9)) == 0:
            out[data.draw(st.text(max_size=10))] = data.draw(json_values)
        return out
    if isinstance(base, list):
        return [_mess_with(v, data) for v in base]
    return data.draw(json_values) if data.draw(st.integers(0, 4)) == 0 else base


def _lookups() -> Lookups:
    # Look-ups that answer a random-but-valid-JSON shape, to reach the cross-object code.
    return Lookups(
        template=lambda kind, ns, name: {"kind": kind, "spec": {"args": [{"name": name}],
                                                               "metrics": [{"name": "m"}]}},
        rollout_managers=lambda ns: [reviews.valid_rollout_manager(name="other")],
    )


class _Faults(logging.Handler):
    """Collects the webhook's internal-fault log records: the fault path answers
    deliberately, but reaching it for any input shape is a bug in a check."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture(scope="module")
def faults():
    handler = _Faults()
    logger = logging.getLogger("rollgate.webhook")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


@pytest.fixture(scope="module")
def client(faults):
    return Client(webhook.create_app(WebhookConfig(lookups=_lookups())))


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(path=st.sampled_from(ENDPOINTS), body=json_values)
def test_random_json_never_gets_a_5xx(client, faults, path, body):
    resp = client.post(path, data=json.dumps(body), content_type="application/json")
    assert resp.status_code in (200, 400)
    assert "Traceback" not in resp.get_data(as_text=True)
    assert not faults.records, faults.records[0].exc_info


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    path=st.sampled_from(ENDPOINTS),
    base=st.sampled_from([
        reviews.valid_stage(), reviews.invalid_stage(),
        reviews.valid_rollout_manager(), reviews.invalid_rollout_manager(),
        objects.stage(namespace="guestbook", freight=False, verification={
            "analysisTemplates": [{"name": "a"}], "args": [{"name": "x", "value": "1"}]}),
    ]),
    operation=st.sampled_from(["CREATE", "UPDATE", "DELETE", "CONNECT", 7, None]),
    data=st.data(),
)
def test_random_admission_reviews_are_answered_with_their_uid(client, faults, path, base,
                                                              operation, data):
    obj = _mess_with(base, data)
    old = _mess_with(base, data) if operation == "UPDATE" else None
    body = reviews.review(base, operation="CREATE", uid="uid-prop")
    body["request"]["operation"] = operation
    body["request"]["object"] = obj
    body["request"]["oldObject"] = old
    if data.draw(st.booleans()):
        body["request"] = _mess_with(body["request"], data)
        body["request"]["uid"] = "uid-prop"
    resp = client.post(path, data=json.dumps(body), content_type="application/json")
    assert resp.status_code == 200, resp.get_data(as_text=True)
    answer = resp.get_json()["response"]
    assert answer["uid"] == "uid-prop"
    assert isinstance(answer["allowed"], bool)
    if not answer["allowed"]:
        assert answer["status"]["code"] in (400, 422), answer["status"]
    assert not faults.records, faults.records[0].exc_info
