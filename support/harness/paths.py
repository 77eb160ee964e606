"""Where the harness finds the repository and the binaries ``hack/k8s/build.sh`` makes.

The build writes under ``$ROLLGATE_K8S_CACHE`` (default ``$XDG_CACHE_HOME/rollgate/k8s``,
else ``~/.cache/rollgate/k8s``), one
directory per project and version; ``$ROLLGATE_K8S_BIN`` names one directory that holds
prebuilt binaries instead (then nothing is looked up in the cache).
"""

from __future__ import annotations

import os
from pathlib import Path

from testkit.paths import REPO_ROOT

__all__ = ["REPO_ROOT", "BinaryMissing", "binary", "cache_dir", "user_cache"]


class BinaryMissing(RuntimeError):
    """A binary the build makes is not there; the message names the command that builds it."""


def user_cache() -> Path:
    """``$XDG_CACHE_HOME/rollgate``, else ``~/.cache/rollgate`` (the XDG convention)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rollgate"


def cache_dir() -> Path:
    return Path(os.environ.get("ROLLGATE_K8S_CACHE") or user_cache() / "k8s")


def binary(name: str, directory: str, *, build: str = "make k8s") -> Path:
    """``$ROLLGATE_K8S_BIN/name`` when that is set, else ``<cache>/directory/name``;
    raises ``BinaryMissing`` naming ``build`` when it is not an executable."""
    prebuilt = os.environ.get("ROLLGATE_K8S_BIN")
    path = Path(prebuilt) / name if prebuilt else cache_dir() / directory / name
    if not os.access(path, os.X_OK):
        raise BinaryMissing(
            f"{path} is missing: run `{build}` (hack/k8s/build.sh), or put it in "
            "$ROLLGATE_K8S_BIN")
    return path
