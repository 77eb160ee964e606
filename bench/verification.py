"""Verification latency under load: 100 Stages verified at once.

Starts a control plane (hack/controlplane.py, no webhook: only the reconciler's path is
measured), creates N Stages each promoted to its own Freight, waits until every
AnalysisRun exists, then marks all runs Successful at once (as the Argo Rollouts
controller would) and records, per Stage, the time from its run's phase change to
``status.verifiedIn.<stage>`` appearing on its Freight, and to the Stage's own
``Verified=True`` condition (each seen through a watch). Prints median, p90 and worst
of both, the reconciler's peak RSS (VmHWM), the load average, and the number of runs
per Stage, which must be exactly one (the bench fails otherwise: a fast result that
double-created runs would be worthless).

With ``--takeover`` it measures leader failover instead: two reconcilers with leader
election (``--lease-duration``, default 15 like the Deployment), the leader is killed
with SIGKILL (no release of the Lease, as on a node failure) and a new promotion is made
at that moment; it records the time until the standby holds the Lease and until the
AnalysisRun of that promotion exists (the standby reconciled it). Median and worst over
``--trials`` (default 3). Nothing is asserted about the figures.

    .venv/bin/python bench/verification.py [--stages 100] [--workers 4]
    .venv/bin/python bench/verification.py --takeover [--trials 3] [--lease-duration 15]
"""

from __future__ import annotations

import argparse
import collections
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "hack")]

import controlplane  # noqa: E402
from kubernetes import client, watch  # noqa: E402
from stats import report, summary  # noqa: E402

NS = "bench"
GROUP, VERSION = "argoproj.io", "v1alpha1"
KARGO = "kargo.akuity.io"


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def runs_per_stage(co: client.CustomObjectsApi) -> collections.Counter[str]:
    runs = co.list_namespaced_custom_object(GROUP, VERSION, NS, "analysisruns")["items"]
    return collections.Counter(r["metadata"]["labels"]["kargo.akuity.io/stage"] for r in runs)


def check_one_run_each(counts: collections.Counter[str], n: int, when: str) -> None:
    wrong = {s: c for s, c in counts.items() if c != 1}
    if len(counts) != n or wrong:
        raise SystemExit(f"{when}: expected exactly one run for each of {n} Stages, got "
                         f"{len(counts)} Stages with runs, these with more: {wrong}")


def verified_condition(stage: dict) -> bool:
    conds = (stage.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Verified" and c.get("status") == "True" for c in conds)


def lease_holder(coord: client.CoordinationV1Api) -> str | None:
    try:
        lease = coord.read_namespaced_lease("rollgate-reconciler", "rollgate-system")
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return lease.spec.holder_identity or None


def poll(what: str, check, timeout: float = 120.0, every: float = 0.05) -> float:
    """monotonic time at which ``check()`` first held (polled every ``every`` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(every)
    raise SystemExit(f"timed out after {timeout}s waiting for {what}")


def seed(plane: controlplane.ControlPlane, co: client.CustomObjectsApi, ns: str, *,
         count: int) -> None:
    """Namespace ``ns`` with one AnalysisTemplate ``t`` and ``count`` Stages ``s<i>``
    referencing it, each with its own Freight ``f<i>`` to be promoted."""
    plane.kubectl("create", "namespace", ns)
    co.create_namespaced_custom_object(GROUP, VERSION, ns, "analysistemplates", {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "AnalysisTemplate",
        "metadata": {"name": "t"},
        "spec": {"metrics": [{"name": "m", "provider": {"job": {"spec": {}}}}]},
    })
    for i in range(count):
        co.create_namespaced_custom_object(KARGO, "v1alpha1", ns, "freights", {
            "apiVersion": f"{KARGO}/v1alpha1", "kind": "Freight",
            "metadata": {"name": f"f{i}"}, "origin": {"kind": "Warehouse", "name": "w"}})
        co.create_namespaced_custom_object(KARGO, "v1alpha1", ns, "stages", {
            "apiVersion": f"{KARGO}/v1alpha1", "kind": "Stage", "metadata": {"name": f"s{i}"},
            "spec": {"analysis": {"templates": [{"templateName": "t"}]}}})


def takeover(args: argparse.Namespace) -> int:
    """Leader failover: SIGKILL the leader, time the standby's Lease and first reconcile."""
    ns = "takeover"
    plane = controlplane.ControlPlane(with_webhook=False)
    plane.start()
    try:
        api = plane.api_client()
        co = client.CustomObjectsApi(api)
        coord = client.CoordinationV1Api(api)
        seed(plane, co, ns, count=args.trials)
        common = ("--controllers", "stage-verification", "--namespaces", ns, "--leader-elect",
                  "--lease-duration", str(args.lease_duration))
        to_lease: list[float] = []
        to_run: list[float] = []
        for i in range(args.trials):
            leader = plane.start_reconciler(*common, "--identity", f"leader-{i}",
                                            name=f"takeover-leader-{i}")
            standby: controlplane.ManagedProcess | None = None
            try:
                # The standby starts only once the first one leads, so the roles are known.
                poll("the first replica to lead", lambda i=i: lease_holder(coord) == f"leader-{i}")
                leader.wait_ready(60)
                standby = plane.start_reconciler(*common, "--identity", f"standby-{i}",
                                                 name=f"takeover-standby-{i}")
                standby.wait_ready(60)  # a standby reports ready ("standby: not the leader")

                def run_exists(i: int = i) -> bool:
                    return bool(co.list_namespaced_custom_object(
                        GROUP, VERSION, ns, "analysisruns",
                        label_selector=f"kargo.akuity.io/stage=s{i}")["items"])

                killed = time.monotonic()
                leader.kill(signal.SIGKILL)
                co.patch_namespaced_custom_object_status(KARGO, "v1alpha1", ns, "stages", f"s{i}", {
                    "status": {"freightHistory": [{"items": {"Warehouse/w": {"name": f"f{i}"}}}]}})
                leased = poll("the standby to hold the Lease",
                              lambda i=i: lease_holder(coord) == f"standby-{i}")
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
    finally:
        plane.stop()
    return 0


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--stages", type=int, default=100)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--takeover", action="store_true",
                   help="measure leader failover instead of verification latency")
    p.add_argument("--trials", type=int, default=3, help="with --takeover")
    p.add_argument("--lease-duration", type=float, default=15.0, help="with --takeover")
    args = p.parse_args()
    if args.takeover:
        return takeover(args)
    n = args.stages

    plane = controlplane.ControlPlane(with_webhook=False)
    plane.start()
    try:
        api = plane.api_client()
        co = client.CustomObjectsApi(api)
        seed(plane, co, NS, count=n)
        proc = plane.start_reconciler("--controllers", "stage-verification", "--no-leader-elect",
                                      "--workers", str(args.workers), name="reconciler-bench")
        proc.wait_ready(60)
        for i in range(n):
            co.patch_namespaced_custom_object_status(KARGO, "v1alpha1", NS, "stages", f"s{i}", {
                "status": {"freightHistory": [{"items": {"Warehouse/w": {"name": f"f{i}"}}}]}})
        deadline = time.monotonic() + 120
        while True:
            runs = co.list_namespaced_custom_object(GROUP, VERSION, NS, "analysisruns")["items"]
            if len(runs) >= n:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"only {len(runs)} of {n} runs after 120s; see {proc.log_path}")
            time.sleep(0.2)
        # Let the Running status writes settle so only the completion path is measured.
        time.sleep(2)
        runs = co.list_namespaced_custom_object(GROUP, VERSION, NS, "analysisruns")["items"]
        check_one_run_each(runs_per_stage(co), n, "after start")
        by_stage = {r["metadata"]["labels"]["kargo.akuity.io/stage"]: r["metadata"]["name"]
                    for r in runs}

        verified: dict[str, float] = {}
        condition_true: dict[str, float] = {}
        done = threading.Event()
        conditions_done = threading.Event()
        rv = co.list_namespaced_custom_object(KARGO, "v1alpha1", NS, "freights")[
            "metadata"]["resourceVersion"]
        stage_rv = co.list_namespaced_custom_object(KARGO, "v1alpha1", NS, "stages")[
            "metadata"]["resourceVersion"]

        def watcher() -> None:
            w = watch.Watch()
            for event in w.stream(co.list_namespaced_custom_object, KARGO, "v1alpha1", NS,
                                  "freights", resource_version=rv, timeout_seconds=180):
                obj = event["object"]
                stage = "s" + obj["metadata"]["name"][1:]
                if stage in ((obj.get("status") or {}).get("verifiedIn") or {}):
                    verified.setdefault(stage, time.monotonic())
                if len(verified) >= n:
                    done.set()
                    w.stop()

        def stage_watcher() -> None:
            w = watch.Watch()
            for event in w.stream(co.list_namespaced_custom_object, KARGO, "v1alpha1", NS,
                                  "stages", resource_version=stage_rv, timeout_seconds=180):
                obj = event["object"]
                if verified_condition(obj):
                    condition_true.setdefault(obj["metadata"]["name"], time.monotonic())
                if len(condition_true) >= n:
                    conditions_done.set()
                    w.stop()

        t = threading.Thread(target=watcher, daemon=True)
        t.start()
        threading.Thread(target=stage_watcher, daemon=True).start()
        time.sleep(0.5)
        changed: dict[str, float] = {}

        def succeed(stage: str) -> None:
            changed[stage] = time.monotonic()
            co.patch_namespaced_custom_object(GROUP, VERSION, NS, "analysisruns",
                                              by_stage[stage], {"status": {"phase": "Successful"}})

        started = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(succeed, sorted(by_stage)))
        patched = time.monotonic() - started
        if not done.wait(120):
            raise SystemExit(f"only {len(verified)} of {n} verified; see {proc.log_path}")
        if not conditions_done.wait(120):
            raise SystemExit(f"only {len(condition_true)} of {n} Stages Verified=True; "
                             f"see {proc.log_path}")
        lat = [verified[s] - changed[s] for s in by_stage]
        cond_lat = [condition_true[s] - changed[s] for s in by_stage]
        time.sleep(2)  # give a late duplicate (the bug this guards against) time to show
        counts = runs_per_stage(co)
        check_one_run_each(counts, n, "after verification")
        result = {
            "stages": n,
            "workers": args.workers,
            "phase_changes_written_in_s": round(patched, 3),
            "freight_verified_in": summary(lat),
            "stage_verified_true": summary(cond_lat),
            "reconciler_peak_rss_mib": round(peak_rss_mib(proc.pid), 1),
            "runs_per_stage": sorted(set(counts.values())),
        }
        report(result)
        proc.stop()
    finally:
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
