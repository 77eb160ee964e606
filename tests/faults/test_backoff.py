"""The informers' back-off starts afresh after each outage.

The API server is restarted five times in a row under a running reconciler (engine
mode), down ``ROLLGATE_FAULT_OUTAGE`` seconds each time (docs/development.md "Fault suites"). What a
user sees is the reconciler's log: every failed list/watch logs
``retrying in <s>`` with the fields ``informer``, ``failures`` and ``retry_in``. Had an
informer's failure count survived the previous recovery, its first retry in the next
outage would announce ``failures`` > 1 and a longer ``retry_in``; so, for every outage
and every informer that lost its watch, the first retry must be failure 1 at the
initial delay. Before the next outage the test waits for every informer that failed
to log ``list/watch answered again``. Recovery (the API server ready -> a fresh
promotion's run exists, and -> every informer answered) is printed for
docs/benchmarks.md, never asserted.
"""

from __future__ import annotations

import functools
import time
from typing import Any

from harness import faults
from harness.host_rollgate import HostRollgate
from harness.plane import ControlPlane
from harness.process import ManagedProcess, log_offset
from reconciler.runtime.backoff import backoff_delay
from reconciler.runtime.informer import RETRY_BASE, RETRY_CAP
from testkit.waits import wait_for
from tests.faults import suites as fault_suites

OUTAGES = 5
# The first retry's delay at most: the initial delay with the full +20 % jitter.
FIRST = backoff_delay(1, base=RETRY_BASE, cap=RETRY_CAP, rand=lambda: 1.0)


def _outage_lines(proc: ManagedProcess, offset: int) -> tuple[
        dict[str, dict[str, Any]], set[str]]:
    """(informer -> its first failed-retry line, informers that were answered again)
    in the log since ``offset``."""
    first: dict[str, dict[str, Any]] = {}
    answered: set[str] = set()
    for line in fault_suites.log_lines(proc.log_path, offset):
        if "retry_in" in line:
            first.setdefault(str(line.get("informer")), line)
        elif line.get("msg") == "list/watch answered again":
            answered.add(str(line.get("informer")))
    return first, answered


def _all_answered(proc: ManagedProcess,
                  offset: int) -> dict[str, dict[str, Any]] | None:
    first, answered = _outage_lines(proc, offset)
    return first if first and set(first) <= answered else None


def test_each_outage_is_retried_from_the_initial_delay(
        plane: ControlPlane, namespace: str, rollgate: HostRollgate) -> None:
    api = fault_suites.setup_namespace(plane, namespace, ["canary"])
    probe = fault_suites.Probe(api)
    proc = fault_suites.start_reconciler(rollgate, namespace, name="faults-backoff")
    recoveries: list[float] = []
    all_back: list[float] = []
    late: list[str] = []
    try:
        probe()  # working before the first outage
        for outage in range(1, OUTAGES + 1):
            offset = log_offset(proc.log_path)
            faults.restart(plane, "kube-apiserver", downtime=fault_suites.OUTAGE)
            ready = time.monotonic()
            recoveries.append(probe())
            # Every informer that failed is answered again before the next outage, so
            # its count has had the chance to start afresh.
            first = wait_for(f"outage {outage}: every informer answered again",
                             functools.partial(_all_answered, proc, offset), timeout=180)
            all_back.append(time.monotonic() - ready)
            late += [f"outage {outage}: {name} first retry was failure {line['failures']} "
                     f"in {line['retry_in']}s" for name, line in sorted(first.items())
                     if line["failures"] != 1 or float(line["retry_in"]) > FIRST]
    finally:
        plane.stop_process(proc)
    fault_suites.REPORT.append(f"back-off: {OUTAGES} API server restarts, "
                           f"{fault_suites.OUTAGE:g}s down each")
    fault_suites.REPORT.append(f"  ready -> new run: {fault_suites.summary(recoveries)}")
    fault_suites.REPORT.append(
        f"  ready -> every informer answered: {fault_suites.summary(all_back)}")
    assert not late, "\n".join(late)
