"""Memory, start-up and reaction time at scale: N Stages with full histories, the real Kargo
controller and rollgate's observe mode each alone on one plane.

One control plane (support/harness/plane.py, no webhook). The bench writes, straight to the
API and in parallel (the official client, responses not decoded): N Stages ``s<i>`` spread
over ``--namespaces`` Project namespaces, each carrying the status Kargo v1.11.2 leaves
after a long life (support/testkit/kargo_shapes.py ``full_history_status``: 10 freight
collections with 10 finished verifications each, ``lastPromotion`` with every step's state,
health and
conditions; written through the status subresource), labelled and ``spec.shard``-ed for
shard ``bench``; the Freight that is current in each, verified there; and one finished
AnalysisRun per Stage, as Argo Rollouts leaves it (metric results with measurements).
Plus ``--probes`` Stages in namespace ``scale-probe`` for the reaction times.

Then, one after the other and each alone, measured from /proc (VmHWM, VmRSS, utime+stime):

- **rollgate**: the reconciler in observe mode (``--stage-verification observe``, every
  namespace, no leader election, ``--observe-lag-seconds`` ``--lag``): start to ready
  (its /readyz), peak RSS, steady RSS and CPU seconds over ``--quiet-seconds`` with
  nothing changing, RSS per Stage; then, with every other Stage cached, the reaction times
  over the probes: (1) from a run's phase change (the bench plays Argo Rollouts, then
  Kargo recording the entry) to ``rollgate_verifications_finished_total`` of its Stage on
  /metrics (polled every 50 ms); (2) from the moment a finding becomes due (a run
  completed at a whole second, its entry still Running, ``--lag`` later) to the Warning
  event ``VerificationNotRecorded`` (seen through a watch on Events);
- **kargo-shard-other**: the real Kargo controller with ``SHARD_NAME=other
  IS_DEFAULT_CONTROLLER=true``: it caches every Stage but reconciles none (all are
  shard ``bench``);
- **kargo**: the real Kargo controller reconciling every Stage (``SHARD_NAME=bench
  IS_DEFAULT_CONTROLLER=true``: the default controller and the shard's); last, since it
  writes to the Stages.

Kargo has no readiness endpoint: its start to ready is until its Stage controller's first
``Starting workers`` log line (``ControlPlane.start_kargo_controller``). Reported: the
figures of each, rollgate's as ratios to Kargo's, and the targets (rollgate's steady RSS
at most Kargo's and at most 400 MiB, ready within 1.5 x Kargo's, finding p99 at most
1 s); nothing is asserted. Results: docs/benchmarks.md.

    .venv/bin/python -m bench.scale [--stages 1000] [--namespaces 30] [--quiet-seconds 300]
        [--probes 100] [--lag 5] [--only rollgate,kargo-shard-other,kargo] [--work-dir DIR]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

from kubernetes import client

from bench import kargo as peer
from bench.stats import report, summary
from bench.watches import Watch
from harness.host_rollgate import HostRollgate
from harness.kits.kargo import STEPS
from harness.kits.plane import plane_with_rollgate
from harness.plane import ControlPlane
from harness.process import ManagedProcess
from harness.upstream import kargo
from reconciler.verification.shards import LABEL_SHARD
from schemas.kinds import (
    GROUP_ARGO,
    GROUP_KARGO,
    VERSION_ARGO,
    VERSION_KARGO,
)
from testkit import kargo_shapes, objects

ROOT = Path(__file__).resolve().parent.parent


cpu_seconds, peak_rss_mib, say = peer.cpu_seconds, peer.peak_rss_mib, peer.say

# The version each upstream serves its kinds at, by group (Writer's calls take a group).
VERSIONS = {GROUP_KARGO: VERSION_KARGO, GROUP_ARGO: VERSION_ARGO}
SHARD = "bench"
CONTENDERS = ("kargo-shard-other", "rollgate-base", "rollgate", "kargo")
ROLLGATES = ("rollgate-base", "rollgate")


def probe_ns(contender: str) -> str:
    """Each rollgate gets probe Stages of its own: a probe's change is made once."""
    return f"scale-probe-{contender}"


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def stamp(at: dt.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------- the objects


class Writer:
    """Parallel writes with the official client, responses not decoded (the bench's own
    CPU is the bottleneck of seeding on 2 cores, not the API server's)."""

    def __init__(self, co: client.CustomObjectsApi, workers: int = 16) -> None:
        self.co = co
        self.pool = ThreadPoolExecutor(workers)

    @staticmethod
    def _drain(response: Any) -> None:
        response.read()  # the whole body, so the connection can be reused
        response.release_conn()

    def create(self, group: str, ns: str, plural: str, body: dict[str, Any]) -> None:
        self._drain(self.co.create_namespaced_custom_object(
            group, VERSIONS[group], ns, plural, body, _preload_content=False))

    def status(self, group: str, ns: str, plural: str, name: str, body: dict[str, Any]) -> None:
        self._drain(self.co.patch_namespaced_custom_object_status(
            group, VERSIONS[group], ns, plural, name, body, _preload_content=False))

    def patch(self, group: str, ns: str, plural: str, name: str, body: dict[str, Any]) -> None:
        self._drain(self.co.patch_namespaced_custom_object(
            group, VERSIONS[group], ns, plural, name, body, _preload_content=False))

    def map(self, fn: Any, items: list[Any]) -> None:
        list(self.pool.map(fn, items))


def stage_body(name: str) -> dict[str, Any]:
    return objects.stage(name, warehouse="w", labels={LABEL_SHARD: SHARD},
                         verification=objects.verification(
                             "t", args=[{"name": "service", "value": name}]),
                         spec={"shard": SHARD, "promotionTemplate": {"spec": {"steps": STEPS}}})


def seed_stage(w: Writer, ns: str, name: str, *, running: bool = False) -> None:
    """One Stage with its full history, its current Freight and the run of its current
    verification (``running``: the entry and the run still Running, for a probe)."""
    status = kargo_shapes.full_history_status(name, ns)
    current = status["freightHistory"][0]
    entry = current["verificationHistory"][0]
    run_name = entry["analysisRun"]["name"]
    freight = kargo_shapes.history_freight_name(name, 0)
    w.create(GROUP_KARGO, ns, "freights", objects.freight(
        freight, warehouse="w", alias=f"a-{name}", labels={f"{GROUP_KARGO}/alias": f"a-{name}"},
        images=current["items"]["Warehouse/w"]["images"],
        commits=current["items"]["Warehouse/w"]["commits"]))
    w.status(GROUP_KARGO, ns, "freights", freight, {"status": {"verifiedIn": {
        name: {"verifiedAt": entry["finishTime"]}}, "currentlyIn": {name: {}}}})
    w.create(GROUP_KARGO, ns, "stages", stage_body(name))
    run = kargo_shapes.finished_analysis_run(run_name, ns, stage=name, collection=current["id"])
    if running:
        entry.update(phase="Running", finishTime=None)
        entry["analysisRun"]["phase"] = "Running"
        run["status"] = {"phase": "Running", "startedAt": entry["startTime"]}
    w.status(GROUP_KARGO, ns, "stages", name, {"status": status})
    w.create(GROUP_ARGO, ns, "analysisruns", run)


def seed(plane: ControlPlane, w: Writer, *, n: int, namespaces: int,
         probes: int) -> dict[str, list[str]]:
    """Every namespace and object; returns namespace -> Stage names. Namespaces are
    labelled as Kargo labels a Project's, not made from Project objects: the bench runs
    Kargo's controller alone (no webhooks, no management controller), so nothing would
    make them (``harness.upstream.kargo.label_as_project``)."""
    layout: dict[str, list[str]] = {}
    for i in range(n):
        layout.setdefault(f"scale-{i % namespaces}", []).append(f"s{i}")
    for contender in ROLLGATES:
        layout[probe_ns(contender)] = ([f"m{i}" for i in range(probes)]
                                       + [f"q{i}" for i in range(probes)])
    for ns in layout:
        kargo.label_as_project(plane, ns)
        w.create(GROUP_ARGO, ns, "analysistemplates", objects.analysis_template("t", metrics=[
            {"name": "m", "provider": {"web": {"url": "http://127.0.0.1:9/"}}}]))
    jobs = [(ns, name) for ns, names in layout.items() for name in names]
    started = time.monotonic()
    done = [0]

    def one(job: tuple[str, str]) -> None:
        ns, name = job
        seed_stage(w, ns, name, running=ns.startswith("scale-probe-"))
        done[0] += 1
        if done[0] % 1000 == 0:
            say(f"seeded {done[0]}/{len(jobs)} Stages in {time.monotonic() - started:.0f}s")

    w.map(one, jobs)
    return layout


def read_stage(co: client.CustomObjectsApi, ns: str, name: str) -> dict[str, Any]:
    """Stage ``name`` as the API server returns it (the client's JSON, a dict)."""
    return cast("dict[str, Any]", co.get_namespaced_custom_object(
        GROUP_KARGO, VERSION_KARGO, ns, "stages", name))


def stored_bytes(co: client.CustomObjectsApi, ns: str, name: str) -> dict[str, int]:
    """JSON size of one stored Stage (as the API server returns it, managedFields
    included) and of its status."""
    stage = read_stage(co, ns, name)
    return {"stage_json_bytes": len(json.dumps(stage, separators=(",", ":"))),
            "status_json_bytes": len(json.dumps(stage["status"], separators=(",", ":"))),
            "managed_fields_json_bytes": len(json.dumps(
                stage["metadata"].get("managedFields"), separators=(",", ":")))}


# --------------------------------------------------------------------------- measuring


def quiet(proc: ManagedProcess, seconds: float) -> dict[str, float]:
    """CPU seconds over ``seconds`` with nothing changing, and RSS sampled every 5 s
    over its second half (the steady RSS is their median)."""
    before = cpu_seconds(proc.pid)
    started = time.monotonic()
    samples: list[float] = []
    while (left := seconds - (time.monotonic() - started)) > 0:
        time.sleep(min(5.0, left))
        if time.monotonic() - started >= seconds / 2:
            samples.append(rss_mib(proc.pid))
    samples = samples or [rss_mib(proc.pid)]
    return {"quiet_s": seconds, "cpu_s_over_quiet": round(cpu_seconds(proc.pid) - before, 2),
            "steady_rss_mib": sorted(samples)[len(samples) // 2],
            "peak_rss_mib": peak_rss_mib(proc.pid)}


def metric_seen(url: str, ns: str, names: set[str]) -> set[str]:
    """The probe Stages with a ``rollgate_verifications_finished_total`` sample."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as response:
        text = response.read().decode()
    found = set()
    for line in text.splitlines():
        if line.startswith("rollgate_verifications_finished_total{") and (
                f'namespace="{ns}"' in line):
            stage = line.split('stage="', 1)[1].split('"', 1)[0]
            if stage in names:
                found.add(stage)
    return found


def probe_metrics(co: client.CustomObjectsApi, w: Writer, url: str, ns: str,
                  names: list[str], timeout: float = 120.0) -> dict[str, Any]:
    """Per probe: the run turns Successful (Argo Rollouts), then Kargo records the entry;
    the time from the first write to the Stage's sample on /metrics."""
    changed: dict[str, float] = {}
    seen: dict[str, float] = {}

    def change(name: str) -> None:
        stage = read_stage(co, ns, name)
        history = stage["status"]["freightHistory"]
        entry = history[0]["verificationHistory"][0]
        now = stamp(dt.datetime.now(dt.UTC))
        changed[name] = time.monotonic()
        w.patch(GROUP_ARGO, ns, "analysisruns", entry["analysisRun"]["name"],
                {"status": {"phase": "Successful", "completedAt": now}})
        entry.update(phase="Successful", finishTime=now)
        entry["analysisRun"]["phase"] = "Successful"
        w.status(GROUP_KARGO, ns, "stages", name, {"status": {"freightHistory": history}})

    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set() and len(seen) < len(names):
            now = time.monotonic()
            for name in metric_seen(url, ns, set(names)) - set(seen):
                seen[name] = now
            time.sleep(0.05)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    for name in names:  # one at a time: each change is measured alone
        change(name)
        time.sleep(0.2)
    poller.join(timeout)
    stop.set()
    return {**summary([seen[n] - changed[n] for n in names if n in seen]),
            "not_seen": len([n for n in names if n not in seen])}


def probe_findings(co: client.CustomObjectsApi, w: Writer, ns: str, names: list[str],
                   lag: float, timeout: float = 120.0) -> dict[str, Any]:
    """Per probe: the run completes at a whole second while Kargo's entry stays Running;
    the finding is due ``lag`` seconds after ``completedAt``. The time from then to the
    ``VerificationNotRecorded`` Warning event (its arrival through a watch)."""
    core = client.CoreV1Api(co.api_client)
    due: dict[str, float] = {}
    seen: dict[str, float] = {}
    listed = core.list_namespaced_event(ns)
    assert listed.metadata is not None
    rv = listed.metadata.resource_version
    ready = threading.Event()

    def events() -> None:
        stream = Watch()
        ready.set()
        for event in stream.stream(core.list_namespaced_event, ns, resource_version=rv,
                                   timeout_seconds=int(timeout + len(names) + lag + 60)):
            obj = event["object"]
            name = obj.involved_object.name
            if obj.reason == "VerificationNotRecorded" and name in due:
                seen.setdefault(name, time.time())
                if len(seen) >= len(names):
                    stream.stop()

    watcher = threading.Thread(target=events, daemon=True)
    watcher.start()
    ready.wait(30)
    time.sleep(0.5)
    for name in names:
        stage = read_stage(co, ns, name)
        run = stage["status"]["freightHistory"][0]["verificationHistory"][0]["analysisRun"]
        # Completed at the current whole second: due exactly ``lag`` later.
        at = dt.datetime.now(dt.UTC).replace(microsecond=0)
        due[name] = at.timestamp() + lag
        w.patch(GROUP_ARGO, ns, "analysisruns", run["name"],
                {"status": {"phase": "Successful", "completedAt": stamp(at)}})
        time.sleep(0.2)
    watcher.join(timeout + lag)
    return {**summary([seen[n] - due[n] for n in names if n in seen]),
            "not_seen": len([n for n in names if n not in seen]), "lag_s": lag}


def start_rollgate(rollgate: HostRollgate, args: argparse.Namespace,
                   contender: str) -> ManagedProcess:
    """The reconciler in observe mode: this tree's, or for ``rollgate-base`` the one in
    ``--base-tree`` (the same command, its code)."""
    flags = ("--controllers", "stage-verification", "--stage-verification", "observe",
             "--observe-lag-seconds", str(args.lag), "--no-leader-elect")
    if contender != "rollgate":
        rollgate = HostRollgate(rollgate.plane, repo_root=args.base_tree)
    return rollgate.start_reconciler(*flags, name=f"reconciler-{contender}")


def observe_contender(rollgate: HostRollgate, co: client.CustomObjectsApi, w: Writer,
                      args: argparse.Namespace, layout: dict[str, list[str]],
                      contender: str) -> dict[str, Any]:
    plane = rollgate.plane
    started = time.monotonic()
    proc = start_rollgate(rollgate, args, contender)
    try:
        proc.wait_ready(args.ready_timeout)
        ready = time.monotonic() - started
        say(f"{contender} ready in {ready:.1f}s; quiet for {args.quiet_seconds:g}s")
        figures: dict[str, Any] = {"start_to_ready_s": round(ready, 2),
                                   "peak_rss_at_ready_mib": peak_rss_mib(proc.pid),
                                   **quiet(proc, args.quiet_seconds)}
        ns = probe_ns(contender)
        probes = layout[ns]
        say(f"{contender}: run phase change -> metric")
        figures["run_phase_change_to_metric"] = probe_metrics(
            co, w, proc.url, ns, [p for p in probes if p.startswith("m")])
        say(f"{contender}: finding due -> Warning event")
        figures["finding_due_to_warning_event"] = probe_findings(
            co, w, ns, [p for p in probes if p.startswith("q")], args.lag)
        figures["peak_rss_mib"] = peak_rss_mib(proc.pid)
        return figures
    finally:
        plane.stop_process(proc)


def kargo_controller(plane: ControlPlane, args: argparse.Namespace, *,
                     shard: str, name: str) -> dict[str, Any]:
    started = time.monotonic()
    proc = kargo.start_controller(plane, name=name, shard=shard, default_controller=True,
                                  ready_timeout=args.ready_timeout)
    try:
        ready = time.monotonic() - started
        say(f"{name} ready in {ready:.1f}s; quiet for {args.quiet_seconds:g}s")
        return {"start_to_ready_s": round(ready, 2),
                "peak_rss_at_ready_mib": peak_rss_mib(proc.pid),
                **quiet(proc, args.quiet_seconds)}
    finally:
        plane.stop_process(proc)


def per_stage(figures: dict[str, Any], stages: int) -> None:
    for key in ("steady_rss_mib", "peak_rss_mib"):
        if key in figures:
            figures[key.replace("_mib", "_bytes_per_stage")] = round(
                figures[key] * 1024 * 1024 / stages)


def targets(result: dict[str, Any]) -> dict[str, Any]:
    ours, theirs = result.get("rollgate"), result.get("kargo")
    if ours is None or theirs is None:
        return {}
    p99 = ours["finding_due_to_warning_event"]["p99_s"]
    return {
        "rollgate_steady_rss_at_most_kargo": ours["steady_rss_mib"] <= theirs["steady_rss_mib"],
        "rollgate_steady_rss_at_most_400_mib": ours["steady_rss_mib"] <= 400,
        "rollgate_ready_within_1_5x_kargo": (ours["start_to_ready_s"]
                                             <= 1.5 * theirs["start_to_ready_s"]),
        "finding_p99_at_most_1s": p99 is not None and p99 <= 1.0,
        "ratios_rollgate_over_kargo": {
            k: round(ours[k] / theirs[k], 2) for k in (
                "start_to_ready_s", "steady_rss_mib", "peak_rss_mib", "cpu_s_over_quiet")
            if theirs.get(k)},
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stages", type=int, default=1000)
    p.add_argument("--namespaces", type=int, default=30)
    p.add_argument("--quiet-seconds", type=float, default=300.0,
                   help="the quiet period over which CPU and steady RSS are measured")
    p.add_argument("--probes", type=int, default=100,
                   help="changes per reaction time (each its own extra Stage)")
    p.add_argument("--lag", type=float, default=5.0, help="rollgate's --observe-lag-seconds")
    p.add_argument("--only", default=",".join(CONTENDERS),
                   help=f"comma list of {', '.join(CONTENDERS)} (in this order)")
    p.add_argument("--ready-timeout", type=float, default=900.0)
    p.add_argument("--base-tree", type=Path, default=None,
                   help="a rollgate tree to measure as rollgate-base (e.g. `git archive` of "
                        "the commit before a change); without it rollgate-base is skipped")
    p.add_argument("--work-dir", type=Path, default=None)
    args = p.parse_args()
    only = [c for c in args.only.split(",") if c]
    if args.base_tree is None and "rollgate-base" in only:
        only.remove("rollgate-base")
    if set(only) - set(CONTENDERS):
        p.error(f"--only from {CONTENDERS}")

    with plane_with_rollgate(work_dir=args.work_dir, webhook=False) as rollgate:
        plane = rollgate.plane
        co = client.CustomObjectsApi(plane.api_client())
        w = Writer(co)
        t0 = time.monotonic()
        layout = seed(plane, w, n=args.stages, namespaces=args.namespaces, probes=args.probes)
        seeded = round(time.monotonic() - t0, 1)
        total = sum(len(v) for v in layout.values())
        say(f"seeded {total} Stages in {seeded}s")
        result: dict[str, Any] = {
            "stages": args.stages, "probe_stages": 2 * args.probes * len(ROLLGATES),
            "stages_cached": total,
            "namespaces": args.namespaces, "seed_s": seeded,
            "one_stage": stored_bytes(co, "scale-0", "s0"),
            "quiet_s": args.quiet_seconds}
        for contender in CONTENDERS:
            if contender not in only:
                continue
            if contender in ROLLGATES:
                figures = observe_contender(rollgate, co, w, args, layout, contender)
            else:
                figures = kargo_controller(
                    plane, args, shard="other" if contender == "kargo-shard-other" else SHARD,
                    name=f"{contender}-controller")
            per_stage(figures, total)
            result[contender] = figures
            say(f"{contender}: {json.dumps(figures)}")
        result["targets"] = targets(result)
        report(result)

    return 0


if __name__ == "__main__":
    sys.exit(main())
