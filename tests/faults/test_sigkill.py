"""SIGKILL the reconciler (engine mode) at random points while Stages are promoted and
their runs move, then check that nothing was lost or left running (issue 19).

After ``ROLLGATE_FAULT_KILLS`` kills (README "make faults") the cluster is settled
(every run ended, every late Freight created) and checked with tests/invariants.py:
no duplicate run, no entry whose phase differs from its run's, no missing or false
``verifiedIn``, no run left running, no run recorded nowhere. Each kill is followed by
a fresh promotion of a Stage nothing else touches; the seconds until its run exists
are the recovery time, printed, never asserted.
"""

from __future__ import annotations

import random
import time

import controlplane
import faultkit

STAGES = ["s0", "s1", "s2", "s3"]


def test_sigkill_during_promotions_loses_nothing(plane: controlplane.ControlPlane,
                                                 namespace: str) -> None:
    rng = random.Random(faultkit.SEED)
    api = faultkit.setup_namespace(plane, namespace, [*STAGES, "canary"])
    probe = faultkit.Probe(api)
    proc = faultkit.start_reconciler(plane, namespace, name="faults-sigkill")
    driver = faultkit.Driver(api, STAGES, rng)
    driver.start()
    recoveries: list[float] = []
    try:
        for _ in range(faultkit.KILLS):
            time.sleep(rng.uniform(0.2, 2.0))  # a random point of the promotions
            faultkit.sigkill(plane, proc)
            proc = faultkit.start_reconciler(plane, namespace, name="faults-sigkill",
                                             wait=False)
            recoveries.append(probe())  # kill -> the restarted reconciler's first run
        driver.stop()
        states = faultkit.settle(api, driver)
    finally:
        driver.stop()
        plane.stop_process(proc)
    faultkit.check(f"SIGKILL x{faultkit.KILLS} ({driver.promotions} promotions)", states,
                   {"kill -> new run": recoveries})
