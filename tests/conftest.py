"""Suite-wide policy: in CI a skipped test is a failure; every run ends with the time
each suite took.

A test that skips itself in CI (no binaries, no control plane, a missing tool) would
let a green build hide that part of the product was never exercised, so when ``CI``
is set any skip turns the session's exit status non-zero with a message naming them.
The per-suite times (set-up, call and teardown of its tests, session fixtures included
where they start) are the table of docs/development.md "Test time", printed by every
run so a slower suite shows in CI's log; the slowest modules follow, so the minutes of a
suite can be put down to the tests that spend them.
"""

from __future__ import annotations

import os

import pytest

_skipped: list[str] = []
_seconds: dict[str, float] = {}
_module_seconds: dict[str, float] = {}
SLOWEST_MODULES = 12


def suite_of(nodeid: str) -> str:
    """``tests/<suite>`` of a test id (``tests/e2e/admission/test_x.py::t`` -> ``e2e``);
    the node's verification tests count as ``node``."""
    parts = nodeid.split("::", 1)[0].split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else parts[0]


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    suite = suite_of(report.nodeid)
    _seconds[suite] = _seconds.get(suite, 0.0) + report.duration
    module = report.nodeid.split("::", 1)[0]
    _module_seconds[module] = _module_seconds.get(module, 0.0) + report.duration
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped.append(report.nodeid)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid or "<collection>")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _in_ci() and _skipped and exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _in_ci() and _skipped:
        terminalreporter.section("skipped tests are failures in CI", sep="=", red=True)
        for nodeid in _skipped:
            terminalreporter.write_line(f"SKIPPED (fails CI): {nodeid}", red=True)
    if _seconds:
        terminalreporter.section("time per suite", sep="=")
        for suite, seconds in sorted(_seconds.items(), key=lambda item: -item[1]):
            terminalreporter.write_line(f"{suite:<12} {seconds / 60:6.1f} min")
        terminalreporter.write_line(f"slowest {SLOWEST_MODULES} modules:")
        slowest = sorted(_module_seconds.items(), key=lambda item: -item[1])
        for module, seconds in slowest[:SLOWEST_MODULES]:
            terminalreporter.write_line(f"  {seconds / 60:6.1f} min  {module}")
