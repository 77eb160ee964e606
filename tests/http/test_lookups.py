"""The look-ups' failure behaviour: an unreachable API server means "unavailable"
(schemas then skips the cross-object warnings), never an exception the webhook has to
survive; the cache forgets on time and stays bounded; and look-ups that may not wait
answer from the cache or say the request must wait.

The API server's messages are spelled as it writes them, not built from schemas.kinds."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client as k8s

import schemas
import webhook
from testkit import objects, reviews
from testkit.net import free_port, send_json
from testkit.webhook_client import Client
from webhook import metrics
from webhook.config import MustWait, WebhookConfig
from webhook.lookups import ClusterLookups, TTLCache


@pytest.fixture
def unreachable_api() -> k8s.ApiClient:
    cfg = k8s.Configuration()
    cfg.host = f"https://127.0.0.1:{free_port()}"  # nothing listens there
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
    text = metrics.exposition()[0].decode()  # what /metrics shows
    assert 'rollgate_webhook_lookups_total{kind="AnalysisTemplate",result="error"}' in text


def test_unknown_template_kind_is_not_looked_up(unreachable_api):
    assert ClusterLookups(unreachable_api).template("Pod", "ns", "x") is None


def test_webhook_with_unreachable_api_still_answers(unreachable_api):
    app = webhook.create_app(WebhookConfig(api_client=unreachable_api, lookup_timeout=1.0))
    resp = Client(app).post("/validate/stages", json=reviews.review(reviews.valid_stage()))
    assert resp.status_code == 200
    answer = resp.get_json()["response"]
    assert answer["allowed"] is True
    assert not answer.get("warnings")


def test_ttl_cache_expires_and_is_bounded():
    now = [0.0]
    cache = TTLCache(ttl=5.0, max_entries=2, clock=lambda: now[0])
    cache.put(("AnalysisTemplate", "ns", "a"), {"spec": {}})
    assert cache.get(("AnalysisTemplate", "ns", "a")) == (True, {"spec": {}}, False)
    cache.put(("AnalysisTemplate", "ns", "missing"), None)
    assert cache.get(("AnalysisTemplate", "ns", "missing")) == (True, None, False)  # cached
    now[0] = 5.0
    assert cache.get(("AnalysisTemplate", "ns", "a")) == (False, None, False)
    for name in "xyz":
        cache.put(("AnalysisTemplate", "ns", name), name)
    assert cache.get(("AnalysisTemplate", "ns", "x")) == (False, None, False)  # evicted
    assert cache.get(("AnalysisTemplate", "ns", "z")) == (True, "z", False)
    cache.put(("k", "n", "short"), 1, ttl=1.0)
    now[0] = 6.5
    assert cache.get(("k", "n", "short")) == (False, None, False)


def test_ttl_cache_says_when_an_entry_is_due_for_a_refresh():
    now = [0.0]
    cache = TTLCache(ttl=5.0, clock=lambda: now[0])
    key = ("AnalysisTemplate", "ns", "a")
    cache.put(key, "v", refresh_after=2.5)
    now[0] = 2.4
    assert cache.get(key) == (True, "v", False)
    now[0] = 2.5
    assert cache.get(key) == (True, "v", True)  # still served: only due
    now[0] = 5.0
    assert cache.get(key) == (False, None, False)
    cache.put(key, "w", refresh_after=2.5)  # put again: due again only later
    now[0] = 7.0
    assert cache.get(key) == (True, "w", False)
    cache.drop(key)
    assert cache.get(key) == (False, None, False)


def test_a_value_put_while_an_expired_one_is_read_is_kept():
    """The cache is read without its lock: a fresh value another thread puts between
    that read and the expired entry's removal stays."""
    key = ("AnalysisTemplate", "ns", "a")
    now = [0.0]
    race = [False]

    def clock() -> float:
        if race[0]:
            race[0] = False
            # Another thread, between the read and the removal; bounded, so a get that
            # holds the lock while it reads the clock fails here instead of hanging.
            writer = threading.Thread(target=cache.put, args=(key, "fresh"))
            writer.start()
            writer.join(timeout=2)
            assert not writer.is_alive(), "the cache's lock was held while it was read"
        return now[0]

    cache = TTLCache(ttl=5.0, clock=clock)
    cache.put(key, "old")
    now[0] = 5.0
    race[0] = True
    assert cache.get(key) == (False, None, False)  # what it read had expired
    assert cache.get(key) == (True, "fresh", False)


@pytest.fixture
def slow_api():
    """A slow but alive API server: every GET answers 404 after 0.9 s, under the
    per-call timeout of the look-ups below. ``api.gets`` lists the paths it was asked
    for, so a test can count the look-ups a request made."""
    import http.server
    import threading
    import time

    gets: list[str] = []

    class Slow(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            gets.append(self.path)
            time.sleep(0.9)
            send_json(self, 404, {"kind": "Status", "apiVersion": "v1",
                                  "status": "Failure", "code": 404})

        def log_message(self, *args: object) -> None:
            pass

    class Server(http.server.ThreadingHTTPServer):
        def handle_error(self, request: object, client_address: object) -> None:
            pass  # the client gave up (its budget ran out): expected here

    server = Server(("127.0.0.1", 0), Slow)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    cfg = k8s.Configuration()
    cfg.host = f"http://127.0.0.1:{server.server_address[1]}"
    cfg.retries = False
    api = k8s.ApiClient(cfg)
    api.gets = gets  # type: ignore[attr-defined]
    yield api
    server.shutdown()
    server.server_close()


def test_one_lookup_budget_per_admission_request(slow_api):
    """Six templates at 0.9 s each would take 5.4 s, past the API server's 5 s webhook
    timeout; the request's 1 s budget cuts that short and the answer comes without the
    (now unknowable) template warnings. Counted, not timed: within a 1 s budget at most
    two 0.9 s look-ups can start (the second with 0.1 s left); without one all six do."""
    app = webhook.create_app(WebhookConfig(api_client=slow_api, lookup_timeout=1.0))
    stage = reviews.valid_stage()
    stage["spec"]["analysis"]["templates"] = [
        {"templateName": f"t{i}", "clusterScope": False} for i in range(6)
    ]
    resp = Client(app).post("/validate/stages", json=reviews.review(stage))
    answer = resp.get_json()["response"]
    assert answer["allowed"] is True
    assert not answer.get("warnings")
    assert 1 <= len(slow_api.gets) <= 2, slow_api.gets
    # The next request gets a budget of its own (and nothing stale was cached).
    Client(app).post("/validate/stages", json=reviews.review(stage))
    assert 2 <= len(slow_api.gets) <= 4, slow_api.gets


def test_a_spent_budget_skips_the_fetch_and_caches_nothing(unreachable_api, monkeypatch):
    lookups = ClusterLookups(unreachable_api, timeout=1.0, ttl=5.0)
    calls: list[float] = []

    def get(*a, **kw):
        calls.append(kw["timeout"])
        return {"spec": {}}

    monkeypatch.setattr(lookups._rest, "get", get)
    import time

    with pytest.raises(schemas.LookupUnavailable):
        lookups.template("AnalysisTemplate", "ns", "a", deadline=time.monotonic() - 1)
    assert calls == []
    # a fresh request is not affected, and each fetch waits at most the time left
    assert lookups.template("AnalysisTemplate", "ns", "a",
                            deadline=time.monotonic() + 0.5) == {"spec": {}}
    assert len(calls) == 1 and calls[0] <= 0.5


def test_a_forbidden_lookup_is_one_log_line_with_status_reason_and_object(caplog):
    """While a namespace is deleted (or RBAC is missing) the API server answers 403;
    the log says so in one line, without the client's dump of response headers."""
    import http.server
    import threading

    class Forbidden(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            send_json(self, 403, {
                "kind": "Status", "apiVersion": "v1", "status": "Failure",
                "reason": "Forbidden", "code": 403,
                "message": 'analysistemplates.argoproj.io "t" is forbidden: no'},
                headers={"X-Noise": "header-that-must-not-be-logged"})

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forbidden)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    cfg = k8s.Configuration()
    cfg.host = f"http://127.0.0.1:{server.server_address[1]}"
    cfg.retries = False
    try:
        with pytest.raises(schemas.LookupUnavailable):
            ClusterLookups(k8s.ApiClient(cfg)).template("AnalysisTemplate", "ns", "t")
    finally:
        server.shutdown()
        server.server_close()
    [line] = [r.getMessage() for r in caplog.records if r.name == "rollgate.webhook.lookups"]
    assert line == ('look-up of AnalysisTemplate/ns/t failed: API error 403 Forbidden: '
                    'analysistemplates.argoproj.io "t" is forbidden: no')
    assert "header-that-must-not-be-logged" not in caplog.text


@pytest.fixture
def template_api():
    """An API server that has every template asked for (one metric, no args) and counts
    the GETs in ``api.gets``. ``api.status`` (200) is what it answers from then on (a
    404 or 500 is a Status); ``api.metric`` names the templates' metric."""
    import http.server
    import threading

    gets: list[str] = []
    state: dict[str, Any] = {"status": 200, "metric": ""}

    class Templates(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            gets.append(self.path)
            if state["status"] != 200:
                send_json(self, state["status"], {"kind": "Status", "apiVersion": "v1",
                                                  "status": "Failure", "code": state["status"]})
                return
            kind = "ClusterAnalysisTemplate" if "/clusteranalysistemplates/" in self.path \
                else "AnalysisTemplate"
            send_json(self, 200, objects.analysis_template(
                self.path.rsplit("/", 1)[1], cluster=kind == "ClusterAnalysisTemplate",
                metrics=[{"name": state["metric"] or kind.lower(), "provider": {
                    "web": {"url": "http://metrics.example/q"}}}]))

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Templates)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    cfg = k8s.Configuration()
    cfg.host = f"http://127.0.0.1:{server.server_address[1]}"
    cfg.retries = False
    api = k8s.ApiClient(cfg)
    api.gets = gets  # type: ignore[attr-defined]
    api.state = state  # type: ignore[attr-defined]
    yield api
    server.shutdown()
    server.server_close()


def test_cached_only_lookups_answer_from_the_cache_or_must_wait(template_api):
    lookups = ClusterLookups(template_api, timeout=2.0, ttl=60.0)
    with pytest.raises(MustWait):
        lookups.template("AnalysisTemplate", "ns", "a", cached_only=True)
    assert template_api.gets == []  # it did not ask the API server
    fetched = lookups.template("AnalysisTemplate", "ns", "a")
    assert fetched is not None
    assert lookups.template("AnalysisTemplate", "ns", "a", cached_only=True) == fetched
    assert len(template_api.gets) == 1
    with pytest.raises(MustWait):  # the RolloutManager list is never cached
        lookups.rollout_managers("ns", cached_only=True)


def test_a_review_that_must_wait_is_answered_where_it_may_and_counted_once(template_api):
    """What the server's event loop does: ask without waiting first (None: a look-up
    is not cached), then where waiting is allowed; once the templates are cached the
    answer comes without waiting, the same answer."""
    app = webhook.create_app(WebhookConfig(api_client=template_api, cache_ttl=60.0))
    body = json.dumps(reviews.review(reviews.valid_stage())).encode()

    def requests_counted() -> float:
        app.after_answers()  # as the server does once it has written the answers
        return sum(s.value for m in metrics.REQUESTS.collect() for s in m.samples
                   if s.name.endswith("_total")
                   and s.labels.get("endpoint") == "/validate/stages")

    before = requests_counted()
    assert app.respond("POST", "/validate/stages", body, may_wait=False) is None
    assert requests_counted() == before  # not answered: not counted
    waited = app.respond("POST", "/validate/stages", body)
    cached = app.respond("POST", "/validate/stages", body, may_wait=False)
    assert waited is not None and cached == waited
    assert json.loads(cached.body)["response"]["allowed"] is True
    assert requests_counted() == before + 2
    assert len(template_api.gets) == 2  # the two templates, each once


_KEY = ("AnalysisTemplate", "ns", "a")


def _metric_of(template: dict[str, Any] | None) -> str:
    assert template is not None
    name: str = template["spec"]["metrics"][0]["name"]
    return name


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, f"timed out after 5s waiting for {what}"
        time.sleep(0.01)


def test_a_template_asked_for_after_half_its_ttl_is_fetched_again_in_the_background(
        template_api):
    """The request that finds it due is answered from the cache at once; the template
    fetched meanwhile answers the next, and lives a full ttl from then: a steady flow
    of requests never waits for it."""
    lookups = ClusterLookups(template_api, ttl=1.0)
    key = _KEY
    assert _metric_of(lookups.template(*key)) == "analysistemplate"
    assert _metric_of(lookups.template(*key, cached_only=True)) == "analysistemplate"
    assert len(template_api.gets) == 1  # not due yet: nothing fetched
    template_api.state["metric"] = "changed"
    time.sleep(0.55)
    for _ in range(5):  # however many ask while it is fetched: one fetch
        assert _metric_of(lookups.template(*key, cached_only=True)) == "analysistemplate"
    _until(lambda: _metric_of(lookups.template(*key, cached_only=True)) == "changed",
           "the template fetched in the background")
    assert len(template_api.gets) == 2
    time.sleep(0.5)  # past the first fetch's ttl, not the second's
    assert _metric_of(lookups.template(*key, cached_only=True)) == "changed"


def _due_for_refresh(api: k8s.ApiClient, **answers: Any) -> ClusterLookups:
    """Look-ups (ttl 1 s) that fetched _KEY once, past its refresh point now, from an
    API server that answers ``answers`` (``template_api``'s state) from then on."""
    lookups = ClusterLookups(api, ttl=1.0)
    lookups.template(*_KEY)
    api.state.update(answers)  # type: ignore[attr-defined]
    time.sleep(0.55)
    return lookups


def test_a_template_deleted_since_is_dropped_when_it_is_refreshed(template_api):
    lookups = _due_for_refresh(template_api, status=404)
    lookups.template(*_KEY, cached_only=True)  # due: refreshed in the background

    def dropped() -> bool:
        try:
            lookups.template(*_KEY, cached_only=True)
        except MustWait:
            return True
        return False

    _until(dropped, "the deleted template to leave the cache")
    assert len(template_api.gets) == 2  # dropped by the refresh, not by its ttl
    assert lookups.template(*_KEY) is None  # the next request finds it missing


def test_a_failed_refresh_leaves_the_cached_template_to_expire(template_api):
    lookups = _due_for_refresh(template_api, status=500)
    assert lookups.template(*_KEY, cached_only=True) is not None  # due: refresh starts
    _until(lambda: len(template_api.gets) == 2, "the refresh")
    assert _metric_of(lookups.template(*_KEY, cached_only=True)) == "analysistemplate"
    time.sleep(0.5)  # the first fetch's ttl is over
    with pytest.raises(MustWait):
        lookups.template(*_KEY, cached_only=True)
