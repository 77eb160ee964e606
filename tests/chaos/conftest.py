"""Fixtures for the chaos tests: one real webhook server for the session, and the
normal review's latency under each attack printed at the end of the run."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path[:0] = [str(HERE), str(HERE.parent / "http")]

import chaoskit  # noqa: E402


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[chaoskit.Server]:
    with chaoskit.serve(tmp_path_factory.mktemp("chaos")) as running:
        yield running


@pytest.fixture
def webhook(server: chaoskit.Server) -> Iterator[chaoskit.Server]:
    """The server, checked after each test: still running, and nothing a client did
    produced a stack trace or an internal error in its log."""
    start = len(server.log_text())
    yield server
    assert server.proc.poll() is None, "the webhook server exited"
    new = server.log_text()[start:]
    assert "Traceback" not in new, new
    assert '"status": 500' not in new and "internal fault" not in new, new


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not chaoskit.RESULTS:
        return
    terminalreporter.section("normal review while each attack ran (new TLS connection each)")
    for probes in chaoskit.RESULTS.values():
        terminalreporter.write_line(probes.line())
