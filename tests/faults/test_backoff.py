"""The informers' back-off starts afresh after each outage (issue 19, item 3).

The API server is restarted five times in a row under a running reconciler (engine
mode), down ``ROLLGATE_FAULT_OUTAGE`` seconds each time (README "make faults"). What a
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

import controlplane
import faultkit
from verification_kit import wait_for

from reconciler.runtime.backoff import backoff_delay
from reconciler.runtime.informer import RETRY_BASE, RETRY_CAP

OUTAGES = 5
# The first retry's delay at most: the initial delay with the full +20 % jitter.
FIRST = backoff_delay(1, base=RETRY_BASE, cap=RETRY_CAP, rand=lambda: 1.0)


def _outage_lines(proc: controlplane.ManagedProcess, offset: int) -> tuple[
        dict[str, dict[str, Any]], set[str]]:
    """(informer -> its first failed-retry line, informers that were answered again)
    in the log since ``offset``."""
    first: dict[str, dict[str, Any]] = {}
    answered: set[str] = set()
    for line in faultkit.log_lines(proc.log_path, offset):
        if "retry_in" in line:
            first.setdefault(str(line.get("informer")), line)
        elif line.get("msg") == "list/watch answered again":
            answered.add(str(line.get("informer")))
    return first, answered


def _all_answered(proc: controlplane.ManagedProcess,
                  offset: int) -> dict[str, dict[str, Any]] | None:
    first, answered = _outage_lines(proc, offset)
    return first if first and set(first) <= answered else None


def test_each_outage_is_retried_from_the_initial_delay(plane: controlplane.ControlPlane,
                                                       namespace: str) -> None:
    api = faultkit.setup_namespace(plane, namespace, ["canary"])
    probe = faultkit.Probe(api)
    proc = faultkit.start_reconciler(plane, namespace, name="faults-backoff")
    recoveries: list[float] = []
    all_back: list[float] = []
    late: list[str] = []
    try:
        probe()  # working before the first outage
        for outage in range(1, OUTAGES + 1):
            offset = controlplane.log_offset(proc.log_path)
            plane.restart("kube-apiserver", downtime=faultkit.OUTAGE)
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
    faultkit.REPORT.append(f"back-off: {OUTAGES} API server restarts, "
                           f"{faultkit.OUTAGE:g}s down each")
    faultkit.REPORT.append(f"  ready -> new run: {faultkit.summary(recoveries)}")
    faultkit.REPORT.append(f"  ready -> every informer answered: {faultkit.summary(all_back)}")
    assert not late, "\n".join(late)
