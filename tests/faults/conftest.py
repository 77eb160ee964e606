"""Fixtures for the fault suites: a control plane of their own (they restart its API
server and etcd, which must not disturb the e2e tests' shared plane) with rollgate's
RBAC but no webhook (the faults are the reconciler's; fewer processes on a busy
machine), a namespace per test, and the report of defects and recovery times printed
at the end of the run.

The bounds come from environment variables (tests/faults/suites.py; docs/development.md "Fault
suites"): the defaults are the short version `make test` runs, `make faults` sets the
long one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.host_rollgate import HostRollgate
from harness.kits.plane import fresh_namespace, rollgate_on, running_plane
from harness.plane import ControlPlane
from tests.faults import suites as fault_suites

HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.fspath).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with running_plane(tmp_path_factory.mktemp("faults")) as started:
        yield started


@pytest.fixture(scope="session")
def rollgate(plane: ControlPlane) -> HostRollgate:
    return rollgate_on(plane, webhook=False)


@pytest.fixture
def namespace(plane: ControlPlane) -> Iterator[str]:
    with fresh_namespace(plane) as name:
        yield name


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not fault_suites.REPORT:
        return
    terminalreporter.section(
        f"faults (seed {fault_suites.SEED}, kills {fault_suites.KILLS}, restarts "
        f"{fault_suites.RESTARTS}, downtime {fault_suites.DOWNTIME:g}s, back-off outage "
        f"{fault_suites.OUTAGE:g}s)")
    for line in fault_suites.REPORT:
        terminalreporter.write_line(line)
