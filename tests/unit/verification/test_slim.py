"""The cache transforms (reconciler/verification/slim.py) keep every field the
verification controllers read.

Each scenario runs a controller's pass over objects as Kargo and Argo Rollouts leave them
after a long life (support/testkit/kargo_shapes.py: full freight histories,
``lastPromotion`` with its
steps' state, runs with measurements, managedFields), twice: once over a cache of whole
objects that records the path of every field read (``Recorded``), once over the cache as
the controller's transforms make it. It fails when a path read on the whole object does
not resolve to the same thing on the transformed one (a field the transform dropped, or
changed), and when the two passes decide differently (other writes, events or requeue).
"""

from __future__ import annotations

import copy
import datetime as dt
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kubekit.kinds import ANALYSIS_RUN, ANALYSIS_TEMPLATE, FREIGHT, STAGE, Resource
from reconciler.runtime.cache import CacheView, Store
from reconciler.runtime.types import Key, Requeue
from reconciler.verification import slim
from reconciler.verification.engine import StageVerificationController
from reconciler.verification.observer import VerificationObserver
from reconciler.verification.options import VerificationOptions
from reconciler.verification.packed import Packed
from reconciler.verification.payloads import promotion_finished_at
from reconciler.verification.shards import LABEL_SHARD
from schemas.kinds import API_VERSION_KARGO
from testkit import kargo_shapes, objects
from testkit.fakeapi import Events, FakeApi, context

NS = "shop"
Path = tuple[Any, ...]
WHOLE = "="  # the whole value at the path was read (compared, copied)
TRUTH = "?"  # only whether it is empty


def stamp(seconds_ago: float) -> str:
    at = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=seconds_ago)
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


# ------------------------------------------------------------------ recording reads


def wrap(value: Any, path: Path, log: set[Path]) -> Any:
    if isinstance(value, dict):
        return Recorded(value, path, log)
    if isinstance(value, list):
        return RecordedList(value, path, log)
    return value


class Recorded(dict[str, Any]):
    """A dict that adds to ``log`` the path of every key read, every key tested for and
    every value read whole; its values come out wrapped the same way."""

    def __init__(self, data: dict[str, Any], path: Path, log: set[Path]) -> None:
        super().__init__(data)
        self._path, self._log = path, log

    def _at(self, key: Any) -> Any:
        self._log.add((*self._path, key))
        return wrap(dict.__getitem__(self, key), (*self._path, key), self._log)

    def __getitem__(self, key: Any) -> Any:
        return self._at(key)

    def get(self, key: Any, default: Any = None) -> Any:
        if dict.__contains__(self, key):
            return self._at(key)
        self._log.add((*self._path, key))
        return default

    def __contains__(self, key: object) -> bool:
        self._log.add((*self._path, key))
        return dict.__contains__(self, key)

    def __iter__(self) -> Iterator[Any]:
        for key in dict.keys(self):
            self._log.add((*self._path, key))
            yield key

    def keys(self) -> Any:
        return list(iter(self))

    def items(self) -> Any:
        return [(k, self._at(k)) for k in dict.keys(self)]

    def values(self) -> Any:
        return [self._at(k) for k in dict.keys(self)]

    def __len__(self) -> int:
        self._log.add((*self._path, TRUTH))
        return dict.__len__(self)

    def __bool__(self) -> bool:
        self._log.add((*self._path, TRUTH))
        return dict.__len__(self) > 0

    def __eq__(self, other: object) -> bool:
        self._log.add((*self._path, WHOLE))
        return dict(dict.items(self)) == other

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        self._log.add((*self._path, WHOLE))
        return copy.deepcopy(dict(dict.items(self)), memo)


class RecordedList(list[Any]):
    def __init__(self, data: list[Any], path: Path, log: set[Path]) -> None:
        super().__init__(data)
        self._path, self._log = path, log

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(list.__len__(self)))]
        self._log.add((*self._path, index))
        return wrap(list.__getitem__(self, index), (*self._path, index), self._log)

    def __iter__(self) -> Iterator[Any]:
        for i in range(list.__len__(self)):
            yield self[i]

    def __len__(self) -> int:
        self._log.add((*self._path, WHOLE))  # a list is kept whole or not at all
        return list.__len__(self)

    def __bool__(self) -> bool:
        self._log.add((*self._path, TRUTH))
        return list.__len__(self) > 0

    def __eq__(self, other: object) -> bool:
        self._log.add((*self._path, WHOLE))
        return list(list.__iter__(self)) == other

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        self._log.add((*self._path, WHOLE))
        return copy.deepcopy(list(list.__iter__(self)), memo)


_MISSING = object()


def resolve(obj: Any, path: Path) -> Any:
    for step in path:
        in_dict = isinstance(obj, dict) and step in obj
        if in_dict or (isinstance(obj, list) and isinstance(step, int)
                       and -len(obj) <= step < len(obj)):
            obj = obj[step]
        else:
            return _MISSING
    return obj


def dropped(whole: Any, kept: Any, reads: set[Path]) -> list[str]:
    """The paths read on ``whole`` that ``kept`` does not answer the same way."""
    wrong = []
    for path in sorted(reads, key=repr):
        marker = path[-1] if path and path[-1] in (WHOLE, TRUTH) else None
        at = path[:-1] if marker else path
        a, b = resolve(whole, at), resolve(kept, at)
        if marker == TRUTH:
            same = (a is _MISSING) == (b is _MISSING) and bool(a) == bool(b)
        elif marker == WHOLE or not isinstance(a, dict | list):
            same = a == b if a is not _MISSING else b is _MISSING
        else:
            same = b is not _MISSING and isinstance(b, type(a))
        if not same:
            wrong.append(".".join(map(str, path)))
    return wrong


# ------------------------------------------------------------------ the objects


MANAGED = [{"manager": "kargo", "operation": "Update", "apiVersion": API_VERSION_KARGO,
            "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {"f:freightHistory": {}}}}]


def whole_stage(*, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    status = kargo_shapes.full_history_status("prod", NS)
    meta: dict[str, Any] = {
        "uid": "u", "generation": 1, "resourceVersion": "7", "labels": {LABEL_SHARD: "a"},
        "managedFields": MANAGED,
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{}"}}
    if spec:
        return objects.stage("prod", namespace=NS, freight=False, spec=spec, status=status,
                             **meta)
    return objects.stage("prod", namespace=NS, warehouse="w", status=status, **meta, spec={
        "shard": "a", "promotionTemplate": {"spec": {"steps": [{"uses": "git-clone"}]}}},
        verification=objects.verification("t"))


def current(stage: dict[str, Any]) -> dict[str, Any]:
    collection: dict[str, Any] = stage["status"]["freightHistory"][0]
    return collection


def entry(stage: dict[str, Any]) -> dict[str, Any]:
    verification: dict[str, Any] = current(stage)["verificationHistory"][0]
    return verification


def whole_run(stage: dict[str, Any], name: str | None = None, *, collection: str | None = None,
              phase: str = "Successful", completed: float | None = 30) -> dict[str, Any]:
    run = kargo_shapes.finished_analysis_run(name or entry(stage)["analysisRun"]["name"], NS,
                                      stage="prod", collection=collection or current(stage)["id"])
    run["metadata"].update(namespace=NS, creationTimestamp=stamp(120), resourceVersion="3",
                           managedFields=MANAGED)
    run["status"]["phase"] = phase
    if completed is None:
        run["status"].pop("completedAt")
    else:
        run["status"]["completedAt"] = stamp(completed)
    return run


def whole_freight(stage: dict[str, Any], *, verified: bool = True) -> dict[str, Any]:
    ref = current(stage)["items"]["Warehouse/w"]
    freight = objects.freight(ref["name"], namespace=NS, resourceVersion="2",
                              managedFields=MANAGED, alias="a",
                              warehouse=ref["origin"]["name"], images=ref.get("images", []),
                              commits=ref.get("commits", []))
    freight["status"] = {"verifiedIn": {"prod": {"verifiedAt": stamp(600)}} if verified else {},
                         "currentlyIn": {"prod": {}}}
    return freight


def fake(stage: dict[str, Any], runs: list[dict[str, Any]], *,
         verified: bool = True) -> FakeApi:
    api = FakeApi()
    api.put(ANALYSIS_TEMPLATE, objects.analysis_template("t", namespace=NS, metrics=[
        {"name": "m", "provider": {"web": {"url": "http://x"}}}]))
    api.put(FREIGHT, whole_freight(stage, verified=verified))
    api.put(STAGE, stage)
    for run in runs:
        api.put(ANALYSIS_RUN, run)
    return api


# ------------------------------------------------------------------ the scenarios


def observe_steady() -> FakeApi:
    stage = whole_stage()
    return fake(stage, [whole_run(stage)])


def observe_just_finished() -> FakeApi:
    """Kargo recorded a verification that finished now: a metric."""
    stage = whole_stage()
    entry(stage).update(finishTime=stamp(0), startTime=stamp(60))
    return fake(stage, [whole_run(stage, completed=0)])


def observe_not_recorded() -> FakeApi:
    stage = whole_stage()
    entry(stage).update(phase="Running")
    entry(stage).pop("finishTime")
    return fake(stage, [whole_run(stage, completed=60)])


def observe_not_recorded_no_completed_at() -> FakeApi:
    stage = whole_stage()
    entry(stage).update(phase="Pending")
    return fake(stage, [whole_run(stage, completed=None)])


def observe_failed_but_verified() -> FakeApi:
    stage = whole_stage()
    entry(stage).update(phase="Failed", message="success-rate 0.5")
    return fake(stage, [whole_run(stage, phase="Failed")])


def observe_duplicate_and_stale() -> FakeApi:
    stage = whole_stage()
    older = stage["status"]["freightHistory"][3]["id"]
    return fake(stage, [whole_run(stage), whole_run(stage, "prod.dup.x"),
                        whole_run(stage, "prod.stale.y", collection=older, phase="Running")])


def engine_promoted() -> FakeApi:
    """Kargo just promoted new Freight into a Stage with a full history: a run to make."""
    stage = whole_stage()
    promoted = kargo_shapes.promotion_patch(stage, {"w": "fresh"}, promotion="prod.p2")["status"]
    stage["status"].update(promoted)
    stage["status"]["conditions"] = [c for c in stage["status"]["conditions"]
                                     if c["type"] != "Verified"]
    return fake(stage, [], verified=False)


OBSERVE = [observe_steady, observe_just_finished, observe_not_recorded,
           observe_not_recorded_no_completed_at, observe_failed_but_verified,
           observe_duplicate_and_stale]


# ------------------------------------------------------------------ running a pass


Outcome = tuple[list[str], list[tuple[str, str]], float | None]


def recorded_cache(api: FakeApi, controller: Any) -> tuple[CacheView, dict[Any, set[Path]],
                                                            dict[Any, dict[str, Any]]]:
    """A cache of whole objects (managedFields included) whose reads are logged per
    object."""
    logs: dict[Any, set[Path]] = {}
    wholes: dict[Any, dict[str, Any]] = {}
    stores: dict[Resource, Store] = {}
    for resource in dict.fromkeys(w.resource for w in controller.watches):
        store = Store(resource)
        for name, func in (controller.indexes.get(resource) or {}).items():
            store.add_index(name, func)
        for obj in api.objects(resource):
            whole = copy.deepcopy(obj)
            key = (resource.plural, obj["metadata"]["name"])
            wholes[key], logs[key] = whole, set()
            store.upsert(wrap(copy.deepcopy(whole), (), logs[key]))
        stores[resource] = store
    return CacheView(stores), logs, wholes


def one_pass(controller: Any, api: FakeApi, cache: CacheView | None) -> Outcome:
    events = Events()
    ctx = context(api, controller=controller, cache=cache, events=events)
    after = None
    try:
        controller.reconcile(Key(NS, "prod"), ctx)
    except Requeue as rq:
        after = round(rq.after)
    writes = [w for w in api.writes() if not w.startswith("create events")]
    # The two passes run a moment apart: "finished 60s ago" may read "61s ago".
    return writes, [(reason, re.sub(r"\d+s ago", "Ns ago", message))
                    for _, reason, message in events.emitted], after


def transform_of(controller: Any, resource_plural: str) -> Callable[[Any], Any]:
    for resource, func in controller.transforms.items():
        if resource.plural == resource_plural:
            return func  # type: ignore[no-any-return]
    return lambda obj: obj


def check(controller_factory: Callable[[], Any], scenario: Callable[[], FakeApi]) -> Outcome:
    """Run ``scenario`` over whole recorded objects and over transformed ones; assert no
    read field is dropped and both decide alike; the outcome."""
    api_whole, api_slim = scenario(), scenario()
    controller = controller_factory()
    cache, logs, wholes = recorded_cache(api_whole, controller)
    whole_outcome = one_pass(controller, api_whole, cache)
    problems = {f"{key[0]}/{key[1]}": wrong for key, reads in logs.items()
                if (wrong := dropped(wholes[key], transform_of(controller, key[0])(wholes[key]),
                                     reads))}
    assert not problems, f"read but not kept by the cache transform: {problems}"
    slim_outcome = one_pass(controller_factory(), api_slim, None)
    assert slim_outcome[:2] == whole_outcome[:2]
    assert (slim_outcome[2] is None) == (whole_outcome[2] is None)
    return whole_outcome


@pytest.mark.parametrize("scenario", OBSERVE, ids=lambda f: f.__name__)
@pytest.mark.parametrize("refresh", [False, True])
def test_observe_mode_reads_only_what_its_transforms_keep(scenario: Callable[[], FakeApi],
                                                          refresh: bool) -> None:
    check(lambda: VerificationObserver(options=VerificationOptions(
        observe_lag_seconds=10, refresh_lagging=refresh)), scenario)


def test_the_observe_scenarios_cover_the_findings_and_the_metric() -> None:
    """The scenarios above exercise what observe mode does (else they prove little)."""
    def factory() -> VerificationObserver:
        return VerificationObserver(
            options=VerificationOptions(observe_lag_seconds=10, refresh_lagging=True))
    assert check(factory, observe_steady)[:2] == ([], [])
    _, found, _ = check(factory, observe_not_recorded)
    assert [r for r, _ in found] == ["VerificationNotRecorded"]
    assert [r for r, _ in check(factory, observe_failed_but_verified)[1]] == [
        "VerifiedDespiteFailure"]
    reasons = sorted(r for r, _ in check(factory, observe_duplicate_and_stale)[1])
    assert reasons == ["DuplicateVerificationRuns", "StaleVerificationRun"]


def test_engine_mode_reads_only_what_its_transforms_keep_and_writes_the_same() -> None:
    """A promotion into a full history: the run is created and the status written once,
    then (run Successful) the Freight and the status, then nothing: the same with whole
    and transformed objects, and each read field kept."""
    def scenario() -> FakeApi:
        return engine_promoted()

    writes, _, _ = check(StageVerificationController, scenario)
    assert [w.split("/")[0] for w in writes] == ["create analysisruns", "patch stages"]

    def succeeded() -> FakeApi:
        api = engine_promoted()
        StageVerificationController().reconcile(Key(NS, "prod"), context(
            api, controller=StageVerificationController()))
        for run in api.objects(ANALYSIS_RUN):
            run = copy.deepcopy(run)
            run["status"] = {"phase": "Successful", "completedAt": stamp(0),
                             "metricResults": [{"name": "m", "measurements": [{}] * 3}]}
            api.put(ANALYSIS_RUN, run)
        api.requests.clear()
        return api

    writes, _, _ = check(StageVerificationController, succeeded)
    assert writes == ["patch freights/fresh/status", "patch stages/prod/status"]

    def settled() -> FakeApi:
        api = succeeded()
        StageVerificationController().reconcile(Key(NS, "prod"), context(
            api, controller=StageVerificationController()))
        api.requests.clear()
        return api

    assert check(StageVerificationController, settled)[0] == []


def test_a_transform_that_drops_a_read_field_fails_the_check() -> None:
    """The check itself can fail: with ``lastPromotion.finishedAt`` left out (or
    changed), the read of it is reported."""
    stage = whole_stage()
    log: set[Path] = set()
    promotion_finished_at(wrap(stage, (), log))
    kept = slim.observed_stage(stage)
    assert dropped(stage, kept, log) == []
    kept["status"]["lastPromotion"]["finishedAt"] = stamp(0)
    assert dropped(stage, kept, log) == ["status.lastPromotion.finishedAt"]
    kept["status"].pop("lastPromotion")
    assert "status.lastPromotion" in dropped(stage, kept, log)


def test_the_transforms_keep_much_less_than_the_whole_objects() -> None:
    """What the caches save on a full history (sizes as JSON)."""
    import json

    def size(obj: Any) -> int:
        """JSON size, Packed lists as the lists they read as (json.dumps would see an
        empty list)."""
        def plain(value: Any) -> Any:
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            if isinstance(value, list):
                return [plain(v) for v in value]
            return value
        return len(json.dumps(plain(obj)))

    stage = whole_stage()
    run = whole_run(stage)
    kept = slim.observed_stage(stage)
    assert size(kept) < size(stage) / 3
    assert isinstance(kept["status"]["freightHistory"], Packed)
    assert size(slim.observed_run(run)) < size(run) / 2
    assert "managedFields" not in slim.strip_metadata(stage)["metadata"]
    assert "kubectl.kubernetes.io/last-applied-configuration" not in slim.strip_metadata(
        stage)["metadata"]["annotations"]
    # Engine mode keeps what its status write carries whole.
    assert slim.engine_stage(stage)["status"]["freightHistory"] == stage["status"][
        "freightHistory"]
