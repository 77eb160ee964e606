"""Restart the reconciler's API server and its etcd under it, and force a 410 Gone,
while Stages are promoted and their runs move (engine mode); then check that nothing
was lost or left running (tests/invariants.py, as after the SIGKILLs).

Each fault is repeated ``ROLLGATE_FAULT_RESTARTS`` times with the server down for
``ROLLGATE_FAULT_DOWNTIME`` seconds (README "make faults"). The 410: etcd's history is
compacted up to its current revision and the API server restarted, so every watch
the reconciler resumes from its last resourceVersion is answered 410 Gone and its
informers list again; the test checks the reconciler's log says so. Recovery (the
API server ready again -> a fresh promotion's run exists) is printed, never asserted.
"""

from __future__ import annotations

import random
import time

import controlplane
import faultkit

STAGES = ["s0", "s1", "s2"]


def restart_apiserver(plane: controlplane.ControlPlane) -> None:
    plane.restart("kube-apiserver", downtime=faultkit.DOWNTIME)


def restart_etcd(plane: controlplane.ControlPlane) -> None:
    plane.restart("etcd", downtime=faultkit.DOWNTIME)
    apiserver = next(p for p in plane.processes if p.name == "kube-apiserver")
    apiserver.wait_ready(120)  # its /readyz checks etcd


def gone(plane: controlplane.ControlPlane) -> None:
    plane.compact_etcd()
    plane.restart("kube-apiserver", downtime=0)


FAULTS = {"kube-apiserver": restart_apiserver, "etcd": restart_etcd, "410": gone}


def test_control_plane_faults_lose_nothing(plane: controlplane.ControlPlane,
                                          namespace: str) -> None:
    """One reconciler through every fault kind in turn; settled and checked after each."""
    rng = random.Random(faultkit.SEED)
    api = faultkit.setup_namespace(plane, namespace, [*STAGES, "canary"])
    probe = faultkit.Probe(api)
    proc = faultkit.start_reconciler(plane, namespace, name="faults-control-plane")
    failed: list[str] = []
    try:
        for fault, inject in FAULTS.items():
            offset = controlplane.log_offset(proc.log_path)
            driver = faultkit.Driver(api, STAGES, rng)
            driver.start()
            recoveries: list[float] = []
            try:
                for _ in range(faultkit.RESTARTS):
                    time.sleep(rng.uniform(0.5, 2.0))  # a random point of the promotions
                    inject(plane)
                    recoveries.append(probe())  # ready -> the reconciler's next run
            finally:
                driver.stop()
            states = faultkit.settle(api, driver)
            relists = sum(line.get("msg") == "watch expired, re-listing"
                          for line in faultkit.log_lines(proc.log_path, offset))
            try:
                faultkit.check(f"{fault} x{faultkit.RESTARTS} ({driver.promotions} "
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
