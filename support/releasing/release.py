"""``make release`` (``python -m releasing``): the chart packaged as users install it
and a CHANGELOG entry for its version (docs/install.md "Releases").

The chart's ``version`` and ``appVersion`` must be the same (one number for the chart and
the image it installs). The entry lists the commit subjects since the commit the previous
entry names (all of them for the first), with the steps to build the image for real: the
image archive the tests build is test-only (its base is a local stand-in, labelled
``dev.rollgate.test-only=true``). A version that already has an entry is refused, so a
release is never written twice; bump both numbers in ``Chart.yaml`` first.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness import chart
from harness.paths import REPO_ROOT

CHANGELOG = REPO_ROOT / "CHANGELOG.md"
TITLE = "# Changelog\n"
# "## 0.1.0 (2026-12-03, commit 1a2b3c4d5e6f)"
_ENTRY = re.compile(r"^## (?P<version>\S+) \((?P<date>[0-9-]+), commit (?P<commit>[0-9a-f]+)\)$",
                    re.MULTILINE)


class ReleaseError(RuntimeError):
    """What stops a release, and what to do."""


@dataclass(frozen=True)
class Entry:
    version: str
    date: str
    commit: str


def chart_version(chart_yaml: str) -> str:
    """The chart's version, which must equal its appVersion."""
    meta = yaml.safe_load(chart_yaml)
    version, app_version = str(meta.get("version")), str(meta.get("appVersion"))
    if version != app_version:
        raise ReleaseError(f"charts/rollgate/Chart.yaml: version {version} and appVersion "
                           f"{app_version} differ; a release sets both to the same number")
    return version


def entries(changelog: str) -> list[Entry]:
    """The entries of a changelog, newest first."""
    return [Entry(m["version"], m["date"], m["commit"]) for m in _ENTRY.finditer(changelog)]


def entry_text(entry: Entry, subjects: Sequence[str]) -> str:
    """One release's entry: its changes, then how to build and install it."""
    changes = "".join(f"- {s}\n" for s in subjects) or "- (no commits)\n"
    return (f"## {entry.version} ({entry.date}, commit {entry.commit})\n\n"
            f"{changes}\n"
            f"Install: `helm install rollgate rollgate-{entry.version}.tgz -n rollgate-system "
            f"--create-namespace --set image.repository=<registry>/rollgate`.\n"
            f"The image: `docker build -t <registry>/rollgate:{entry.version} .` (or buildah, "
            f"podman) from the Dockerfile at this commit, then push it. The image archive the "
            f"tests build is test-only: its base is a local stand-in, labelled "
            f"`dev.rollgate.test-only=true`.\n")


def with_entry(changelog: str, text: str) -> str:
    """``changelog`` with ``text`` as its newest entry."""
    body = changelog[len(TITLE):] if changelog.startswith(TITLE) else changelog
    return f"{TITLE}\n{text}\n{body.lstrip()}".rstrip() + "\n"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          check=True, timeout=60).stdout


def release(*, changelog: Path, out_dir: Path, today: dt.date) -> Path:
    """Write the entry, package the chart into ``out_dir``; the package's path."""
    version = chart_version((chart.CHART / "Chart.yaml").read_text())
    text = changelog.read_text() if changelog.is_file() else TITLE
    known = entries(text)
    if any(e.version == version for e in known):
        raise ReleaseError(f"{changelog.name} already has {version}: bump version and "
                           f"appVersion in charts/rollgate/Chart.yaml first")
    commit = _git("rev-parse", "HEAD").strip()
    since = [f"{known[0].commit}..HEAD"] if known else ["HEAD"]
    subjects = _git("log", "--format=%s", *since).splitlines()
    entry = Entry(version, today.isoformat(), commit[:12])
    out_dir.mkdir(parents=True, exist_ok=True)
    chart.helm("package", str(chart.CHART), "--destination", str(out_dir))
    changelog.write_text(with_entry(text, entry_text(entry, subjects)))
    return out_dir / f"rollgate-{version}.tgz"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m releasing",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--changelog", type=Path, default=CHANGELOG)
    parser.add_argument("--out-dir", type=Path, default=REPO_ROOT / "dist")
    args = parser.parse_args(argv)
    try:
        package = release(changelog=args.changelog, out_dir=args.out_dir,
                          today=dt.datetime.now(dt.UTC).date())
    except ReleaseError as err:
        print(f"release: {err}", file=sys.stderr)
        return 1
    print(f"{package}\n{args.changelog}: entry written")
    return 0
