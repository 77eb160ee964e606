"""Registry of controllers by ``--controllers`` name.

Entries are ``"module:Class"`` strings imported only when selected, so a broken
import in one controller cannot keep the other from running. ``stage-verification``
has one class per ``--stage-verification`` mode (``off`` runs none); the modes and
their default come from ``reconciler.verification.options``, the one place both this
loader and the command line take them from.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from ..runtime.types import Controller
from ..verification.options import DEFAULT_MODE, MODES

REGISTRY: dict[str, str] = {
    "stage-verification": "reconciler.verification.engine:StageVerificationController",
    "stage-verification/observe": "reconciler.verification.observer:VerificationObserver",
    "rollout-plugins": "reconciler.plugins.controller:RolloutPluginsController",
}

DEFAULT = ("stage-verification", "rollout-plugins")
VERIFICATION_MODES = MODES
DEFAULT_VERIFICATION_MODE = DEFAULT_MODE


class UnknownController(ValueError):
    pass


def load(name: str, options: Mapping[str, Any] | None = None) -> Controller | None:
    """Import and instantiate the controller registered as ``name``; None when its mode
    turns it off."""
    if name == "stage-verification":
        mode = (options or {}).get("stage_verification") or DEFAULT_VERIFICATION_MODE
        if mode not in VERIFICATION_MODES:
            raise UnknownController(f"unknown --stage-verification mode {mode!r} (known: "
                                    f"{', '.join(VERIFICATION_MODES)})")
        if mode == "off":
            return None
        if mode == "observe":
            name = "stage-verification/observe"
    try:
        target = REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(k for k in REGISTRY if "/" not in k))
        raise UnknownController(f"unknown controller {name!r} (known: {known})") from None
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    # Built from the flags: a controller's watches may depend on them.
    controller: Controller = cls(options or {})
    return controller
