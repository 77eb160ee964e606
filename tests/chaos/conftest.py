"""Fixtures for the chaos tests: one real webhook server for the session, and the
normal review's latency under each attack printed at the end of the run."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.kits import chaos


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[chaos.Server]:
    with chaos.serve(tmp_path_factory.mktemp("chaos")) as running:
        yield running


@pytest.fixture
def webhook(server: chaos.Server) -> Iterator[chaos.Server]:
    """The server, checked after each test: still running, and nothing a client did
    produced a stack trace or an internal error in its log."""
    start = len(server.log_text())
    yield server
    assert server.proc.poll() is None, "the webhook server exited"
    new = server.log_text()[start:]
    assert "Traceback" not in new, new
    assert '"status": 500' not in new and "internal fault" not in new, new


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not chaos.RESULTS:
        return
    terminalreporter.section("normal review while each attack ran (new TLS connection each)")
    for probes in chaos.RESULTS.values():
        terminalreporter.write_line(probes.line())
