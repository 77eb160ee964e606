"""Registry of controllers by ``--controllers`` name.

Entries are ``"module:Class"`` strings imported only when selected, so a broken
import in one controller cannot keep the other from running. ``stage-verification``
has one class per ``--stage-verification`` mode (``off`` runs none).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

from ..runtime.types import Controller

REGISTRY: dict[str, str] = {
    "stage-verification": "reconciler.controllers.stage_verification:StageVerificationController",
    "stage-verification/observe":
        "reconciler.controllers.verification_observer:VerificationObserver",
    "rollout-plugins": "reconciler.plugins.controller:RolloutPluginsController",
}

DEFAULT = ("stage-verification", "rollout-plugins")
VERIFICATION_MODES = ("engine", "observe", "off")


class UnknownController(ValueError):
    pass


def load(name: str, options: Mapping[str, Any] | None = None) -> Controller | None:
    """Import and instantiate the controller registered as ``name``; None when its mode
    turns it off."""
    if name == "stage-verification":
        mode = (options or {}).get("stage_verification", "engine")
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
