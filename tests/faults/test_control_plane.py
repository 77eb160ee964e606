"""Restart the reconciler's API server and its etcd under it, and force a 410 Gone,
while Stages are promoted and their runs move (engine mode); then check that nothing
was lost or left running (support/testkit/invariants.py, as after the SIGKILLs).

Each fault is repeated ``ROLLGATE_FAULT_RESTARTS`` times with the server down for
``ROLLGATE_FAULT_DOWNTIME`` seconds (docs/development.md "Fault suites"). The 410: etcd's history is
compacted up to its current revision and the API server restarted, so every watch
the reconciler resumes from its last resourceVersion is answered 410 Gone and its
informers list again; the test checks the reconciler's log says so. Recovery (the
API server ready again -> a fresh promotion's run exists) is printed, never asserted.
"""

from __future__ import annotations

import random
import time

from harness import faults
from harness.host_rollgate import HostRollgate
from harness.plane import ControlPlane
from harness.process import log_offset
from tests.faults import suites as fault_suites

STAGES = ["s0", "s1", "s2"]


def restart_apiserver(plane: ControlPlane) -> None:
    faults.restart(plane, "kube-apiserver", downtime=fault_suites.DOWNTIME)


def restart_etcd(plane: ControlPlane) -> None:
    faults.restart(plane, "etcd", downtime=fault_suites.DOWNTIME)
    apiserver = next(p for p in plane.processes if p.name == "kube-apiserver")
    apiserver.wait_ready(120)  # its /readyz checks etcd


def gone(plane: ControlPlane) -> None:
    faults.compact_etcd(plane)
    faults.restart(plane, "kube-apiserver", downtime=0)


FAULTS = {"kube-apiserver": restart_apiserver, "etcd": restart_etcd, "410": gone}


def test_control_plane_faults_lose_nothing(
        plane: ControlPlane, namespace: str, rollgate: HostRollgate) -> None:
    """One reconciler through every fault kind in turn; settled and checked after each."""
    rng = random.Random(fault_suites.SEED)
    api = fault_suites.setup_namespace(plane, namespace, [*STAGES, "canary"])
    probe = fault_suites.Probe(api)
    proc = fault_suites.start_reconciler(rollgate, namespace, name="faults-control-plane")
    failed: list[str] = []
    try:
        for fault, inject in FAULTS.items():
            offset = log_offset(proc.log_path)
            driver = fault_suites.Driver(api, STAGES, rng)
            driver.start()
            recoveries: list[float] = []
            try:
                for _ in range(fault_suites.RESTARTS):
                    time.sleep(rng.uniform(0.5, 2.0))  # a random point of the promotions
                    inject(plane)
                    recoveries.append(probe())  # ready -> the reconciler's next run
            finally:
                driver.stop()
            states = fault_suites.settle(api, driver)
            relists = sum(line.get("msg") == "watch expired, re-listing"
                          for line in fault_suites.log_lines(proc.log_path, offset))
            try:
                fault_suites.check(f"{fault} x{fault_suites.RESTARTS} ({driver.promotions} "
                               f"promotions, {relists} informer re-lists after 410 Gone)",
                               states, {"ready -> new run": recoveries})
            except AssertionError as exc:
                failed.append(f"{fault}: {exc}")
            if fault == "410" and not relists:
                failed.append("410: no informer was answered 410 Gone; the fault did not "
                              "happen")
    finally:
        plane.stop_process(proc)
    assert not failed, "\n".join(failed)
