"""``make release`` (``python -m releasing``): what ships a version of rollgate, written
into ``dist/`` (docs/install.md "Get the image and the chart", "Releases"):

- the image as an OCI archive, ``rollgate-<version>.oci.tar``, its digest printed;
- the chart as ``helm package`` makes it, ``rollgate-<version>.tgz``;
- the SBOM of the image's Python dependencies, ``rollgate-<version>.cdx.json``
  (CycloneDX, from ``requirements.lock``: ``releasing.sbom``);
- ``SHA256SUMS`` of those three;
- and last, once all of them are there, the version's entry at the top of CHANGELOG.md.

The image's base is ``--base``: by default the Dockerfile's own ``FROM``
(``python:3.11-slim``), pulled from its registry, which is what a published release is
built on; ``--base stand-in`` builds the unchanged Dockerfile on the locally made Debian
stand-in instead (``harness.node.images``: where that registry cannot be reached, as on
the machines the tests run on), and such an image is labelled
``dev.rollgate.test-only=true``. The flow after the build is the same either way.

The chart's ``version`` and ``appVersion`` must be the same (one number for the chart and
the image it installs). A version that already has an entry is refused, so a release is
never written twice; bump both numbers in ``Chart.yaml`` first.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from harness import chart
from harness.node import images
from harness.paths import REPO_ROOT
from releasing import sbom
from releasing.artifacts import Artifacts, copy_archive, image_digest, write_checksums

CHANGELOG = REPO_ROOT / "CHANGELOG.md"
LOCK = REPO_ROOT / "requirements.lock"
STAND_IN = "stand-in"
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
    """One release's entry: its changes, then what ships and how to install it."""
    changes = "".join(f"- {s}\n" for s in subjects) or "- (no commits)\n"
    v = entry.version
    return (f"## {v} ({entry.date}, commit {entry.commit})\n\n"
            f"{changes}\n"
            f"Artifacts (`make release`): the image as an OCI archive `rollgate-{v}.oci.tar` "
            f"(built FROM python:3.11-slim), the chart `rollgate-{v}.tgz`, the SBOM of the "
            f"image's Python dependencies `rollgate-{v}.cdx.json` (CycloneDX) and "
            f"`SHA256SUMS`. `make publish REGISTRY=<registry>` pushes the image as "
            f"`<registry>/rollgate:{v}` and the chart as `oci://<registry>/charts/rollgate`.\n"
            f"Install: `helm install rollgate oci://<registry>/charts/rollgate --version {v} "
            f"-n rollgate-system --create-namespace --set image.repository=<registry>/rollgate "
            f"--set image.digest=<the digest make release printed>` "
            f"(docs/install.md \"Get the image and the chart\").\n")


def with_entry(changelog: str, text: str) -> str:
    """``changelog`` with ``text`` as its newest entry."""
    body = changelog[len(TITLE):] if changelog.startswith(TITLE) else changelog
    return f"{TITLE}\n{text}\n{body.lstrip()}".rstrip() + "\n"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          check=True, timeout=60).stdout


@dataclass(frozen=True)
class Built:
    """What a release wrote, and the facts a user checks it by."""

    artifacts: Artifacts
    image_digest: str
    base: str
    test_only: bool


def build_image(*, base: str, version: str, archive: Path) -> tuple[str, bool]:
    """rollgate's image on ``base`` as ``archive`` (named ``version`` inside); returns
    what its base is, and whether that makes it test-only."""
    if base == STAND_IN:
        try:
            image = images.rollgate_release(version)
        except images.ImageError as err:
            raise ReleaseError(f"the image did not build: {err}") from err
        copy_archive(image.archive, archive, ref_name=version)
        return (f"{images.BASE_NAME} (a local stand-in for python:3.11-slim; "
                f"labelled {images.TEST_ONLY_LABEL})"), True
    with tempfile.TemporaryDirectory(dir=archive.parent) as tmp:
        built = Path(tmp) / "image.tar"
        try:
            digest = images.rollgate_on(base, version=version,
                                        name=f"localhost/rollgate:{version}", archive=built)
        except images.ImageError as err:
            raise ReleaseError(f"the image on {base} did not build (pull it, or use "
                               f"--base {STAND_IN} where it cannot be pulled): "
                               f"{str(err).splitlines()[-1]}") from err
        copy_archive(built, archive, ref_name=version)
    return f"{base}@{digest}", False


def release(*, changelog: Path, out_dir: Path, today: dt.date, base: str) -> Built:
    """Build every artifact into ``out_dir``, then write the entry (a failed build
    writes none)."""
    version = chart_version((chart.CHART / "Chart.yaml").read_text())
    text = changelog.read_text() if changelog.is_file() else TITLE
    known = entries(text)
    if any(e.version == version for e in known):
        raise ReleaseError(f"{changelog.name} already has {version}: bump version and "
                           f"appVersion in charts/rollgate/Chart.yaml first (or rebuild "
                           f"its files with --artifacts-only)")
    commit = _git("rev-parse", "HEAD").strip()
    since = [f"{known[0].commit}..HEAD"] if known else ["HEAD"]
    subjects = _git("log", "--format=%s", *since).splitlines()
    entry = Entry(version, today.isoformat(), commit[:12])
    built = build(version=version, out_dir=out_dir, base=base)
    changelog.write_text(with_entry(text, entry_text(entry, subjects)))
    return built


def rebuild(*, changelog: Path, out_dir: Path, base: str) -> Built:
    """The files of a version that was released already (at its tag: ``git checkout
    v<version>``), with no entry written; a version without an entry is refused, so a
    release is never made by rebuilding."""
    version = chart_version((chart.CHART / "Chart.yaml").read_text())
    text = changelog.read_text() if changelog.is_file() else TITLE
    if not any(e.version == version for e in entries(text)):
        raise ReleaseError(f"{changelog.name} has no {version}: it was never released; "
                           f"make release cuts it")
    return build(version=version, out_dir=out_dir, base=base)


def build(*, version: str, out_dir: Path, base: str) -> Built:
    """The image archive, the chart package, the SBOM and SHA256SUMS of ``version``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    artifacts = Artifacts(out_dir, version)
    # Nothing of an earlier run of this version is left to be mistaken for this one's.
    for path in (*artifacts.files, artifacts.checksums):
        path.unlink(missing_ok=True)
    described, test_only = build_image(base=base, version=version, archive=artifacts.image)
    digest = image_digest(artifacts.image)
    chart.helm("package", str(chart.CHART), "--destination", str(out_dir))
    artifacts.sbom.write_text(sbom.dumps(sbom.document(
        lock=LOCK.read_text(), version=version, image_digest=digest, base=described,
        created=dt.datetime.now(dt.UTC))))
    write_checksums(artifacts.files, artifacts.checksums)
    return Built(artifacts=artifacts, image_digest=digest, base=described, test_only=test_only)


def report(built: Built) -> str:
    """What ``make release`` prints: each file, the image's digest and base."""
    a = built.artifacts
    lines = [f"{a.image}\timage {built.image_digest}",
             f"{a.chart}\tchart {a.version}",
             f"{a.sbom}\tSBOM (CycloneDX {sbom.SPEC_VERSION}, "
             f"{len(sbom.pins(LOCK.read_text()))} Python packages)",
             f"{a.checksums}\tsha256 of the three",
             f"base: {built.base}"]
    if built.test_only:
        lines.append("test-only: this image's base is the local stand-in; publish it only "
                     "to a test registry")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m releasing",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--changelog", type=Path, default=CHANGELOG)
    parser.add_argument("--out-dir", type=Path, default=REPO_ROOT / "dist")
    parser.add_argument("--base", default=images.dockerfile_base(),
                        help=f"the image's base: a reference to pull (default: the "
                             f"Dockerfile's FROM, %(default)s), or {STAND_IN!r}, the local "
                             f"Debian stand-in (test-only)")
    parser.add_argument("--artifacts-only", action="store_true",
                        help="rebuild the files of a version CHANGELOG.md has (at its tag); "
                             "no entry is written")
    args = parser.parse_args(argv)
    try:
        if args.artifacts_only:
            built = rebuild(changelog=args.changelog, out_dir=args.out_dir, base=args.base)
        else:
            built = release(changelog=args.changelog, out_dir=args.out_dir,
                            today=dt.datetime.now(dt.UTC).date(), base=args.base)
    except ReleaseError as err:
        print(f"release: {err}", file=sys.stderr)
        return 1
    done = "entry kept" if args.artifacts_only else "entry written"
    print(f"{report(built)}\n{args.changelog}: {done}")
    return 0
