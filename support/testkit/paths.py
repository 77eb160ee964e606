"""Where the repository is, for tests that read its files (examples, manifests, README)."""

from __future__ import annotations

from pathlib import Path

# support/testkit/paths.py -> the repository's root.
REPO_ROOT = Path(__file__).resolve().parents[2]
