"""rollgate's contract as data plus pure checks (no I/O).

Used by the webhook (admission), the reconciler (re-checking before it acts) and the
offline ``python -m schemas validate`` CLI, so the three can never disagree about what
is valid.
"""

from __future__ import annotations

from schemas import constants
from schemas.defaults import default_patch, rollout_manager_default_patch
from schemas.dispatch import check
from schemas.findings import Finding, Key, errors, render_path, warnings
from schemas.lookups import LookupUnavailable
from schemas.normalize import AnalysisSpec, normalize_analysis, normalize_plugins
from schemas.plugins import check_rollout_manager
from schemas.ratchet import ratchet
from schemas.stage import check_stage

__all__ = [
    "AnalysisSpec",
    "Finding",
    "Key",
    "LookupUnavailable",
    "check",
    "check_rollout_manager",
    "check_stage",
    "constants",
    "default_patch",
    "errors",
    "normalize_analysis",
    "normalize_plugins",
    "ratchet",
    "render_path",
    "rollout_manager_default_patch",
    "warnings",
]
