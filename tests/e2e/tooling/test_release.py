"""``make release`` (support/releasing/release.py): the packaged chart and the CHANGELOG
entry, and what it refuses. The packaged chart is installed on the node by
tests/node/test_install.py."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from harness import chart
from harness.kits.plane import tool_or_fail
from releasing import release

ENTRY = release.Entry(version="1.2.0", date="2026-12-03", commit="1a2b3c4d5e6f")


def run_release(tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "releasing",
                           "--changelog", str(tmp_path / "CHANGELOG.md"),
                           "--out-dir", str(tmp_path / "dist")],
                          capture_output=True, text=True, timeout=120, check=False)


def test_a_release_packages_the_chart_and_writes_its_entry(tmp_path: Path) -> None:
    tool_or_fail()
    version = chart.app_version()
    out = run_release(tmp_path)
    assert out.returncode == 0, out.stderr
    package = tmp_path / "dist" / f"rollgate-{version}.tgz"
    with tarfile.open(package) as archive:
        member = archive.extractfile("rollgate/Chart.yaml")
        assert member is not None
        meta = yaml.safe_load(member.read())
        names = archive.getnames()
    assert (meta["version"], meta["appVersion"]) == (version, version)
    assert "rollgate/values.schema.json" in names
    assert "rollgate/templates/admission-policy.yaml" in names
    changelog = (tmp_path / "CHANGELOG.md").read_text()
    [entry] = release.entries(changelog)
    assert entry.version == version
    assert f"docker build -t <registry>/rollgate:{version} ." in changelog
    assert "dev.rollgate.test-only=true" in changelog

    again = run_release(tmp_path)
    assert again.returncode == 1
    assert f"already has {version}: bump version and appVersion" in again.stderr
    assert (tmp_path / "CHANGELOG.md").read_text() == changelog


def test_the_next_entry_lists_the_commits_since_the_previous_one() -> None:
    first = release.with_entry(release.TITLE, release.entry_text(ENTRY, ["a change"]))
    later = release.Entry(version="1.3.0", date="2026-12-10", commit="abcdefabcdef")
    both = release.with_entry(first, release.entry_text(later, ["another", "and more"]))
    assert release.entries(both) == [later, ENTRY]
    assert both.startswith("# Changelog\n\n## 1.3.0 (2026-12-10, commit abcdefabcdef)\n\n"
                           "- another\n- and more\n")
    assert both.count("# Changelog") == 1
    assert "- a change\n" in both


@pytest.mark.parametrize(("chart_yaml", "says"), [
    ("version: 1.2.0\nappVersion: '1.2.1'\n", "version 1.2.0 and appVersion 1.2.1 differ"),
    ("version: 1.2.0\n", "version 1.2.0 and appVersion None differ"),
])
def test_a_chart_whose_version_is_not_its_app_version_is_refused(chart_yaml: str,
                                                                 says: str) -> None:
    with pytest.raises(release.ReleaseError, match=says):
        release.chart_version(chart_yaml)
    assert release.chart_version("version: 1.2.0\nappVersion: '1.2.0'\n") == "1.2.0"
