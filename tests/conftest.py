"""Suite-wide policy: in CI a skipped test is a failure.

A test that skips itself in CI (no binaries, no control plane, a missing tool) would
let a green build hide that part of the product was never exercised, so when ``CI``
is set any skip turns the session's exit status non-zero with a message naming them.
"""

from __future__ import annotations

import os

import pytest

_skipped: list[str] = []


def _in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
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
