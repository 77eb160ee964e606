"""SIGKILL the reconciler (engine mode) at random points while Stages are promoted and
their runs move, then check that nothing was lost or left running.

After ``ROLLGATE_FAULT_KILLS`` kills (docs/development.md "Fault suites") the cluster is settled
(every run ended, every late Freight created) and checked with support/testkit/invariants.py:
no duplicate run, no entry whose phase differs from its run's, no missing or false
``verifiedIn``, no run left running, no run recorded nowhere. Each kill is followed by
a fresh promotion of a Stage nothing else touches; the seconds until its run exists
are the recovery time, printed, never asserted.
"""

from __future__ import annotations

import random
import time

from harness.host_rollgate import HostRollgate
from harness.plane import ControlPlane
from tests.faults import suites as fault_suites

STAGES = ["s0", "s1", "s2", "s3"]


def test_sigkill_during_promotions_loses_nothing(
        plane: ControlPlane, namespace: str, rollgate: HostRollgate) -> None:
    rng = random.Random(fault_suites.SEED)
    api = fault_suites.setup_namespace(plane, namespace, [*STAGES, "canary"])
    probe = fault_suites.Probe(api)
    proc = fault_suites.start_reconciler(rollgate, namespace, name="faults-sigkill")
    driver = fault_suites.Driver(api, STAGES, rng)
    driver.start()
    recoveries: list[float] = []
    try:
        for _ in range(fault_suites.KILLS):
            time.sleep(rng.uniform(0.2, 2.0))  # a random point of the promotions
            fault_suites.sigkill(plane, proc)
            proc = fault_suites.start_reconciler(rollgate, namespace, name="faults-sigkill",
                                             wait=False)
            recoveries.append(probe())  # kill -> the restarted reconciler's first run
        driver.stop()
        states = fault_suites.settle(api, driver)
    finally:
        driver.stop()
        plane.stop_process(proc)
    fault_suites.check(f"SIGKILL x{fault_suites.KILLS} ({driver.promotions} promotions)", states,
                   {"kill -> new run": recoveries})
