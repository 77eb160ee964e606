"""The upstream versions whose API rollgate's checks are written against.

The same versions as ``hack/versions.env`` (a test compares them): the schemas and
rules here restate Kargo's Stage and argo-rollouts-manager's RolloutManager at these
tags, and version-skew warnings name them (docs/install.md, "Version skew").
"""

from __future__ import annotations

from typing import Final

KARGO: Final = "v1.11.2"
ARGO_ROLLOUTS: Final = "v1.9.1"
ARGO_ROLLOUTS_MANAGER: Final = "v0.0.9"

# Per kind rollgate checks: whose API it is, at which version.
API_OF: Final[dict[str, str]] = {
    "Stage": f"Kargo {KARGO}",
    "RolloutManager": f"argo-rollouts-manager {ARGO_ROLLOUTS_MANAGER}",
}
