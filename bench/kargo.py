"""rollgate next to its peer: Stage verification by the real Kargo, by Kargo with rollgate's
observe mode asking it to refresh, and by rollgate's engine, on one plane.

One control plane (support/harness/plane.py, no webhook), the real Argo Rollouts controller
(AnalysisRuns only) executing every run; its ``web`` metric asks an HTTP server in a
process of its own, as a monitoring system would be (support/harness/kits/verification.py's
``MetricServer``). For each run length, instant
(one measurement) and ``two-step`` (``count: 2, interval: 4s``), each scenario in its own
Project namespace with N Stages ``s<i>`` verifying with one AnalysisTemplate, each Stage
promoted to its own Freight ``f-<i>``; exactly one verifier is active per scenario:

- **a** ``kargo``: the real Kargo controller (started for the scenario), rollgate not
  running. The bench writes each Promotion whole (as support/harness/kits/kargo.py does) and
  Kargo runs it, records the Freight and verifies;
- **b** ``kargo+observe``: the same, plus rollgate's reconciler in observe mode with
  ``--refresh-lagging --observe-lag-seconds 2`` (it sets Kargo's refresh annotation on a
  Stage whose run finished 2 s ago but whose entry Kargo has not recorded);
- **c** ``engine``: Kargo stopped, rollgate's reconciler with ``--stage-verification
  engine``; the bench records each promotion as Kargo would (support/testkit/kargo_shapes.py's
  ``promotion_patch``), all N at once, and rollgate verifies;
- **c-paced**: (c) again, each Stage's promotion written at the offset at which Kargo
  recorded that Stage's in (a) of the same run length (Kargo's Promotion controller
  spreads them out; the load shape, not the verifier, is then the difference).

Measured per Stage, both ends seen through one watch on the namespace's Stages: from the
event that shows the promotion recorded (``status.freightHistory[0]`` holds the Stage's
Freight) to the event that shows ``Verified=True`` (with that Freight still current);
a second watch on the runs splits it into the verifier's part until the run exists, the
Argo Rollouts controller's until it is terminal, and the verifier's until
``Verified=True``. Reported per scenario: p50, p99 (nearest rank) and worst, how many
Stages took at most 10 s and longer than ``--late-seconds``, and how many were not
verified by the timeout (Kargo alone with instant runs waits for its 5-minute requeue:
the Kargo scenarios' ``--kargo-timeout`` is 330 s so that it can be seen, and unverified
Stages are counted, not fatal); API writes per verification, from kube-apiserver's
``apiserver_request_total`` (admin client certificate) before the first promotion and
after the API server is quiet again, by verb and resource, divided by N (the bench's own
write per Stage, a Promotion create or a Stage status patch, is subtracted and listed);
CPU seconds (utime+stime, /proc/<pid>/stat) over the same window of the Kargo
controller, rollgate's reconciler, kube-apiserver and the Argo Rollouts controller, and
peak RSS (VmHWM; each verifier is started for its scenario); AnalysisRuns per Stage.
Then the ratios to (c) and the targets: (c) ahead of (a) on every figure, and (b)'s
instant-run p99 within 2 s + 1.5 x (c)'s p99. Nothing is asserted. Results:
docs/benchmarks.md.

``--repeat K`` runs every scenario K times, interleaved (a, c, a, c, ...), round k
promoting at phase (k + 0.5) / K of the wall-clock second (a two-step run's length
depends on it; see ``scenario``); the ratios and targets then take the latency figures
over every Stage of every round and the others as medians of the rounds.

    .venv/bin/python -m bench.kargo [--stages 50] [--runs instant,two-step]
        [--scenarios a,b,c,c-paced] [--workers 32] [--repeat 1] [--kargo-timeout 330]
        [--late-seconds 60] [--work-dir DIR]
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import math
import multiprocessing
import os
import re
import statistics
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, cast

from kubernetes import client

from bench.stats import report
from bench.watches import Watch
from harness.host_rollgate import HostRollgate
from harness.kits.kargo import STEPS, ulid
from harness.kits.plane import plane_with_rollgate
from harness.kits.verification import MetricServer, verdict_template
from harness.plane import ControlPlane
from harness.process import ManagedProcess
from harness.upstream import kargo, trees
from harness.upstream import rollouts as argo_rollouts
from reconciler.runtime.options import DEFAULT_WORKERS
from schemas.constants import LABEL_STAGE
from schemas.kinds import GROUP_ARGO, GROUP_KARGO, VERSION_ARGO, VERSION_KARGO
from testkit import kargo_shapes, objects

ROOT = Path(__file__).resolve().parent.parent

TEMPLATE = "verdict"
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY"})
READ_VERBS = frozenset({"GET", "LIST"})
TERMINAL = frozenset({"Successful", "Failed", "Error", "Inconclusive"})
# The objects a promotion's verification touches; every other write in the window (the
# controllers' Leases, the API server's own endpoints) is reported apart, not per
# verification.
VERIFICATION_RESOURCES = frozenset({"stages", "freights", "promotions", "analysisruns",
                                    "events"})


class RunLength(TypedDict, total=False):
    """The run length of ``verdict_template``: its ``count`` and ``interval``."""

    count: int
    interval: str


RUNS: dict[str, RunLength] = {
    "instant": {"count": 1}, "two-step": {"count": 2, "interval": "4s"}}
SCENARIOS = {
    "a": "kargo",
    "b": "kargo+observe",
    "c": "engine",
    # Not one of the three: the engine again, each Stage's promotion written at the offset
    # at which Kargo recorded that Stage's in (a) of the same run length (Kargo's
    # Promotion controller spreads them; the bench writes all at once).
    "c-paced": "engine, promotions paced as (a)'s",
}
CLK_TCK = os.sysconf("SC_CLK_TCK")
_SAMPLE = re.compile(r'^apiserver_request_total\{(?P<labels>[^}]*)\} (?P<value>\S+)$')
_LABEL = re.compile(r'(\w+)="([^"]*)"')


# --------------------------------------------------------------------------- measurements


def summary(values: list[float]) -> dict[str, float | int | None]:
    """n, p50, p99 (nearest rank) and worst (seconds, ms precision); None when empty."""
    ordered = sorted(values)
    if not ordered:
        return {"n": 0, "p50_s": None, "p99_s": None, "max_s": None}
    return {"n": len(ordered),
            "p50_s": round(statistics.median(ordered), 3),
            "p99_s": round(ordered[math.ceil(0.99 * len(ordered)) - 1], 3),
            "max_s": round(ordered[-1], 3)}


def cpu_seconds(pid: int) -> float:
    """utime + stime of the whole process (every thread), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


Key = tuple[str, str, str]  # verb, resource[/subresource], code


def api_requests(plane: ControlPlane) -> collections.Counter[Key]:
    """kube-apiserver's ``apiserver_request_total`` (dry runs left out), scraped with the
    admin client certificate."""
    with urllib.request.urlopen(plane.server + "/metrics", context=plane.admin_ssl_context(),
                                timeout=30) as response:
        text = response.read().decode()
    counts: collections.Counter[Key] = collections.Counter()
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if not m:
            continue
        labels = dict(_LABEL.findall(m["labels"]))
        if labels.get("dry_run"):
            continue
        resource = labels.get("resource", "")
        if labels.get("subresource"):
            resource += "/" + labels["subresource"]
        counts[(labels.get("verb", ""), resource, labels.get("code", ""))] += int(
            float(m["value"]))
    return counts


def writes(counts: collections.Counter[Key]) -> int:
    return sum(v for (verb, _, _), v in counts.items() if verb in WRITE_VERBS)


def settle(plane: ControlPlane, *, quiet: int = 3, window: float = 2.0,
           limit: float = 90.0) -> float:
    """Until the API server has taken at most ``quiet`` writes in ``window`` seconds (the
    heartbeats of the controllers on the plane) or ``limit`` seconds passed; returns the
    time it took."""
    started = time.monotonic()
    before = writes(api_requests(plane))
    while time.monotonic() - started < limit:
        time.sleep(window)
        now = writes(api_requests(plane))
        if now - before <= quiet:
            break
        before = now
    return round(time.monotonic() - started, 1)


def verified(stage: dict[str, Any]) -> bool:
    conds = (stage.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Verified" and c.get("status") == "True" for c in conds)


def holds(stage: dict[str, Any], freight: str) -> bool:
    """``status.freightHistory[0]`` holds ``freight``: the promotion is recorded."""
    history = (stage.get("status") or {}).get("freightHistory") or []
    items = ((history[0] or {}).get("items") or {}).values() if history else []
    return any((i or {}).get("name") == freight for i in items)


class Watcher:
    """One watch on ``plural`` in ``ns`` (every event handed to ``_record`` with the time
    it arrived). Re-watches from the last resourceVersion when the stream ends and
    re-lists on 410 Gone; stops when ``done`` is set or on ``stop()``."""

    group, version = GROUP_KARGO, VERSION_KARGO
    plural = "stages"

    def __init__(self, co: client.CustomObjectsApi, ns: str, freight_of: dict[str, str]) -> None:
        self.co, self.ns, self.freight_of = co, ns, freight_of
        self.events = 0
        self.done = threading.Event()
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(60):
            raise SystemExit(f"{self.ns}: the {self.plural} watch did not start")

    def stop(self) -> None:
        self._stop.set()

    def _record(self, obj: dict[str, Any], now: float) -> None:
        raise NotImplementedError

    def _list(self) -> str:
        listed = cast("dict[str, Any]", self.co.list_namespaced_custom_object(
            self.group, self.version, self.ns, self.plural))
        now = time.monotonic()
        for obj in listed["items"]:
            self._record(obj, now)
        return str(listed["metadata"]["resourceVersion"])

    def _run(self) -> None:
        rv = self._list()
        self._ready.set()
        while not self._stop.is_set() and not self.done.is_set():
            w = Watch()
            try:
                for event in w.stream(self.co.list_namespaced_custom_object, self.group,
                                      self.version, self.ns, self.plural, resource_version=rv,
                                      timeout_seconds=60):
                    obj = event["object"]
                    if event["type"] == "ERROR":
                        rv = self._list()
                        break
                    self.events += 1
                    rv = obj["metadata"]["resourceVersion"]
                    self._record(obj, time.monotonic())
                    if self.done.is_set() or self._stop.is_set():
                        w.stop()
                        return
            except client.ApiException as exc:
                if exc.status != 410:
                    raise
                rv = self._list()


class StageWatch(Watcher):
    """Per Stage, the time of the first event whose ``freightHistory[0]`` holds its
    Freight, and of the first such event with ``Verified=True``."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.promoted: dict[str, float] = {}
        self.verified: dict[str, float] = {}

    def _record(self, obj: dict[str, Any], now: float) -> None:
        name = obj["metadata"]["name"]
        freight = self.freight_of.get(name)
        if freight is None or not holds(obj, freight):
            return
        self.promoted.setdefault(name, now)
        if verified(obj):
            self.verified.setdefault(name, now)
            if len(self.verified) >= len(self.freight_of):
                self.done.set()


class RunWatch(Watcher):
    """Per Stage (the run's ``kargo.akuity.io/stage`` label), when its first run was
    first seen and when a run of it was first seen in a terminal phase: the part of the
    latency that is the Argo Rollouts controller's, not the verifier's."""

    group, version = GROUP_ARGO, VERSION_ARGO
    plural = "analysisruns"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.created: dict[str, float] = {}
        self.finished: dict[str, float] = {}

    def _record(self, obj: dict[str, Any], now: float) -> None:
        stage = (obj["metadata"].get("labels") or {}).get(LABEL_STAGE, "")
        if stage not in self.freight_of:
            return
        self.created.setdefault(stage, now)
        if (obj.get("status") or {}).get("phase") in TERMINAL:
            self.finished.setdefault(stage, now)
            if len(self.finished) >= len(self.freight_of):
                self.done.set()


@dataclass
class Process:
    """A process measured over the scenario's window."""

    proc: ManagedProcess
    cpu_before: float = 0.0
    cpu_after: float = 0.0
    rss: float = float("nan")

    def mark(self) -> None:
        self.cpu_before = cpu_seconds(self.proc.pid)

    def finish(self) -> None:
        self.cpu_after = cpu_seconds(self.proc.pid)
        self.rss = peak_rss_mib(self.proc.pid)

    def figures(self) -> dict[str, float]:
        return {"cpu_s": round(self.cpu_after - self.cpu_before, 2), "peak_rss_mib": self.rss}


def rollgate_metrics(url: str, n: int) -> dict[str, Any]:
    """From the reconciler's /metrics: its passes by result, their mean time, and what
    observe mode found (anomalies by kind)."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    passes: collections.Counter[str] = collections.Counter()
    anomalies: collections.Counter[str] = collections.Counter()
    seconds = count = 0.0
    for line in text.splitlines():
        if line.startswith("#") or " " not in line:
            continue
        name, value = line.rsplit(" ", 1)
        labels = dict(_LABEL.findall(name))
        if name.startswith("rollgate_reconciler_reconcile_total{"):
            passes[labels.get("result", "")] += int(float(value))
        elif name.startswith("rollgate_reconciler_reconcile_duration_seconds_sum{"):
            seconds += float(value)
        elif name.startswith("rollgate_reconciler_reconcile_duration_seconds_count{"):
            count += float(value)
        elif name.startswith("rollgate_verification_anomalies_total{"):
            anomalies[labels.get("kind", "")] += int(float(value))
    return {"passes_by_result": dict(passes),
            "passes_per_stage": round(sum(passes.values()) / n, 2),
            "mean_pass_ms": round(1000 * seconds / count, 1) if count else None,
            "anomalies_by_kind": dict(anomalies)}


def refreshes_by_why(log_path: Path) -> dict[str, int]:
    """Observe mode's refresh requests, by why (docs/verification.md, "Not recorded"), from the
    reconciler's JSON log: a completion no cached Stage named yet, or an entry past the lag."""
    whys: collections.Counter[str] = collections.Counter()
    for line in log_path.read_text().splitlines():
        if '"asked Kargo to refresh the Stage"' in line:
            whys[str(json.loads(line).get("why"))] += 1
    return dict(whys)


# --------------------------------------------------------------------------- the objects


def seed(plane: ControlPlane, co: client.CustomObjectsApi, ns: str, n: int,
         metrics_url: str, run: str) -> dict[str, str]:
    """Project namespace ``ns`` with Warehouse ``w``, AnalysisTemplate ``verdict`` (the run
    length ``run``), Freight ``f-<i>`` and Stages ``s<i>``; returns Stage -> uid.

    The namespace is labelled as Kargo labels a Project's, not made from a Project object:
    the bench runs Kargo's controller alone (no webhooks, no management controller), so
    nothing would make one (``harness.upstream.kargo.label_as_project``)."""
    kargo.label_as_project(plane, ns)
    co.create_namespaced_custom_object(GROUP_KARGO, VERSION_KARGO, ns, "warehouses",
                                       objects.warehouse("w"))
    template = verdict_template(metrics_url, name=TEMPLATE, **RUNS[run])
    co.create_namespaced_custom_object(GROUP_ARGO, VERSION_ARGO, ns, "analysistemplates", template)

    def one(i: int) -> tuple[str, str]:
        co.create_namespaced_custom_object(
            GROUP_KARGO, VERSION_KARGO, ns, "freights", objects.freight(
                f"f-{i}", warehouse="w", alias=f"a{i}",
                images=[{"repoURL": "registry.invalid/shop/web", "tag": f"v{i}",
                         "digest": "sha256:" + os.urandom(32).hex()}]))
        body = objects.stage(f"s{i}", warehouse="w", verification=objects.verification(
            TEMPLATE, args=[{"name": "verdict", "value": "pass"}]),
            spec={"promotionTemplate": {"spec": {"steps": STEPS}}})
        stage = cast("dict[str, Any]", co.create_namespaced_custom_object(
            GROUP_KARGO, VERSION_KARGO, ns, "stages", body))
        return f"s{i}", stage["metadata"]["uid"]

    with ThreadPoolExecutor(8) as pool:
        return dict(pool.map(one, range(n)))


def promote_with_kargo(co: client.CustomObjectsApi, ns: str, i: int, uid: str) -> None:
    """A Promotion written whole (harness.kits.kargo.KargoProject.promote).

    The real Kargo runs it."""
    stage, freight = f"s{i}", f"f-{i}"
    co.create_namespaced_custom_object(GROUP_KARGO, VERSION_KARGO, ns, "promotions",
                                       objects.promotion(
        f"{stage}.{ulid()}.{freight[:7]}".lower(), stage=stage, freight=freight,
        owner={"metadata": {"uid": uid}}, steps=STEPS))


def promote_as_kargo(co: client.CustomObjectsApi, ns: str, i: int, uid: str) -> None:
    """Kargo finished promoting f-<i> into s<i>, for engine mode.

    The shapes are support/testkit/kargo_shapes.py's."""
    co.patch_namespaced_custom_object_status(
        GROUP_KARGO, VERSION_KARGO, ns, "stages", f"s{i}",
        kargo_shapes.promotion_patch(None, {"w": f"f-{i}"}, promotion=f"s{i}.bench"))


def runs_per_stage(co: client.CustomObjectsApi, ns: str) -> dict[str, int]:
    """How many Stages have how many AnalysisRuns."""
    runs = cast("dict[str, Any]", co.list_namespaced_custom_object(
        GROUP_ARGO, VERSION_ARGO, ns, "analysisruns"))["items"]
    per = collections.Counter(r["metadata"].get("labels", {}).get(LABEL_STAGE)
                              for r in runs)
    return {str(k): v for k, v in sorted(collections.Counter(per.values()).items())}


def delete_namespace(plane: ControlPlane, co: client.CustomObjectsApi,
                     ns: str, timeout: float = 240.0) -> None:
    """Delete ``ns`` while its verifier still runs (Kargo removes its own finalizers) and
    wait until it is gone; finalizers left after ``timeout`` are removed by hand."""
    plane.kubectl("delete", "namespace", ns, "--wait=false")
    deadline = time.monotonic() + timeout
    stripped = False
    while plane.kubectl("get", "namespace", ns, check=False).returncode == 0:
        if time.monotonic() > deadline and not stripped:
            print(f"[bench] {ns}: still terminating after {timeout:.0f}s; removing the "
                  "finalizers left on its Stages", file=sys.stderr, flush=True)
            stages = cast("dict[str, Any]", co.list_namespaced_custom_object(
                GROUP_KARGO, VERSION_KARGO, ns, "stages"))
            for obj in stages["items"]:
                with contextlib.suppress(client.ApiException):
                    co.patch_namespaced_custom_object(GROUP_KARGO, VERSION_KARGO, ns, "stages",
                                                      obj["metadata"]["name"],
                                                      {"metadata": {"finalizers": None}})
            stripped = True
        if time.monotonic() > deadline + 120:
            raise SystemExit(f"namespace {ns} not deleted")
        time.sleep(1)


def _serve_metrics(conn: Any) -> None:
    server = MetricServer()
    conn.send(server.url)
    while conn.recv() == "hits":
        conn.send(len(server.hits))
    server.close()


class MetricProcess:
    """The web metric's endpoint in a child process: it stands for a monitoring system, so
    it does not share an interpreter lock with the bench's writers and watches, which are
    busier in some scenarios than in others."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")  # no fork of a process with threads
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve_metrics, args=(child,), daemon=True)
        self._proc.start()
        self.url: str = self._conn.recv()

    def hits(self) -> int:
        self._conn.send("hits")
        return int(self._conn.recv())

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._conn.send("stop")
        self._proc.join(5)


# --------------------------------------------------------------------------- a scenario


@dataclass
class Result:
    scenario: str
    run: str
    n: int
    round: int = 0
    # Per Stage, seconds: "total" (promotion recorded -> Verified=True), "verifier_share".
    samples: dict[str, list[float]] = field(default_factory=dict)
    offsets: dict[str, float] = field(default_factory=dict)
    latency: dict[str, Any] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)


def observe_args(ns: str) -> tuple[str, ...]:
    return ("--controllers", "stage-verification", "--stage-verification", "observe",
            "--observe-lag-seconds", "2", "--refresh-lagging", "--namespaces", ns,
            "--no-leader-elect")


def engine_args(ns: str, workers: int) -> tuple[str, ...]:
    return ("--controllers", "stage-verification", "--stage-verification", "engine",
            "--namespaces", ns, "--no-leader-elect", "--workers", str(workers))


def say(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass
class Verifiers:
    """The verifiers a scenario starts (stopped at its end, newest first) and the ones
    whose CPU and memory it measures, by name (``kargo``, ``rollgate``)."""

    started: list[ManagedProcess] = field(default_factory=list)
    measured: dict[str, Process] = field(default_factory=dict)

    def add(self, name: str, proc: ManagedProcess) -> None:
        self.started.append(proc)
        self.measured[name] = Process(proc)


def start_verifiers(verifiers: Verifiers, rollgate: HostRollgate, *, key: str, run: str,
                    ns: str, args: argparse.Namespace) -> None:
    """The verifier of scenario ``key``: Kargo for (a) and (b), rollgate's reconciler in
    observe mode for (b) and in engine mode for (c)."""
    if key in ("a", "b"):
        verifiers.add("kargo", kargo.start_controller(
            rollgate.plane, name=f"kargo-controller-{key}-{run}", env=dict(args.kargo_env)))
    mode = (observe_args(ns) if key == "b"
            else engine_args(ns, args.workers) if key.startswith("c") else None)
    if mode is not None:
        proc = rollgate.start_reconciler(*mode, name=f"reconciler-{key}-{run}")
        verifiers.add("rollgate", proc)
        proc.wait_ready(60)


@dataclass
class Window:
    """What a scenario measures from just before its promotions until the API server is
    quiet again: kube-apiserver's request counts and each process's CPU seconds."""

    before: collections.Counter[Key]
    processes: list[Process]
    after: collections.Counter[Key] = field(default_factory=collections.Counter)
    seconds: float = 0.0

    @classmethod
    def open(cls, plane: ControlPlane, processes: list[Process]) -> Window:
        before = api_requests(plane)
        for p in processes:
            p.mark()
        return cls(before, processes)

    def close(self, plane: ControlPlane, t0: float) -> None:
        self.after = api_requests(plane)
        self.seconds = time.monotonic() - t0
        for p in self.processes:
            p.finish()


def promote_all(co: client.CustomObjectsApi, ns: str, uids: dict[str, str], *, n: int,
                with_kargo: bool, phase: float, pace: dict[str, float] | None) -> float:
    """Promote the ``n`` Stages (``pace``: each at its offset) from ``phase`` of the
    wall-clock second; the monotonic time the promotions started."""
    promote = promote_with_kargo if with_kargo else promote_as_kargo
    # The promotions start at ``phase`` of the wall-clock second. The Argo Rollouts
    # controller takes a run's next measurement at the previous one's finishedAt as
    # stored, to the second, plus the interval: a two-step run lasts 3-4 s, shorter the
    # later in its second it started. Kargo's Promotion controller spreads (a)'s runs
    # over seconds, so (a) sees every phase; (c)'s burst starts its runs within a few
    # hundred ms, at one phase, so rounds take (c) through the phases evenly.
    time.sleep((phase - time.time() % 1) % 1)
    t0 = time.monotonic()

    def one(i: int) -> None:
        if pace is not None:
            time.sleep(max(0.0, t0 + pace.get(f"s{i}", 0.0) - time.monotonic()))
        promote(co, ns, i, uids[f"s{i}"])

    order = sorted(range(n), key=lambda i: (pace or {}).get(f"s{i}", 0.0))
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, order))
    return t0


@dataclass
class Seen:
    """What the scenario's two watches saw, and when (monotonic seconds per Stage)."""

    stages: StageWatch
    runs: RunWatch

    def latencies(self) -> list[float]:
        """Per verified Stage: promotion recorded -> Verified=True."""
        return [self.stages.verified[s] - self.stages.promoted[s] for s in self.stages.verified]

    def parts(self) -> dict[str, list[float]]:
        """Where the time went, per Stage that was verified: the verifier until the run
        exists, the Argo Rollouts controller until the run is terminal, the verifier until
        Verified=True (each end as seen through the watches)."""
        verified, promoted = self.stages.verified, self.stages.promoted
        created, finished = self.runs.created, self.runs.finished
        both = [s for s in verified if s in created and s in finished]
        to_run = [created[s] - promoted[s] for s in both]
        to_verified = [verified[s] - finished[s] for s in both]
        return {"recorded_to_run_created": to_run,
                "run_created_to_run_terminal": [finished[s] - created[s] for s in both],
                "run_terminal_to_verified_true": to_verified,
                "verifier_share": [a + b for a, b in zip(to_run, to_verified, strict=True)]}


def latency_figures(seen: Seen, *, n: int, late: float, timeout: float) -> dict[str, Any]:
    latencies = seen.latencies()
    return {
        **summary(latencies),
        "verified": len(seen.stages.verified),
        "promotion_recorded": len(seen.stages.promoted),
        "within_10s": sum(x <= 10 for x in latencies),
        f"late_over_{late:g}s": sum(x > late for x in latencies),
        "not_verified_by_timeout": n - len(seen.stages.verified),
        "timeout_s": timeout,
        "parts": {name: summary(values) for name, values in seen.parts().items()},
    }


def api_figures(delta: collections.Counter[Key], *, n: int,
                with_kargo: bool) -> dict[str, Any]:
    """The API requests of the window per verification: writes to what a verification
    touches by verb and resource (the bench's own write per Stage subtracted), 409s, reads;
    the other writes (Leases, endpoints) apart."""
    own = "POST promotions" if with_kargo else "PATCH stages/status"
    writes_by: collections.Counter[str] = collections.Counter()
    background: collections.Counter[str] = collections.Counter()
    conflicts = 0
    for (verb, resource, code), v in delta.items():
        if verb not in WRITE_VERBS or not v:
            continue
        if resource.split("/")[0] in VERIFICATION_RESOURCES:
            writes_by[f"{verb} {resource}"] += v
            conflicts += v if code == "409" else 0
        else:
            background[f"{verb} {resource}"] += v
    writes_by[own] -= n
    reads = sum(v for (verb, _, _), v in delta.items() if verb in READ_VERBS)
    return {
        "api_writes_per_verification": round(sum(writes_by.values()) / n, 2),
        "api_writes_by_verb_resource_per_verification": {
            k: round(v / n, 2) for k, v in sorted(writes_by.items()) if v},
        "api_conflicts_409_per_verification": round(conflicts / n, 2),
        "api_reads_get_list_per_verification_all_resources": round(reads / n, 2),
        "bench_own_writes_subtracted": {own: n},
        "other_writes_in_window": dict(sorted(background.items())),
    }


def reconciler_figures(verifiers: Verifiers, *, key: str, n: int) -> dict[str, Any]:
    """rollgate's reconciler's own metrics (and, observing, its refreshes by why)."""
    if "rollgate" not in verifiers.measured:
        return {}
    proc = verifiers.measured["rollgate"].proc
    figures = rollgate_metrics(proc.url, n)
    if key == "b":
        figures["refreshes_by_why"] = refreshes_by_why(proc.log_path)
    return figures


def scenario(rollgate: HostRollgate, co: client.CustomObjectsApi,
             rollouts: ManagedProcess, metrics: MetricProcess, *, key: str,
             run: str, n: int, args: argparse.Namespace,
             phase: float, pace: dict[str, float] | None = None) -> Result:
    plane = rollgate.plane
    ns = f"bench-kargo-{key}-{run}"
    with_kargo = key in ("a", "b")
    timeout = args.kargo_timeout if with_kargo else args.timeout
    say(f"{SCENARIOS[key]} / {run} / {n} Stages: seeding {ns}")
    uids = seed(plane, co, ns, n, metrics.url, run)
    verifiers = Verifiers()
    try:
        start_verifiers(verifiers, rollgate, key=key, run=run, ns=ns, args=args)
        settled = settle(plane)
        freight_of = {f"s{i}": f"f-{i}" for i in range(n)}
        seen = Seen(StageWatch(co, ns, freight_of), RunWatch(co, ns, freight_of))
        seen.stages.start()
        seen.runs.start()
        time.sleep(0.5)  # the watch requests are on their way
        others = {"rollouts": Process(rollouts), "apiserver": Process(
            next(x for x in plane.processes if x.name == "kube-apiserver"))}
        window = Window.open(plane, [*verifiers.measured.values(), *others.values()])
        say(f"{ns}: promoting {n} Stages (settled in {settled}s)")
        t0 = promote_all(co, ns, uids, n=n, with_kargo=with_kargo, phase=phase, pace=pace)
        promoted_in = time.monotonic() - t0
        if not seen.stages.done.wait(timeout):
            say(f"{ns}: {len(seen.stages.verified)} of {n} Stages Verified=True after "
                f"{timeout:.0f}s; counting the rest as not verified")
        seen.stages.stop()
        seen.runs.stop()
        wall = time.monotonic() - t0
        settle(plane)
        window.close(plane, t0)
        reconciler = reconciler_figures(verifiers, key=key, n=n)
        runs = runs_per_stage(co, ns)
        say(f"{ns}: {len(seen.stages.verified)}/{n} verified in {wall:.1f}s; "
            f"runs per Stage {runs}")
        delete_namespace(plane, co, ns)
    finally:
        for proc in reversed(verifiers.started):
            plane.stop_process(proc)

    promoted = seen.stages.promoted
    first = min(promoted.values(), default=0.0)
    measured = verifiers.measured
    return Result(key, run, n, offsets={s: t - first for s, t in promoted.items()},
                  samples={"total": seen.latencies(),
                           "verifier_share": seen.parts()["verifier_share"]},
                  latency=latency_figures(seen, n=n, late=args.late_seconds, timeout=timeout),
                  figures={
        **api_figures(window.after - window.before, n=n, with_kargo=with_kargo),
        "window_s": round(window.seconds, 1),
        **{f"{name}_{k}": v for name, p in measured.items() for k, v in p.figures().items()},
        "verifier_cpu_s": round(sum(p.cpu_after - p.cpu_before for p in measured.values()), 2),
        "rollouts_controller_cpu_s": others["rollouts"].figures()["cpu_s"],
        "kube_apiserver_cpu_s": others["apiserver"].figures()["cpu_s"],
        "runs_per_stage": runs,
        "rollgate_reconciler": reconciler,
        "promotion_recorded_spread_s": round(max(promoted.values(), default=0.0) - first, 2),
        "promotions_written_s": round(promoted_in, 2),
        "stage_watch_events": seen.stages.events,
        "run_watch_events": seen.runs.events,
        "settle_before_s": settled,
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
    })


# --------------------------------------------------------------------------- the report


def ratio(x: float | None, y: float | None) -> float | None:
    if x is None or y is None or y == 0 or (isinstance(x, float) and math.isnan(x)):
        return None
    return round(x / y, 2)


FIGURES: list[tuple[str, Callable[[Result], float | None]]] = [
    ("p50 s", lambda r: r.latency["p50_s"]),
    ("p99 s", lambda r: r.latency["p99_s"]),
    ("max s", lambda r: r.latency["max_s"]),
    ("verifier share p50 s", lambda r: r.latency["parts"]["verifier_share"]["p50_s"]),
    ("verifier share p99 s", lambda r: r.latency["parts"]["verifier_share"]["p99_s"]),
    ("API writes / verification", lambda r: r.figures["api_writes_per_verification"]),
    ("verifier CPU s", lambda r: r.figures["verifier_cpu_s"]),
    ("verifier peak RSS MiB", lambda r: (r.figures.get("kargo_peak_rss_mib", 0.0)
                                         + r.figures.get("rollgate_peak_rss_mib", 0.0))),
]


# Latency figures over several rounds come from every Stage of every round pooled: one
# round's Stages share the phase its promotions started at (see ``scenario``), so a median
# of per-round percentiles would weigh phases, not Stages. The rest: medians over rounds.
POOLED = {"p50 s": ("total", "p50_s"), "p99 s": ("total", "p99_s"),
          "max s": ("total", "max_s"),
          "verifier share p50 s": ("verifier_share", "p50_s"),
          "verifier share p99 s": ("verifier_share", "p99_s")}


def over_rounds(results: list[Result]) -> dict[str, float | None]:
    """Each figure of one scenario over its rounds (a single round: its own figures)."""
    out: dict[str, float | None] = {}
    for name, f in FIGURES:
        if name in POOLED:
            sample, stat = POOLED[name]
            out[name] = summary([x for r in results for x in r.samples[sample]])[stat]
        else:
            values = [v for v in (f(r) for r in results) if v is not None]
            out[name] = round(statistics.median(values), 3) if values else None
    return out


def compare(results: list[Result]) -> dict[str, Any]:
    """Ratios to (c) and the targets, per run length, on each figure over the rounds
    (``over_rounds``)."""
    by: dict[tuple[str, str], list[Result]] = collections.defaultdict(list)
    for r in results:
        by[(r.scenario, r.run)].append(r)
    return {run: run_comparison({key: rs for (key, r_run), rs in by.items() if r_run == run},
                                run=run)
            for run in RUNS if by.get(("c", run))}


def run_comparison(rounds: dict[str, list[Result]], *, run: str) -> dict[str, Any]:
    """One run length: each scenario's figures over its rounds (``rounds``: scenario ->
    its results), their ratios to (c) and the targets."""
    med = {key: over_rounds(rs) for key, rs in rounds.items()}
    entry: dict[str, Any] = {"rounds": {key: len(rs) for key, rs in rounds.items()},
                             "over_rounds": med}
    for key in ("a", "b", "c-paced"):
        if key in med:
            entry[f"{key}_over_c"] = {name: ratio(med[key][name], med["c"][name])
                                      for name, _ in FIGURES}
    if "a" in med and "c-paced" in med:
        entry["c_paced_ahead_of_a"] = {
            name: ahead(med["c-paced"][name], med["a"][name]) for name, _ in FIGURES}
    if "a" in med:
        entry["target_c_ahead_of_a"] = c_ahead_of_a(med, censored=censored(rounds["a"]))
    if "b" in med and run == "instant":
        entry["target_b_p99_within_2s_plus_1_5x_c_p99"] = b_target(
            med["b"]["p99 s"], med["c"]["p99 s"], censored=censored(rounds["b"]))
    return entry


def censored(results: list[Result]) -> bool:
    """Whether a round left a Stage unverified by the timeout."""
    return any(r.latency["not_verified_by_timeout"] for r in results)


def c_ahead_of_a(med: dict[str, dict[str, float | None]], *,
                 censored: bool) -> dict[str, bool]:
    """Per figure, whether (c) is ahead of (a). A Stage Kargo left unverified is slower
    than any verified one: (c) is then ahead on the latency figures whatever the verified
    Stages' percentiles say."""
    return {name: bool((censored and name.endswith(" s") and "CPU" not in name)
                       or ahead(med["c"][name], med["a"][name]))
            for name, _ in FIGURES}


def ahead(x: float | None, y: float | None) -> bool:
    return x is not None and y is not None and x < y


def b_target(b_p99: float | None, c_p99: float | None, *, censored: bool) -> dict[str, Any]:
    """(b)'s instant-run p99 against 2 s + 1.5 x (c)'s p99, both over the same rounds;
    never met while (b) left a Stage unverified."""
    bound = None if c_p99 is None else round(2 + 1.5 * c_p99, 3)
    return {"bound_s": bound, "b_p99_s": b_p99,
            "met": bool(bound is not None and b_p99 is not None and b_p99 <= bound
                        and not censored)}


def markdown(results: list[Result], late: float, comparison: dict[str, Any]) -> str:
    def s(x: Any) -> str:
        return "-" if x is None else f"{x:g}" if isinstance(x, float | int) else str(x)

    rounds = max((r.round for r in results), default=0) + 1

    def who(r: Result) -> str:
        return f"({r.scenario}){round_suffix(r, rounds)}"

    lines = [f"| runs | scenario | verified | late (> {late:g}s) | p50 s | p99 s | max s |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for r in results:
        lt = r.latency
        lines.append(f"| {r.run} | {who(r)} {SCENARIOS[r.scenario]} | "
                     f"{lt['verified']}/{r.n} | {lt[f'late_over_{late:g}s']} | "
                     f"{s(lt['p50_s'])} | {s(lt['p99_s'])} | {s(lt['max_s'])} |")
    lines += ["", "| runs | scenario | recorded -> run exists | run exists -> terminal | "
              "terminal -> Verified=True | verifier's share |", "|---|---|---|---|---|---|"]
    for r in results:
        parts = r.latency["parts"]
        cells = " | ".join(f"{s(parts[k]['p50_s'])} / {s(parts[k]['p99_s'])}" for k in (
            "recorded_to_run_created", "run_created_to_run_terminal",
            "run_terminal_to_verified_true", "verifier_share"))
        lines.append(f"| {r.run} | {who(r)} | {cells} |")
    lines += ["", "| runs | scenario | API writes / verification | of which | Kargo CPU s | "
              "rollgate CPU s | Kargo peak RSS MiB | rollgate peak RSS MiB | runs per Stage |",
              "|---|---|---:|---|---:|---:|---:|---:|---|"]
    for r in results:
        f = r.figures
        top = ", ".join(f"{k} {v:g}" for k, v in sorted(
            f["api_writes_by_verb_resource_per_verification"].items(),
            key=lambda kv: -kv[1])[:6])
        lines.append(f"| {r.run} | {who(r)} | {s(f['api_writes_per_verification'])} | "
                     f"{top} | {s(f.get('kargo_cpu_s'))} | {s(f.get('rollgate_cpu_s'))} | "
                     f"{s(f.get('kargo_peak_rss_mib'))} | {s(f.get('rollgate_peak_rss_mib'))} | "
                     f"{f['runs_per_stage']} |")
    if rounds > 1:
        names = [name for name, _ in FIGURES]
        lines += ["", f"Over {rounds} rounds (latency: every Stage of every round; the "
                  "rest: medians of the rounds):", "",
                  "| runs | scenario | " + " | ".join(names) + " |",
                  "|---|---|" + "---:|" * len(names)]
        for run, entry in comparison.items():
            for key, figures in entry["over_rounds"].items():
                lines.append(f"| {run} | ({key}) | "
                             + " | ".join(s(figures[name]) for name in names) + " |")
    return "\n".join(lines)


def round_suffix(r: Result, rounds: int) -> str:
    return f" #{r.round + 1}" if rounds > 1 else ""


def label(r: Result, rounds: int) -> str:
    return f"{r.run}/{r.scenario} {SCENARIOS[r.scenario]}{round_suffix(r, rounds)}"


def one_scenario(rollgate: HostRollgate, co: client.CustomObjectsApi,
                 rollouts: ManagedProcess, metrics: MetricProcess,
                 results: list[Result], *, key: str, run: str, rnd: int,
                 args: argparse.Namespace) -> Result:
    """One scenario of one round; (c-paced) follows the (a) of its own round."""
    kargo_a = next((r for r in reversed(results) if (r.scenario, r.run, r.round)
                    == ("a", run, rnd)), None)
    result = scenario(rollgate, co, rollouts, metrics, key=key, run=run, n=args.stages,
                      args=args, pace=kargo_a.offsets if key == "c-paced" and kargo_a
                      else None, phase=(rnd + 0.5) / args.repeat)
    result.round = rnd
    say(json.dumps({"scenario": key, "run": run, "round": rnd + 1, **result.latency}))
    return result


def _env_pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key, value


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stages", type=int, default=50)
    p.add_argument("--runs", default="instant,two-step",
                   help="comma list of run lengths: instant, two-step")
    p.add_argument("--scenarios", default="a,b,c,c-paced",
                   help="comma list of a, b, c, c-paced (in this order; c-paced needs a)")
    p.add_argument("--workers", type=int, default=DEFAULT_WORKERS,
                   help="rollgate's workers (the reconciler's default; Kargo's "
                        "MAX_CONCURRENT_STAGE_RECONCILES defaults to 4)")
    p.add_argument("--kargo-env", action="append", default=[], type=_env_pair,
                   metavar="KEY=VALUE",
                   help="extra environment for the Kargo controller, repeatable (e.g. "
                        "KUBE_API_QPS=500: Kargo's client defaults to 50 QPS, burst 300)")
    p.add_argument("--kargo-timeout", type=float, default=330.0,
                   help="seconds the Kargo scenarios wait for every Verified=True (its "
                        "requeue is 5 minutes)")
    p.add_argument("--timeout", type=float, default=None,
                   help="the engine scenario's (default max(120, N/2))")
    p.add_argument("--late-seconds", type=float, default=60.0,
                   help="a verification slower than this counts as late")
    p.add_argument("--work-dir", type=Path, default=None,
                   help="the plane's directory, kept with every process's log (default: a "
                        "temporary one, removed)")
    p.add_argument("--repeat", type=int, default=1,
                   help="rounds of every scenario; targets and ratios then take the latency "
                        "figures over every Stage of every round, the rest as medians")
    args = p.parse_args()
    n = args.stages
    args.timeout = args.timeout or max(120.0, n * 0.5)
    runs = [r for r in args.runs.split(",") if r]
    keys = [k for k in args.scenarios.split(",") if k]
    if set(runs) - set(RUNS) or set(keys) - set(SCENARIOS):
        p.error(f"--runs from {sorted(RUNS)}, --scenarios from {sorted(SCENARIOS)}")
    if "c-paced" in keys and ("a" not in keys or keys.index("a") > keys.index("c-paced")):
        p.error("--scenarios: c-paced is paced by (a), so a must come before it")
    if args.repeat < 1:
        p.error("--repeat: at least 1")
    trees.kargo_binary()  # fail before the plane starts when Kargo is not built

    with plane_with_rollgate(work_dir=args.work_dir, webhook=False) as rollgate:
        plane = rollgate.plane
        metrics = MetricProcess()
        results: list[Result] = []
        try:
            co = client.CustomObjectsApi(plane.api_client())
            rollouts = argo_rollouts.run_on(plane)
            # Rounds interleave the scenarios (a, c, a, c, ...), so each median is taken over
            # the same stretch of the machine's noise as the others.
            for rnd in range(args.repeat):
                for run in runs:
                    for key in keys:
                        results.append(one_scenario(rollgate, co, rollouts, metrics, results,
                                                    key=key, run=run, rnd=rnd, args=args))
            comparison = compare(results)
            report({
                "stages": n,
                "workers": args.workers,
                "rounds": args.repeat,
                "kargo_timeout_s": args.kargo_timeout,
                "scenarios": {label(r, args.repeat): {
                    "latency_promotion_recorded_to_verified": r.latency, **r.figures}
                    for r in results},
                "comparison": comparison,
                "metric_server_requests": metrics.hits(),
            })
            print()
            print(markdown(results, args.late_seconds, comparison))
        finally:
            metrics.close()

    return 0


if __name__ == "__main__":
    sys.exit(main())
