"""The look-ups' failure behaviour: an unreachable API server means "unavailable"
(schemas then skips the cross-object warnings), never an exception the webhook has to
survive; and the cache forgets on time and stays bounded."""

from __future__ import annotations

import socket

import pytest
import reviews
from kubernetes import client as k8s
from prometheus_client import generate_latest

import schemas
import webhook
from webhook.config import WebhookConfig
from webhook.lookups import ClusterLookups, TTLCache


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens here once the socket is closed


@pytest.fixture
def unreachable_api() -> k8s.ApiClient:
    cfg = k8s.Configuration()
    cfg.host = f"https://127.0.0.1:{_closed_port()}"
    cfg.retries = False
    return k8s.ApiClient(cfg)


def test_unreachable_api_server_is_lookup_unavailable(unreachable_api):
    lookups = ClusterLookups(unreachable_api, timeout=1.0, ttl=5.0)
    with pytest.raises(schemas.LookupUnavailable):
        lookups.template("AnalysisTemplate", "guestbook", "success-rate")
    with pytest.raises(schemas.LookupUnavailable):
        lookups.template("ClusterAnalysisTemplate", "", "latency")
    with pytest.raises(schemas.LookupUnavailable):
        lookups.rollout_managers("argo-rollouts")
    # the failure is remembered briefly: the second ask does not wait for the network
    with pytest.raises(schemas.LookupUnavailable):
        lookups.template("AnalysisTemplate", "guestbook", "success-rate")
    text = generate_latest().decode()
    assert 'rollgate_webhook_lookups_total{kind="AnalysisTemplate",result="error"}' in text


def test_unknown_template_kind_is_not_looked_up(unreachable_api):
    assert ClusterLookups(unreachable_api).template("Pod", "ns", "x") is None


def test_webhook_with_unreachable_api_still_answers(unreachable_api):
    app = webhook.create_app(WebhookConfig(api_client=unreachable_api, lookup_timeout=1.0))
    resp = app.test_client().post("/validate/stages", json=reviews.review(reviews.valid_stage()))
    assert resp.status_code == 200
    answer = resp.get_json()["response"]
    assert answer["allowed"] is True
    assert not answer.get("warnings")


def test_ttl_cache_expires_and_is_bounded():
    now = [0.0]
    cache = TTLCache(ttl=5.0, max_entries=2, clock=lambda: now[0])
    cache.put(("AnalysisTemplate", "ns", "a"), {"spec": {}})
    assert cache.get(("AnalysisTemplate", "ns", "a")) == (True, {"spec": {}})
    cache.put(("AnalysisTemplate", "ns", "missing"), None)
    assert cache.get(("AnalysisTemplate", "ns", "missing")) == (True, None)  # 404 is cached
    now[0] = 5.0
    assert cache.get(("AnalysisTemplate", "ns", "a")) == (False, None)
    for name in "xyz":
        cache.put(("AnalysisTemplate", "ns", name), name)
    assert cache.get(("AnalysisTemplate", "ns", "x")) == (False, None)  # evicted (oldest)
    assert cache.get(("AnalysisTemplate", "ns", "z")) == (True, "z")
    cache.put(("k", "n", "short"), 1, ttl=1.0)
    now[0] = 6.5
    assert cache.get(("k", "n", "short")) == (False, None)
