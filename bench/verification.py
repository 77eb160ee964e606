"""Verification latency under load, against the floor of the API server's writes.

Starts a control plane (support/harness/plane.py, no webhook: only the reconciler's path is
measured), creates N Stages (Kargo v1 shapes: requestedFreight, spec.verification), each
promoted to its own Freight the way Kargo records it (support/testkit/kargo_shapes.py),
with the reconciler in engine mode; waits until every AnalysisRun exists, then marks all
runs Successful at
once (playing the Argo Rollouts controller: a bench, unlike the e2e tests, must not spend
the 2 cores on it) and records, per Stage, the time from its run's phase change to
``status.verifiedIn.<stage>`` appearing on its Freight and to the Stage's
``Verified=True`` condition (each seen through a watch).

The floor is measured in the same run: the same N Stages, Freight and runs in a second
namespace, and a bare client (a watch on the runs and the same number of worker threads)
that makes exactly the writes a completed verification needs (the Freight's verifiedIn,
then the Stage status) as soon as it sees the phase change. The report gives median, p90,
p99 and worst of both and rollgate's p99 as a ratio to the floor's, the reconciler's peak
RSS (VmHWM), the load average, and the number of runs per Stage, which must be exactly
one (the bench fails otherwise: a fast result that double-created runs is worthless).

With ``--takeover`` it measures leader failover instead: two reconcilers with leader
election (``--lease-duration``, default 15 like the Deployment), the leader is killed
with SIGKILL (no release of the Lease, as on a node failure) and a new promotion is made
at that moment; it records the time until the standby holds the Lease and until the
AnalysisRun of that promotion exists (the standby reconciled it). Median and worst over
``--trials`` (default 3). Nothing is asserted about the figures.

    .venv/bin/python -m bench.verification [--stages 100] [--workers 32] [--full-history]
    .venv/bin/python -m bench.verification --takeover [--trials 3] [--lease-duration 15]
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import signal
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

from kubernetes import client

from bench.stats import report, summary
from bench.watches import Watch
from harness.kits.plane import plane_with_rollgate
from harness.plane import ControlPlane
from harness.process import ManagedProcess
from reconciler.runtime.options import DEFAULT_WORKERS
from reconciler.verification.naming import freight_collection_id
from schemas.constants import LABEL_STAGE
from schemas.kinds import GROUP_ARGO, GROUP_KARGO, VERSION_ARGO, VERSION_KARGO
from testkit import kargo_shapes, objects

ROOT = Path(__file__).resolve().parent.parent

NS = "bench"
FLOOR_NS = "bench-floor"
TEMPLATE_SPEC: dict[str, Any] = {"metrics": [{"name": "m", "provider": {"web": {"url": "http://127.0.0.1:9/"}}}]}


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def list_items(co: client.CustomObjectsApi, ns: str, plural: str,
               **kwargs: Any) -> list[dict[str, Any]]:
    """The ``items`` of an argoproj.io list (the client's JSON: a dict per object)."""
    listed = cast("dict[str, Any]", co.list_namespaced_custom_object(
        GROUP_ARGO, VERSION_ARGO, ns, plural, **kwargs))
    return cast("list[dict[str, Any]]", listed["items"])


def runs_per_stage(co: client.CustomObjectsApi, ns: str = NS) -> collections.Counter[str]:
    runs = list_items(co, ns, "analysisruns")
    return collections.Counter(r["metadata"]["labels"][LABEL_STAGE] for r in runs)


def check_one_run_each(counts: collections.Counter[str], n: int, when: str) -> None:
    wrong = {s: c for s, c in counts.items() if c != 1}
    if len(counts) != n or wrong:
        raise SystemExit(f"{when}: expected exactly one run for each of {n} Stages, got "
                         f"{len(counts)} Stages with runs, these with more: {wrong}")


def verified_condition(stage: dict[str, Any]) -> bool:
    conds = (stage.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Verified" and c.get("status") == "True" for c in conds)


def lease_holder(coord: client.CoordinationV1Api) -> str | None:
    try:
        lease = coord.read_namespaced_lease("rollgate-reconciler", "rollgate-system")
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    assert lease.spec is not None
    return lease.spec.holder_identity or None


def holds_lease(coord: client.CoordinationV1Api, identity: str) -> Callable[[], bool]:
    """A check that ``identity`` holds the reconciler's Lease."""
    return lambda: lease_holder(coord) == identity


def poll(what: str, check: Callable[[], bool], timeout: float = 120.0,
         every: float = 0.05) -> float:
    """monotonic time at which ``check()`` first held (polled every ``every`` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(every)
    raise SystemExit(f"timed out after {timeout}s waiting for {what}")


def seed(plane: ControlPlane, co: client.CustomObjectsApi, ns: str, *,
         count: int, full_history: bool = False) -> None:
    """Namespace ``ns`` with one AnalysisTemplate ``t`` and ``count`` Stages ``s<i>``
    verifying with it, each with its own Freight ``f<i>`` to be promoted; with
    ``full_history`` each Stage first gets the status of a long life
    (support/testkit/kargo_shapes.py ``full_history_status``: 10 freight collections with
    10 verifications each)."""
    plane.kubectl("create", "namespace", ns)
    template = objects.analysis_template("t", metrics=TEMPLATE_SPEC["metrics"])
    co.create_namespaced_custom_object(GROUP_ARGO, VERSION_ARGO, ns, "analysistemplates", template)

    def one(i: int) -> None:
        co.create_namespaced_custom_object(GROUP_KARGO, VERSION_KARGO, ns, "freights",
                                           objects.freight(f"f{i}", warehouse="w"))
        co.create_namespaced_custom_object(GROUP_KARGO, VERSION_KARGO, ns, "stages", objects.stage(
            f"s{i}", warehouse="w", verification=objects.verification("t")))
        if full_history:
            co.patch_namespaced_custom_object_status(
                GROUP_KARGO, VERSION_KARGO, ns, "stages", f"s{i}",
                {"status": kargo_shapes.full_history_status(f"s{i}", ns)})

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(count)))


def promote(co: client.CustomObjectsApi, ns: str, i: int, *, full_history: bool = False) -> None:
    """Kargo finished promoting f<i> into s<i> (the status shapes Kargo writes; with
    ``full_history`` on top of the Stage's history, which Kargo keeps)."""
    stage = (cast("dict[str, Any]", co.get_namespaced_custom_object(
                 GROUP_KARGO, VERSION_KARGO, ns, "stages", f"s{i}"))
             if full_history else None)
    co.patch_namespaced_custom_object_status(
        GROUP_KARGO, VERSION_KARGO, ns, "stages", f"s{i}",
        kargo_shapes.promotion_patch(stage, {"w": f"f{i}"}, promotion=f"p{i}"))


def takeover(args: argparse.Namespace) -> int:
    """Leader failover: SIGKILL the leader, time the standby's Lease and first reconcile."""
    ns = "takeover"
    with plane_with_rollgate(webhook=False) as rollgate:
        plane = rollgate.plane
        api = plane.api_client()
        co = client.CustomObjectsApi(api)
        coord = client.CoordinationV1Api(api)
        seed(plane, co, ns, count=args.trials)
        common = ("--controllers", "stage-verification", "--stage-verification", "engine",
                  "--namespaces", ns, "--leader-elect",
                  "--lease-duration", str(args.lease_duration))
        to_lease: list[float] = []
        to_run: list[float] = []
        for i in range(args.trials):
            leader = rollgate.start_reconciler(*common, "--identity", f"leader-{i}",
                                            name=f"takeover-leader-{i}")
            standby: ManagedProcess | None = None
            try:
                # The standby starts only once the first one leads, so the roles are known.
                poll("the first replica to lead", holds_lease(coord, f"leader-{i}"))
                leader.wait_ready(60)
                standby = rollgate.start_reconciler(*common, "--identity", f"standby-{i}",
                                                 name=f"takeover-standby-{i}")
                standby.wait_ready(60)  # a standby reports ready ("standby: not the leader")

                def run_exists(i: int = i) -> bool:
                    return bool(list_items(co, ns, "analysisruns",
                                           label_selector=f"{LABEL_STAGE}=s{i}"))

                killed = time.monotonic()
                leader.kill(signal.SIGKILL)
                promote(co, ns, i)
                leased = poll("the standby to hold the Lease",
                              holds_lease(coord, f"standby-{i}"))
                ran = poll("the standby to create the run", run_exists, every=0.1)
                to_lease.append(leased - killed)
                to_run.append(ran - killed)
            finally:
                leader.stop()
                if standby is not None:
                    standby.stop()  # SIGTERM: releases the Lease for the next trial
        result = {
            "trials": args.trials,
            "lease_duration_s": args.lease_duration,
            "kill_to_standby_holds_lease_s": [round(x, 3) for x in to_lease],
            "kill_to_standby_holds_lease": {k: v for k, v in summary(to_lease).items()
                                            if k != "p90_s"},
            "kill_to_run_of_new_promotion_s": [round(x, 3) for x in to_run],
            "kill_to_run_of_new_promotion": {k: v for k, v in summary(to_run).items()
                                             if k != "p90_s"},
        }
        report(result)

    return 0


class Completion:
    """Watches ``ns`` and records when each Stage's Freight shows verifiedIn and when
    its Verified condition turns True, then flips every run to Successful at once."""

    def __init__(self, co: client.CustomObjectsApi, ns: str, n: int) -> None:
        self.co, self.ns, self.n = co, ns, n
        self.verified: dict[str, float] = {}
        self.condition_true: dict[str, float] = {}
        self.changed: dict[str, float] = {}
        self.done = threading.Event()
        self.conditions_done = threading.Event()

    def _watch(self, plural: str, record: Callable[[dict[str, Any]], bool]) -> None:
        listed = cast("dict[str, Any]", self.co.list_namespaced_custom_object(
            GROUP_KARGO, VERSION_KARGO, self.ns, plural))
        rv = listed["metadata"]["resourceVersion"]
        w = Watch()
        for event in w.stream(self.co.list_namespaced_custom_object, GROUP_KARGO, VERSION_KARGO,
                              self.ns, plural, resource_version=rv, timeout_seconds=600):
            if record(event["object"]):
                w.stop()

    def _freight(self, obj: dict[str, Any]) -> bool:
        stage = "s" + obj["metadata"]["name"][1:]
        if stage in ((obj.get("status") or {}).get("verifiedIn") or {}):
            self.verified.setdefault(stage, time.monotonic())
        if len(self.verified) >= self.n:
            self.done.set()
        return self.done.is_set()

    def _stage(self, obj: dict[str, Any]) -> bool:
        if verified_condition(obj):
            self.condition_true.setdefault(obj["metadata"]["name"], time.monotonic())
        if len(self.condition_true) >= self.n:
            self.conditions_done.set()
        return self.conditions_done.is_set()

    def run(self, runs: dict[str, str],
            timeout: float) -> dict[str, dict[str, float | None]]:
        threading.Thread(target=self._watch, args=("freights", self._freight),
                         daemon=True).start()
        threading.Thread(target=self._watch, args=("stages", self._stage),
                         daemon=True).start()
        time.sleep(0.5)

        def succeed(stage: str) -> None:
            self.changed[stage] = time.monotonic()
            self.co.patch_namespaced_custom_object(
                GROUP_ARGO, VERSION_ARGO, self.ns, "analysisruns", runs[stage],
                {"status": {"phase": "Successful"}})

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(succeed, sorted(runs)))
        if not self.done.wait(timeout) or not self.conditions_done.wait(timeout):
            raise SystemExit(f"{self.ns}: only {len(self.verified)} of {self.n} verified, "
                             f"{len(self.condition_true)} Verified=True after {timeout}s")
        return {
            "freight_verified_in": summary([self.verified[s] - self.changed[s] for s in runs]),
            "stage_verified_true": summary([self.condition_true[s] - self.changed[s]
                                            for s in runs]),
        }


def reconcile_counts(url: str) -> dict[str, float]:
    """The reconciler's own count of passes by result (success, conflict, error...)."""
    text = urllib.request.urlopen(url + "/metrics", timeout=10).read().decode()
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("rollgate_reconciler_reconcile_total{"):
            result = line.split('result="', 1)[1].split('"', 1)[0]
            counts[result] = counts.get(result, 0) + float(line.rsplit(" ", 1)[1])
    return counts


def floor_writer(kubeconfig: str, ns: str, workers: int, ready: Any) -> None:
    """The floor: on a run's phase change to Successful, the two writes a completed
    verification needs (Freight verifiedIn, then the Stage status), nothing else: the
    same HTTP client and watch as the reconciler (kubekit.rest.Rest), the same
    number of worker threads, no cache, queue or planning. Runs in its own process."""
    from kubekit.client import load_api_client
    from kubekit.kinds import ANALYSIS_RUN, FREIGHT, STAGE
    from kubekit.rest import Rest

    rest = Rest(load_api_client(kubeconfig, pool_size=workers + 4))
    pool = ThreadPoolExecutor(workers)
    # The older freight collections each Stage write must carry (lists are replaced
    # whole), read once before the clock starts: the floor has no cache to keep.
    older = {s["metadata"]["name"]: (s.get("status") or {}).get("freightHistory", [])[1:]
             for s in rest.list(STAGE, ns)["items"]}
    rv = rest.list(ANALYSIS_RUN, ns)["metadata"]["resourceVersion"]
    ready.set()  # watching from here on: the bench may flip the runs

    def complete(run: dict[str, Any]) -> None:
        stage = run["metadata"]["labels"][LABEL_STAGE]
        i = stage[1:]
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        rest.patch(FREIGHT, ns, f"f{i}", {"status": {"verifiedIn": {stage: {"verifiedAt": now}}}},
                   subresource="status")
        entry = {"id": run["metadata"]["name"], "actor": "rollgate", "phase": "Successful",
                 "finishTime": now, "analysisRun": {"name": run["metadata"]["name"],
                                                    "namespace": ns, "phase": "Successful"}}
        current = objects.freight_collection(f"f{i}")
        rest.patch(STAGE, ns, stage, {"status": {
            "freightHistory": [{**current, "verificationHistory": [entry]},
                               *older.get(stage, [])],
            "conditions": [{"type": "Verified", "status": "True", "reason": "Verified",
                            "message": "Freight has been verified", "observedGeneration": 1,
                            "lastTransitionTime": now}]}}, subresource="status")

    for event in rest.watch(ANALYSIS_RUN, ns, resource_version=rv, timeout_seconds=600):
        obj = event.get("object") or {}
        if (obj.get("status") or {}).get("phase") == "Successful":
            pool.submit(complete, obj)


def p99_ratio(ours: dict[str, float | None], base: dict[str, float | None]) -> float:
    """``ours`` p99 over ``base``'s, two decimals (both summaries of at least one value)."""
    assert ours["p99_s"] is not None and base["p99_s"] is not None
    return round(ours["p99_s"] / base["p99_s"], 2)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--stages", type=int, default=100)
    p.add_argument("--workers", type=int, default=DEFAULT_WORKERS,
                   help="rollgate's workers and the floor's threads (the reconciler's default)")
    p.add_argument("--full-history", action="store_true",
                   help="every Stage carries a long life's status (10 freight collections "
                        "with 10 verifications each) before its promotion")
    p.add_argument("--takeover", action="store_true",
                   help="measure leader failover instead of verification latency")
    p.add_argument("--trials", type=int, default=3, help="with --takeover")
    p.add_argument("--lease-duration", type=float, default=15.0, help="with --takeover")
    args = p.parse_args()
    if args.takeover:
        return takeover(args)
    n = args.stages
    timeout = max(120.0, n * 0.5)

    with plane_with_rollgate(webhook=False) as rollgate:
        plane = rollgate.plane
        api = plane.api_client()
        co = client.CustomObjectsApi(api)
        seed(plane, co, NS, count=n, full_history=args.full_history)
        proc = rollgate.start_reconciler("--controllers", "stage-verification",
                                      "--stage-verification", "engine", "--namespaces", NS,
                                      "--no-leader-elect", "--workers", str(args.workers),
                                      name="reconciler-bench")
        proc.wait_ready(60)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: promote(co, NS, i, full_history=args.full_history),
                          range(n)))
        poll(f"{n} runs", lambda: len(list_items(co, NS, "analysisruns")) >= n,
             timeout=timeout, every=0.5)
        # Let the run-created status writes settle so only the completion path is measured.
        time.sleep(3)
        runs = list_items(co, NS, "analysisruns")
        check_one_run_each(runs_per_stage(co), n, "after start")
        by_stage = {r["metadata"]["labels"][LABEL_STAGE]: r["metadata"]["name"]
                    for r in runs}
        measured = Completion(co, NS, n).run(by_stage, timeout)
        time.sleep(2)  # give a late duplicate (the bug this guards against) time to show
        counts = runs_per_stage(co)
        check_one_run_each(counts, n, "after verification")
        rss = peak_rss_mib(proc.pid)
        reconciles = reconcile_counts(proc.url)
        proc.stop()

        # The floor: the same objects, the same writes, a bare client, the same workers.
        seed(plane, co, FLOOR_NS, count=n, full_history=args.full_history)
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: promote(co, FLOOR_NS, i, full_history=args.full_history),
                          range(n)))

        def create_run(i: int) -> tuple[str, str]:
            cid = freight_collection_id([f"f{i}"])
            name = f"s{i}.{cid[:7]}.1"
            run = objects.analysis_run(name, labels={LABEL_STAGE: f"s{i}"})
            run["spec"] = TEMPLATE_SPEC
            co.create_namespaced_custom_object(
                GROUP_ARGO, VERSION_ARGO, FLOOR_NS, "analysisruns", run)
            return f"s{i}", name

        with ThreadPoolExecutor(8) as pool:
            floor_runs = dict(pool.map(create_run, range(n)))
        # In its own process, as the reconciler is: sharing the bench's interpreter (its
        # watchers and phase-flipping threads) would slow the floor down, not rollgate.
        spawn = multiprocessing.get_context("spawn")
        ready = spawn.Event()
        writer = spawn.Process(
            target=floor_writer, args=(str(plane.kubeconfig), FLOOR_NS, args.workers, ready),
            daemon=True)
        writer.start()
        if not ready.wait(120):
            raise SystemExit("the floor writer did not start")
        time.sleep(0.5)  # its watch request is on its way
        floor = Completion(co, FLOOR_NS, n).run(floor_runs, timeout)
        writer.terminate()
        writer.join(10)

        result = {
            "stages": n,
            "full_history": args.full_history,
            "workers": args.workers,
            "rollgate": measured,
            "floor_bare_client": floor,
            "p99_ratio_to_floor": {
                "freight_verified_in": p99_ratio(measured["freight_verified_in"],
                                                 floor["freight_verified_in"]),
                "stage_verified_true": p99_ratio(measured["stage_verified_true"],
                                                 floor["stage_verified_true"]),
            },
            "reconciler_peak_rss_mib": round(rss, 1),
            "reconciles_by_result": reconciles,
            "runs_per_stage": sorted(set(counts.values())),
        }
        report(result)

    return 0


if __name__ == "__main__":
    sys.exit(main())
