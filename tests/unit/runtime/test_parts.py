"""Runtime pieces that need no API server: informer bookkeeping (against the fake API,
support/testkit/fakeapi/, whose watch hook plays what happens between requests), the
worker's retry rules, leases, flags, probes.

The expected paths, selectors and messages are spelled out, not built from
schemas.kinds: they state what the API server and users see, apart from the code under
test."""

from __future__ import annotations

import datetime as dt
import threading
import urllib.error
import urllib.request
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from kubekit import logs
from kubekit.kinds import ANALYSIS_RUN, CLUSTER_ANALYSIS_TEMPLATE, CONFIG_MAP, STAGE
from kubekit.rest import is_already_exists, is_transient, resource_path
from reconciler import cli, controllers
from reconciler.runtime.cache import CacheView, Store
from reconciler.runtime.health import HealthServer, Metrics
from reconciler.runtime.informer import Informer
from reconciler.runtime.leader import Timings, format_micro_time, lease_expired
from reconciler.runtime.manager import ControllerRunner, Manager
from reconciler.runtime.options import RuntimeOptions
from reconciler.runtime.types import Controller, Key, Requeue, Watch
from reconciler.runtime.watches import enqueue_self
from testkit import objects
from testkit.fakeapi import FakeApi, api_error, context


def obj(name, ns="ns"):
    return {"metadata": {"name": name, "namespace": ns}}


def scripted_watches(stop, *steps):
    """A watch hook for the fake API: before the n-th watch request ``steps[n](client)``
    runs (writes the informer has not seen, a compaction, an error raised as the
    request's answer), then the fake answers it; the request after the last step stops
    the informer."""
    script = iter(steps)

    def watch(client, resource, namespace, **kwargs):
        step = next(script, None)
        if step is None:
            stop.set()
            return
        step(client)
        yield from client.watch(resource, namespace, **kwargs)

    return watch


def run_informer(api, *steps, record=lambda t, o: (t, o["metadata"]["name"]), store=None):
    """Run an informer of AnalysisRuns over ``api`` on this thread (into ``store``, by
    default a new one), until the steps are played."""
    stop = threading.Event()
    api.interceptors.watch = scripted_watches(stop, *steps)
    store = Store(ANALYSIS_RUN) if store is None else store
    seen = []
    restarts: list[str] = []
    inf = Informer(rest=api, resource=ANALYSIS_RUN, namespace=None, store=store,
                   handler=lambda t, old, o: seen.append(record(t, o)), stop=stop,
                   on_restart=restarts.append)
    inf._run()
    return inf, store, seen, restarts


def watched_from(api):
    """The resourceVersion of each watch request, in order."""
    return [r.options["resource_version"] for r in api.requests if r.verb == "watch"]


def test_informer_lists_then_watches_from_the_list_resource_version():
    api = FakeApi()
    api.put(ANALYSIS_RUN, obj("a"))
    listed = api.resource_version

    def create_b_then_write_elsewhere(client):
        client.create(ANALYSIS_RUN, "ns", obj("b"))
        client.create(STAGE, "ns", obj("s"))  # only the closing bookmark carries this rv

    inf, store, seen, _ = run_informer(api, create_b_then_write_elsewhere)
    b_version = store.get("ns", "b")["metadata"]["resourceVersion"]
    assert watched_from(api) == [listed, api.resource_version]
    assert api.resource_version != b_version  # the bookmark moved the resourceVersion on
    assert ("ADDED", "a") in seen and ("ADDED", "b") in seen
    assert store.get("ns", "a")["kind"] == "AnalysisRun"  # list items get their kind back
    assert inf.synced.is_set()


def test_informer_relists_on_410_and_reports_deletions_it_missed():
    api = FakeApi()
    api.put(ANALYSIS_RUN, obj("a"))
    api.put(ANALYSIS_RUN, obj("b"))

    def change_then_compact(client):
        client.delete(ANALYSIS_RUN, "ns", "a")
        client.patch(ANALYSIS_RUN, "ns", "b", {"metadata": {"labels": {"changed": "yes"}}})
        client.compact()  # the watch's resourceVersion is gone: an ERROR event, code 410

    _, store, seen, restarts = run_informer(api, change_then_compact)
    assert store.get("ns", "a") is None
    assert store.get("ns", "b") == api.get(ANALYSIS_RUN, "ns", "b")
    assert ("DELETED", "a") in seen
    assert seen.count(("ADDED", "b")) == 2  # initial, then changed while not watching
    assert watched_from(api)[-1] == api.resource_version  # from the second list
    assert "gone" in restarts


def test_informer_watch_http_410_also_relists():
    api = FakeApi()

    def create_then_answer_410(client):
        client.create(ANALYSIS_RUN, "ns", obj("x"))
        raise api_error(410, "Expired")

    _, store, _, _ = run_informer(api, create_then_answer_410)
    assert store.get("ns", "x") is not None


def test_informer_applies_deletes_from_the_watch():
    api = FakeApi()
    api.put(ANALYSIS_RUN, obj("a"))
    _, store, seen, _ = run_informer(
        api, lambda client: client.delete(ANALYSIS_RUN, "ns", "a"))
    assert store.get("ns", "a") is None
    assert seen[-1] == ("DELETED", "a")


def test_informer_skips_the_echo_of_a_write_the_cache_already_took_in():
    """A controller's own write, observed into the cache from the write's response,
    wakes nothing when the watch brings it back; someone else's later write does."""
    api = FakeApi()
    first = api.put(ANALYSIS_RUN, obj("a"))["metadata"]["resourceVersion"]
    versions: dict[str, str] = {}

    def our_write_then_theirs(client):
        ours = client.patch(ANALYSIS_RUN, "ns", "a", {"metadata": {"labels": {"by": "us"}}})
        store.upsert_if_newer(ours)  # our write's response (Cache.observe)
        theirs = client.patch(ANALYSIS_RUN, "ns", "a",
                              {"metadata": {"labels": {"by": "them"}}})
        versions["theirs"] = theirs["metadata"]["resourceVersion"]

    store = Store(ANALYSIS_RUN)
    _, _, seen, _ = run_informer(api, our_write_then_theirs, store=store,
                                 record=lambda t, o: (t, o["metadata"]["resourceVersion"]))
    assert seen == [("ADDED", first), ("MODIFIED", versions["theirs"])]
    assert stored(store, "ns", "a")["metadata"]["resourceVersion"] == versions["theirs"]


def stored(store: Store, namespace: str, name: str) -> dict[str, Any]:
    """The object ``store`` holds under ``namespace``/``name``, which must be there."""
    found = store.get(namespace, name)
    assert found is not None, f"{namespace}/{name} not in the store"
    return found


def test_cache_view_names_an_unwatched_resource():
    view = CacheView({STAGE: Store(STAGE)})
    with pytest.raises(KeyError, match=r"configmaps\.core is not cached"):
        view.list(CONFIG_MAP)


def test_cluster_scoped_store_ignores_namespace():
    store = Store(CLUSTER_ANALYSIS_TEMPLATE)
    store.upsert({"metadata": {"name": "t"}})
    assert store.get("anything", "t") is not None
    assert len(store.list("ns")) == 1


def _stage(ns: str, name: str, rv: str) -> dict[str, Any]:
    return objects.stage(name, namespace=ns, resourceVersion=rv)


def test_store_lists_one_namespace_and_all():
    store = Store(STAGE)
    for obj in (_stage("a", "x", "1"), _stage("a", "y", "1"), _stage("b", "x", "1")):
        store.upsert(obj)
    assert sorted(o["metadata"]["name"] for o in store.list("a")) == ["x", "y"]
    assert store.list("c") == []
    assert len(store.list()) == 3 and len(store) == 3
    assert store.remove(_stage("b", "x", "1")) is not None
    assert store.list("b") == [] and len(store) == 2
    assert stored(store, "a", "y")["metadata"]["resourceVersion"] == "1"


def test_relist_of_one_namespace_reports_deletes_and_changes_only_there():
    """After a 410 Gone the informer lists again and diffs: a delete it missed must be
    reported, an unchanged object must not, and other namespaces stay as they are."""
    store = Store(STAGE)
    for obj in (_stage("a", "kept", "1"), _stage("a", "edited", "1"),
                _stage("a", "gone", "1"), _stage("b", "other", "1")):
        store.upsert(obj)
    deleted, changed = store.replace_scope(
        "a", [_stage("a", "kept", "1"), _stage("a", "edited", "2"), _stage("a", "new", "1")])
    assert [o["metadata"]["name"] for o in deleted] == ["gone"]
    # each change with the version held before it (none for a new object)
    assert sorted((o["metadata"]["name"], old and old["metadata"]["resourceVersion"])
                  for old, o in changed) == [("edited", "1"), ("new", None)]
    assert sorted(o["metadata"]["name"] for o in store.list("a")) == ["edited", "kept", "new"]
    assert store.get("b", "other") is not None


def test_relist_of_all_namespaces_replaces_everything():
    store = Store(STAGE)
    store.upsert(_stage("a", "x", "1"))
    store.upsert(_stage("b", "y", "1"))
    deleted, changed = store.replace_scope(None, [_stage("b", "y", "1"), _stage("c", "z", "1")])
    assert [o["metadata"]["name"] for o in deleted] == ["x"]
    assert [o["metadata"]["name"] for _, o in changed] == ["z"]
    assert sorted(o["metadata"]["name"] for o in store.list()) == ["y", "z"]


def _labelled_stage(old, new, cache):
    return [Key("ns", new["metadata"]["labels"]["stage"])]


class FakeController(Controller):
    name = "fake"
    primary = STAGE
    watches: tuple[Watch, ...] = (Watch(STAGE, enqueue_self), Watch(ANALYSIS_RUN, _labelled_stage))

    def __init__(self, outcome):
        self.outcome = outcome

    def reconcile(self, key, ctx):
        if self.outcome is not None:
            raise self.outcome


def runner_for(outcome):
    return ControllerRunner(FakeController(outcome), metrics=Metrics(), workers=1)


def test_runner_success_forgets_failures():
    r = runner_for(None)
    r.queue.backoff.next_delay(Key("ns", "a"))
    r.process(Key("ns", "a"), ctx=None)
    assert r.queue.backoff.failures(Key("ns", "a")) == 0


def test_runner_requeue_is_not_a_failure():
    r = runner_for(Requeue(30))
    r.process(Key("ns", "a"), ctx=None)
    assert r.queue.backoff.failures(Key("ns", "a")) == 0
    assert r.queue.pending_delayed() == 1
    assert r.metrics.reconciles.labels("fake", "requeue")._value.get() == 1


def test_runner_exception_backs_off_and_counts_an_error():
    r = runner_for(RuntimeError("boom"))
    r.process(Key("ns", "a"), ctx=None)
    r.process(Key("ns", "a"), ctx=None)
    assert r.queue.backoff.failures(Key("ns", "a")) == 2
    assert r.metrics.errors.labels("fake")._value.get() == 2


def test_runner_maps_events_through_the_declared_watches():
    r = runner_for(None)
    cache = CacheView({})
    stage = {"metadata": {"name": "s", "namespace": "ns"}}
    assert r.keys_for(STAGE, None, stage, cache) == {Key("ns", "s")}
    run = {"metadata": {"name": "r", "namespace": "ns", "labels": {"stage": "s2"}}}
    assert r.keys_for(ANALYSIS_RUN, None, run, cache) == {Key("ns", "s2")}
    assert r.keys_for(CONFIG_MAP, None, stage, cache) == set()  # not watched


def test_a_controller_must_watch_its_primary():
    class Blind(FakeController):
        watches: tuple[Watch, ...] = (Watch(ANALYSIS_RUN, _labelled_stage),)

    with pytest.raises(ValueError, match="does not watch its primary"):
        Manager(api=None, controllers=[Blind(None)], options=RuntimeOptions(leader_elect=False))


NOW = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("spec", "expired"),
    [
        ({}, True),
        ({"holderIdentity": None, "renewTime": format_micro_time(NOW)}, True),
        ({"holderIdentity": "x", "leaseDurationSeconds": 15,
          "renewTime": format_micro_time(NOW - dt.timedelta(seconds=5))}, False),
        ({"holderIdentity": "x", "leaseDurationSeconds": 15,
          "renewTime": format_micro_time(NOW - dt.timedelta(seconds=16))}, True),
        ({"holderIdentity": "x", "leaseDurationSeconds": 15}, True),
    ],
)
def test_lease_expiry(spec, expired):
    assert lease_expired(spec, now=NOW) is expired


def test_micro_time_format_always_has_microseconds():
    assert format_micro_time(NOW) == "2026-01-01T12:00:00.000000Z"


def test_timings_follow_client_go_ratios():
    t = Timings.from_lease_duration(15)
    assert (t.lease_duration, t.renew_deadline, t.retry_period) == (15, 10, 3)


def test_resource_paths():
    assert resource_path(STAGE, "ns", "s", "status") == (
        "/apis/kargo.akuity.io/v1alpha1/namespaces/ns/stages/s/status"
    )
    assert resource_path(CONFIG_MAP, "ns") == "/api/v1/namespaces/ns/configmaps"
    assert resource_path(CLUSTER_ANALYSIS_TEMPLATE, "ns", "t") == (
        "/apis/argoproj.io/v1alpha1/clusteranalysistemplates/t"
    )
    assert resource_path(STAGE, None) == "/apis/kargo.akuity.io/v1alpha1/stages"


def test_error_classification():
    exists = ApiException(status=409, reason="Conflict")
    exists.body = '{"kind":"Status","reason":"AlreadyExists"}'
    stale = ApiException(status=409, reason="Conflict")
    stale.body = '{"kind":"Status","reason":"Conflict"}'
    assert is_already_exists(exists) and not is_already_exists(stale)
    for status in (0, 429, 500, 503, 504):
        assert is_transient(ApiException(status=status))
    for status in (400, 403, 404, 409, 422):
        assert not is_transient(ApiException(status=status))
    assert is_transient(TimeoutError())


def test_flags_and_defaults(monkeypatch):
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    args = cli.parser().parse_args([])
    assert args.leader_elect is True
    assert args.bind_address == ("0.0.0.0", 8080)
    assert args.controllers == ["stage-verification", "rollout-plugins"]
    assert args.namespaces == []
    assert (args.workers, args.resync_period, args.lease_duration) == (32, 300, 15)
    assert cli.options_from(args).runtime.leader_election_namespace == "rollgate-system"
    assert args.rollouts_deployment == "argo-rollouts"
    # In a pod, the Lease goes to the pod's own namespace; an empty value (a chart value
    # set to "") to rollgate-system.
    monkeypatch.setenv("POD_NAMESPACE", "platform")
    assert cli.options_from(args).runtime.leader_election_namespace == "platform"
    empty = cli.parser().parse_args(["--leader-election-namespace", ""])
    assert cli.options_from(empty).runtime.leader_election_namespace == "rollgate-system"
    args = cli.parser().parse_args(
        ["--no-leader-elect", "--namespaces", "a, b", "--controllers", "stage-verification"]
    )
    assert (args.leader_elect, args.namespaces, args.controllers) == (
        False, ["a", "b"], ["stage-verification"])


def test_unknown_controller_is_named():
    with pytest.raises(controllers.UnknownController, match="nope"):
        controllers.load("nope")


def test_health_server_serves_probes_and_metrics():
    state = {"ready": (False, "caches not synced: stages")}
    metrics = Metrics()
    metrics.queue_depth.labels("x").set(3)
    server = HealthServer(host="127.0.0.1", port=0, metrics=metrics, ready=lambda: state["ready"])
    server.start()
    host, port = server.address
    base = f"http://{host}:{port}"
    try:
        assert urllib.request.urlopen(base + "/healthz").status == 200
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + "/readyz")
        assert err.value.code == 503
        state["ready"] = (True, "ok")
        assert urllib.request.urlopen(base + "/readyz").status == 200
        body = urllib.request.urlopen(base + "/metrics").read().decode()
        assert 'rollgate_reconciler_queue_depth{controller="x"} 3.0' in body
    finally:
        server.stop()


class SlowController(Controller):
    """Records how many workers are inside reconcile for each key at once."""

    name = "slow"
    primary = STAGE
    watches: tuple[Watch, ...] = (Watch(STAGE, enqueue_self),)

    def __init__(self):
        self.lock = threading.Lock()
        self.inside: dict[Key, int] = {}
        self.max_inside: dict[Key, int] = {}
        self.runs: dict[Key, int] = {}
        self.entered = threading.Event()
        self.release = threading.Event()

    def reconcile(self, key, ctx):
        with self.lock:
            self.inside[key] = self.inside.get(key, 0) + 1
            self.max_inside[key] = max(self.max_inside.get(key, 0), self.inside[key])
            self.runs[key] = self.runs.get(key, 0) + 1
        self.entered.set()
        self.release.wait(10)
        with self.lock:
            self.inside[key] -= 1


def test_workers_never_process_one_key_concurrently_and_rerun_a_key_added_meanwhile():
    controller = SlowController()
    runner = ControllerRunner(controller, metrics=Metrics(), workers=4)
    key = Key("ns", "a")
    runner.queue.add(key)
    runner.start(ctx=context(FakeApi()))  # SlowController never looks at it
    try:
        assert controller.entered.wait(10)
        for _ in range(5):  # changes while the key is being processed
            runner.queue.add(key)
        controller.release.set()
        deadline = threading.Event()
        for _ in range(100):
            with controller.lock:
                if controller.runs.get(key) == 2 and controller.inside.get(key) == 0:
                    break
            deadline.wait(0.05)
    finally:
        runner.stop(10)
    assert controller.max_inside[key] == 1
    assert controller.runs[key] == 2  # one re-run for all five adds, not five


def test_a_requested_controller_that_fails_to_import_stops_the_start(monkeypatch, caplog):
    def broken(name, options=None):
        if name == "stage-verification":
            raise ImportError(f"cannot import {name}")
        return object()  # the other one loads fine

    monkeypatch.setattr(controllers, "load", broken)
    # Would otherwise go on to configure the client and run; must not get that far.
    monkeypatch.setattr(cli, "load_api_client", lambda *a, **k: pytest.fail("started anyway"))
    monkeypatch.setattr(logs, "setup", lambda level: None)  # cli.logs
    with caplog.at_level("ERROR", logger="reconciler"):
        code = cli.main(["--controllers", "stage-verification,rollout-plugins"])
    assert code == 1
    assert "stage-verification could not be loaded" in caplog.text
    assert "ImportError" in caplog.text
