"""What the fault suites share: the bounds (environment variables, docs/development.md "Fault
suites"), Kargo's and the Argo Rollouts controller's part played through the API, the
reconciler in engine mode, the recovery probe, settling, and the printed report.

Kargo's part is the promotion (testkit.kargo_shapes, the exact status shapes Kargo writes,
with a resourceVersion precondition so a promotion never overwrites a verification
rollgate wrote meanwhile); the Rollouts controller's part is moving each run to a
phase by writing its status (the real controller is absent: a run's outcome comes
from the test, as engine mode allows; a terminated run ends Successful, as Argo
Rollouts ends it). Everything talks to the plane on 127.0.0.1 only.
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from harness.host_rollgate import HostRollgate
from harness.kits.verification import Cluster, verdict_template
from harness.plane import ControlPlane
from harness.process import ManagedProcess
from reconciler.verification.naming import freight_collection_id, run_name
from reconciler.verification.payloads import FINISHED
from schemas.kinds import GROUP_ARGO, GROUP_KARGO, VERSION_ARGO, VERSION_KARGO
from testkit import invariants, kargo_shapes, objects


def _group_version(plural: str) -> tuple[str, str]:
    """Argo Rollouts' group for its analysis kinds, Kargo's for the rest."""
    if plural.startswith("analysis"):
        return GROUP_ARGO, VERSION_ARGO
    return GROUP_KARGO, VERSION_KARGO


def _env(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    return float(value) if value else default


# The bounds: `make test` runs the defaults, `make faults` the long version.
KILLS = int(_env("ROLLGATE_FAULT_KILLS", 5))  # SIGKILLs of the reconciler
RESTARTS = int(_env("ROLLGATE_FAULT_RESTARTS", 1))  # of each control-plane fault
DOWNTIME = _env("ROLLGATE_FAULT_DOWNTIME", 1.0)  # seconds etcd / the API server stay down
OUTAGE = _env("ROLLGATE_FAULT_OUTAGE", 1.0)  # seconds of each of the five back-off outages
SEED = int(_env("ROLLGATE_FAULT_SEED", random.randrange(1 << 30)))
SETTLE = 120.0  # seconds for a settled cluster after the faults (the resync is 300 s)

REPORT: list[str] = []  # printed at the end of the run (conftest.py)


# --------------------------------------------------------------------------- the API


class Api:
    """The custom objects of one namespace, as the admin; every call may fail while a
    fault is in progress, so callers that run through faults use ``tolerant``."""

    def __init__(self, plane: ControlPlane, namespace: str) -> None:
        self.co = client.CustomObjectsApi(plane.api_client())
        self.ns = namespace

    def items(self, plural: str) -> list[dict[str, Any]]:
        found = self.co.list_namespaced_custom_object(*_group_version(plural), self.ns, plural)
        return cast("list[dict[str, Any]]", cast("dict[str, Any]", found)["items"])

    def get(self, plural: str, name: str) -> dict[str, Any] | None:
        try:
            return cast("dict[str, Any]", self.co.get_namespaced_custom_object(
                *_group_version(plural), self.ns, plural, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def freight(self, name: str) -> None:
        """Create the Freight; one that exists already counts as created (a create whose
        answer a fault cut off may have been stored)."""
        try:
            self.co.create_namespaced_custom_object(
                GROUP_KARGO, VERSION_KARGO, self.ns, "freights", objects.freight(
                    name, warehouse="w", images=[{"repoURL": "ghcr.io/shop/web", "tag": name}]))
        except ApiException as exc:
            if exc.status != 409:
                raise

    def promote(self, stage: str, freight: str) -> None:
        """Kargo finished promoting ``freight``; retried on a conflict, never blind."""
        for _ in range(10):
            current = self.get("stages", stage)
            patch = kargo_shapes.promotion_patch(current, {"w": freight},
                                                 promotion=f"{stage}.{freight}")
            patch["metadata"] = {"resourceVersion": (current or {})["metadata"]["resourceVersion"]}
            try:
                self.co.patch_namespaced_custom_object_status(
                    GROUP_KARGO, VERSION_KARGO, self.ns, "stages", stage, patch)
                return
            except ApiException as exc:
                if exc.status != 409:
                    raise
        raise RuntimeError(f"promotion of {freight} into {stage} kept conflicting")

    def set_run_phase(self, name: str, phase: str) -> None:
        self.co.patch_namespaced_custom_object(GROUP_ARGO, VERSION_ARGO, self.ns, "analysisruns",
                                               name, {"status": {"phase": phase}})


def tolerant(call: Callable[[], Any]) -> Any:
    """``call()``, or None when the API is unreachable or refuses it (a fault)."""
    try:
        return call()
    except Exception:
        return None


def done(call: Callable[[], None]) -> Callable[[], bool]:
    """``call`` as a step that says it finished (for ``tolerant``: None means it failed)."""
    def step() -> bool:
        call()
        return True
    return step


def setup_namespace(plane: ControlPlane, namespace: str,
                    stages: list[str]) -> Api:
    """A template (its metric is never asked: no Rollouts controller) and the Stages."""
    cluster = Cluster(plane, namespace)
    cluster.apply(verdict_template("http://127.0.0.1:9", name="verdict"))
    for stage in stages:
        cluster.stage(stage)
    return Api(plane, namespace)


# --------------------------------------------------------------------------- Kargo + Rollouts


@dataclass
class Driver:
    """Promotions into random Stages and run phases, until stopped; a share of the
    promoted Freight is created only a few steps later (it reaches the reconciler after
    its run may have succeeded)."""

    api: Api
    stages: list[str]
    rng: random.Random
    late: list[str] = field(default_factory=list)
    promotions: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="fault driver", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)

    def _loop(self) -> None:
        while not self._stop.is_set():
            if tolerant(self.step) is None:
                self._stop.wait(0.2)  # the API is away
            self._stop.wait(self.rng.uniform(0.05, 0.3))

    def step(self) -> bool:
        roll = self.rng.random()
        if roll < 0.4:
            self.promote(self.rng.choice(self.stages))
        elif roll < 0.5 and self.late:
            self.create_late(1)
        else:
            self.move_a_run()
        return True

    def promote(self, stage: str) -> None:
        self.promotions += 1
        name = f"{stage}-{self.promotions}"
        if self.rng.random() < 0.2:
            self.late.append(name)
        else:
            self.api.freight(name)
        self.api.promote(stage, name)

    def move_a_run(self) -> None:
        runs = [r for r in self.api.items("analysisruns") if not _ended(r)]
        if not runs:
            return
        run = self.rng.choice(runs)
        self.api.set_run_phase(run["metadata"]["name"], _next_phase(run, self.rng))

    def create_late(self, count: int | None = None) -> None:
        """Create the next ``count`` late Freight (all by default). Each is forgotten only
        once it exists: a create that fails in a fault is tried again, so no late Freight
        goes missing and out of the invariants' sight."""
        for _ in range(len(self.late) if count is None else min(count, len(self.late))):
            self.api.freight(self.late[0])
            self.late.pop(0)

    def finish(self) -> None:
        """Every late Freight created and every run ended (Successful), once."""
        self.create_late()
        for run in self.api.items("analysisruns"):
            if not _ended(run):
                self.api.set_run_phase(run["metadata"]["name"], "Successful")


def _ended(run: dict[str, Any]) -> bool:
    return str((run.get("status") or {}).get("phase") or "") in invariants.RUN_END


def _next_phase(run: dict[str, Any], rng: random.Random) -> str:
    if (run.get("spec") or {}).get("terminate"):
        return "Successful"  # Argo Rollouts ends a terminated run Successful
    if not (run.get("status") or {}).get("phase") and rng.random() < 0.5:
        return "Running"
    return rng.choice(("Successful", "Successful", "Successful", "Failed"))


# --------------------------------------------------------------------------- the reconciler


def start_reconciler(rollgate: HostRollgate, namespace: str, *, name: str,
                     wait: bool = True) -> ManagedProcess:
    """``python -m reconciler`` in engine mode for ``namespace``; ``wait=False`` leaves
    the wait to the recovery probe (after a SIGKILL)."""
    proc = rollgate.start_reconciler(
        "--controllers", "stage-verification", "--stage-verification", "engine",
        "--namespaces", namespace, "--no-leader-elect", name=name)
    if wait:
        proc.wait_ready(120)
    return proc


def sigkill(plane: ControlPlane, proc: ManagedProcess) -> None:
    proc.kill(signal.SIGKILL)
    plane.stop_process(proc)


@dataclass
class Probe:
    """Times until the reconciler works again: a fresh promotion of a Stage nothing
    else touches, and the seconds until its run exists."""

    api: Api
    stage: str = "canary"
    count: int = 0

    def __call__(self, *, timeout: float = 120.0) -> float:
        self.count += 1
        freight = f"{self.stage}-{self.count}"
        started = time.monotonic()
        deadline = started + timeout
        while tolerant(done(lambda: self.api.freight(freight))) is None and (
                time.monotonic() < deadline):
            if tolerant(lambda: self.api.get("freights", freight)) is not None:
                break
            time.sleep(0.1)
        while tolerant(done(lambda: self.api.promote(self.stage, freight))) is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"could not promote {freight} for {timeout}s")
            time.sleep(0.1)
        name = run_name(self.stage, freight_collection_id([freight]), 1)
        while tolerant(lambda: self.api.get("analysisruns", name)) is None:
            if time.monotonic() > deadline:
                raise AssertionError(f"no run {name} {timeout}s after the promotion")
            time.sleep(0.1)
        return time.monotonic() - started


# --------------------------------------------------------------------------- settling


def snapshot(api: Api) -> dict[str, list[dict[str, Any]]]:
    return {plural: api.items(plural) for plural in ("stages", "analysisruns", "freights")}


def _busy(snap: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Why the cluster has not settled: a current freight not yet verified to the end,
    a run not ended."""
    out = [f"run {r['metadata']['name']}" for r in snap["analysisruns"] if not _ended(r)]
    for stage in snap["stages"]:
        history = (stage.get("status") or {}).get("freightHistory") or []
        if not history:
            continue
        latest = (history[0].get("verificationHistory") or [{}])[0]
        if latest.get("phase") not in FINISHED:
            out.append(f"stage {stage['metadata']['name']} ({latest.get('phase') or 'none'})")
    return out


def _quiet(api: Api, *, deadline: float, step: Callable[[], Any],
           done: Callable[[dict[str, Any]], list[str]]) -> dict[str, Any]:
    """Call ``step`` until ``done`` finds nothing left and no object changed for 3 s;
    the state then."""
    last: tuple[str, ...] = ()
    why: list[str] = ["not read yet"]
    while time.monotonic() < deadline:
        tolerant(step)
        snap = tolerant(lambda: snapshot(api))
        if snap is None:
            time.sleep(0.5)
            continue
        why = done(snap)
        versions = tuple(sorted(o["metadata"]["resourceVersion"] for items in snap.values()
                                for o in items))
        if not why and versions == last:
            return dict(snap)
        last = versions if not why else ()
        time.sleep(3 if not why else 0.5)
    raise AssertionError(f"not settled: {why[:10]}")


def settle(api: Api, driver: Driver, *, timeout: float = SETTLE) -> tuple[
        dict[str, Any], dict[str, Any]]:
    """Two states, for ``invariants.defects``: once every late Freight exists and the
    reconciler has stopped writing, with the runs as the faults left them (a run left
    running shows only here); then once every run has ended and every verification
    has finished."""
    deadline = time.monotonic() + timeout

    before = _quiet(api, deadline=deadline, step=driver.create_late, done=lambda snap: [])
    after = _quiet(api, deadline=deadline, step=driver.finish, done=_busy)
    return before, after


def check(title: str, states: tuple[dict[str, Any], dict[str, Any]],
          recoveries: dict[str, list[float]]) -> None:
    """Print the defects and recovery times of a suite; fail on any defect. Runs left
    running are counted in the first state (the settling ends every run), everything
    else in the last."""
    before, after = states
    found = invariants.defects(stages=after["stages"], runs=after["analysisruns"],
                               freight=after["freights"])
    found.left_running = invariants.defects(
        stages=before["stages"], runs=before["analysisruns"],
        freight=before["freights"]).left_running
    counts = found.counts()
    REPORT.append(f"{title}: defects {found.total} "
                  + " ".join(f"{k}={v}" for k, v in counts.items()))
    for kind, times in recoveries.items():
        REPORT.append(f"  {kind}: {summary(times)}")
    assert found.total == 0, json.dumps(
        {k: v[:10] for k, v in vars(found).items() if v}, indent=1)


def summary(times: list[float]) -> str:
    if not times:
        return "n=0"
    return (f"n={len(times)} p50={statistics.median(times):.1f}s max={max(times):.1f}s "
            f"[{', '.join(f'{t:.1f}' for t in times)}]")


# --------------------------------------------------------------------------- logs


def log_lines(path: Path, offset: int) -> Iterator[dict[str, Any]]:
    """The JSON log lines of a process from byte ``offset`` on."""
    with open(path, "rb") as log:
        log.seek(offset)
        for raw in log:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict):
                yield line

