"""Verification latency under load: 100 Stages verified at once.

Starts a control plane (hack/controlplane.py, no webhook: only the reconciler's path is
measured), creates N Stages each promoted to its own Freight, waits until every
AnalysisRun exists, then marks all runs Successful at once (as the Argo Rollouts
controller would) and records, per Stage, the time from its run's phase change to
``status.verifiedIn.<stage>`` appearing on its Freight (seen through a watch). Prints
median, p90 and worst latency, the reconciler's peak RSS (VmHWM), the load average,
and the number of runs per Stage, which must be exactly one (the bench fails otherwise:
a fast result that double-created runs would be worthless).

    .venv/bin/python bench/verification.py [--stages 100] [--workers 4]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "hack")]

import controlplane  # noqa: E402
from kubernetes import client, watch  # noqa: E402

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


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--stages", type=int, default=100)
    p.add_argument("--workers", type=int, default=4)
    args = p.parse_args()
    n = args.stages

    plane = controlplane.ControlPlane(with_webhook=False)
    plane.start()
    try:
        api = plane.api_client()
        co = client.CustomObjectsApi(api)
        plane.kubectl("create", "namespace", NS)
        co.create_namespaced_custom_object(GROUP, VERSION, NS, "analysistemplates", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "AnalysisTemplate",
            "metadata": {"name": "t"},
            "spec": {"metrics": [{"name": "m", "provider": {"job": {"spec": {}}}}]},
        })
        for i in range(n):
            co.create_namespaced_custom_object(KARGO, "v1alpha1", NS, "freights", {
                "apiVersion": f"{KARGO}/v1alpha1", "kind": "Freight",
                "metadata": {"name": f"f{i}"}, "origin": {"kind": "Warehouse", "name": "w"}})
            co.create_namespaced_custom_object(KARGO, "v1alpha1", NS, "stages", {
                "apiVersion": f"{KARGO}/v1alpha1", "kind": "Stage", "metadata": {"name": f"s{i}"},
                "spec": {"analysis": {"templates": [{"templateName": "t"}]}}})
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
        done = threading.Event()
        rv = co.list_namespaced_custom_object(KARGO, "v1alpha1", NS, "freights")[
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

        t = threading.Thread(target=watcher, daemon=True)
        t.start()
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
        lat = sorted(verified[s] - changed[s] for s in by_stage)
        time.sleep(2)  # give a late duplicate (the bug this guards against) time to show
        counts = runs_per_stage(co)
        check_one_run_each(counts, n, "after verification")
        result = {
            "stages": n,
            "workers": args.workers,
            "phase_changes_written_in_s": round(patched, 3),
            "latency_median_s": round(statistics.median(lat), 3),
            "latency_p90_s": round(lat[int(0.9 * (n - 1))], 3),
            "latency_worst_s": round(lat[-1], 3),
            "reconciler_peak_rss_mib": round(peak_rss_mib(proc.pid), 1),
            "runs_per_stage": sorted(set(counts.values())),
            "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
        }
        print(json.dumps(result, indent=2))
        proc.stop()
    finally:
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
