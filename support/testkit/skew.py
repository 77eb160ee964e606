"""The next minor of an upstream CRD, as tests of version skew need it.

Kargo or argo-rollouts-manager may add an optional field under ``spec.verification`` or
under a ``spec.plugins`` entry before rollgate knows it (docs/install.md, "Version
skew"). :func:`next_minor` adds one such field to a CRD document (rollgate's own, or the
real one from an upstream tree), so a test can serve it and show that rollgate allows,
keeps and ignores what the API server accepts.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

# The fields a next minor adds (neither exists in Kargo v1.11.2 or the operator v0.0.9).
VERIFICATION_FIELD = "timeout"
VERIFICATION_VALUE = "10m"
PLUGIN_FIELD = "args"
PLUGIN_VALUE = ["--verbose"]


def _spec_schemas(crd: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for version in crd["spec"]["versions"]:
        yield version["schema"]["openAPIV3Schema"]["properties"]["spec"]


def next_minor(crd: dict[str, Any]) -> dict[str, Any]:
    """``crd`` (Stages or RolloutManagers) with the new optional field in every served
    version; any other CRD unchanged."""
    out = copy.deepcopy(crd)
    plural = out["spec"]["names"]["plural"]
    for spec in _spec_schemas(out) if plural in ("stages", "rolloutmanagers") else ():
        if plural == "stages":
            spec["properties"]["verification"]["properties"][VERIFICATION_FIELD] = {
                "type": "string"}
            continue
        plugins = spec["properties"]["plugins"]["properties"]
        for entries in (plugins["metric"], plugins["trafficManagement"]):
            entries["items"]["properties"][PLUGIN_FIELD] = {
                "type": "array", "items": {"type": "string"}}
    return out
