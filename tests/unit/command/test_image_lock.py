"""The image's lock (requirements.lock, `make lock`): an image built next month installs
the same versions, and the lock still covers and satisfies pyproject.toml's
dependencies, so a changed dependency cannot ship with a stale lock. Offline."""

from __future__ import annotations

import re
import tomllib
from typing import cast

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from testkit.paths import REPO_ROOT

LOCK = REPO_ROOT / "requirements.lock"
PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;#]+)$")
# The image's interpreter: python:3.11-slim on Linux. (default_environment() is a TypedDict
# whose values are all str; Marker.evaluate takes a plain mapping, as packaging casts it.)
IMAGE_ENV: dict[str, str] = {
    **cast("dict[str, str]", default_environment()), "python_version": "3.11",
    "python_full_version": "3.11.0", "sys_platform": "linux", "platform_system": "Linux",
    "os_name": "posix"}


def pins() -> dict[str, Version]:
    out: dict[str, Version] = {}
    for number, line in enumerate(LOCK.read_text().splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        match = PIN.match(line)
        assert match, f"requirements.lock:{number}: not an exact pin: {line!r}"
        name = canonicalize_name(match["name"])
        assert name not in out, f"requirements.lock:{number}: {name} pinned twice"
        out[name] = Version(match["version"])
    return out


def dependencies() -> list[Requirement]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(text) for text in project["dependencies"]]


def test_every_dependency_is_pinned_within_its_range() -> None:
    locked = pins()
    wrong = []
    for req in dependencies():
        if req.marker is not None and not req.marker.evaluate(IMAGE_ENV):
            continue
        version = locked.get(canonicalize_name(req.name))
        if version is None or not req.specifier.contains(version, prereleases=True):
            wrong.append(f"{req} (locked: {version or 'missing'})")
    assert not wrong, ("requirements.lock does not satisfy pyproject.toml; run `make lock`: "
                       + "; ".join(wrong))


def test_the_image_installs_with_the_lock() -> None:
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    copies = [line.split()[1:-1] for line in dockerfile.splitlines()
              if line.startswith("COPY ")]
    assert any("requirements.lock" in sources for sources in copies)
    assert "pip install --no-cache-dir -c requirements.lock ." in dockerfile
    assert "python 3.11" in LOCK.read_text().splitlines()[1].lower()
