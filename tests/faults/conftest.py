"""Fixtures for the fault suites: a control plane of their own (they restart its API
server and etcd, which must not disturb the e2e tests' shared plane), a namespace per
test, and the report of defects and recovery times printed at the end of the run.

The bounds come from environment variables (faultkit.py; README "make faults"): the
defaults are the short version `make test` runs, `make faults` sets the long one.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).parent
sys.path[:0] = [str(HERE), str(HERE.parent / "e2e")]

import controlplane  # noqa: E402
import faultkit  # noqa: E402
from plane_kit import fresh_namespace, running_plane  # noqa: E402


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.fspath).parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.ControlPlane]:
    """No webhook: the faults are the reconciler's; fewer processes on a busy machine."""
    with running_plane(tmp_path_factory.mktemp("faults"), with_webhook=False) as started:
        yield started


@pytest.fixture
def namespace(plane: controlplane.ControlPlane) -> Iterator[str]:
    with fresh_namespace(plane) as name:
        yield name


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not faultkit.REPORT:
        return
    terminalreporter.section(
        f"faults (seed {faultkit.SEED}, kills {faultkit.KILLS}, restarts "
        f"{faultkit.RESTARTS}, downtime {faultkit.DOWNTIME:g}s, back-off outage "
        f"{faultkit.OUTAGE:g}s)")
    for line in faultkit.REPORT:
        terminalreporter.write_line(line)
