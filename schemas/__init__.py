"""rollgate's contract as data plus pure checks (no I/O).

Used by the webhook (admission), the reconciler (re-checking before it acts) and the
offline ``python -m schemas validate`` CLI, so the three can never disagree about what
is valid. The modules here are the JSON Schemas and their compilation (``compiled``,
``translate``), the rules they cannot say (``stage``, ``references``, ``plugins``,
``names``, ``limits``), defaulting, normalising and ratcheting, and the one table of
kinds (``kinds``). The CLI and all file reading are in ``schemas.cli``, which nothing
else in rollgate imports (see schemas/README.md for the table of modules).
"""

from __future__ import annotations

from schemas import constants
from schemas.defaults import default_patch, default_warnings, rollout_manager_default_patch
from schemas.dispatch import check
from schemas.findings import Finding, Key, errors, render_path, warnings
from schemas.lookups import LookupUnavailable
from schemas.normalize import AnalysisSpec, normalize_analysis, normalize_plugins
from schemas.plugins import check_rollout_manager
from schemas.ratchet import ratchet
from schemas.stage import check_stage
from schemas.verdicts import Verdicts

__all__ = [
    "AnalysisSpec",
    "Finding",
    "Key",
    "LookupUnavailable",
    "Verdicts",
    "check",
    "check_rollout_manager",
    "check_stage",
    "constants",
    "default_patch",
    "default_warnings",
    "errors",
    "normalize_analysis",
    "normalize_plugins",
    "ratchet",
    "render_path",
    "rollout_manager_default_patch",
    "warnings",
]
