"""Registry of controllers by ``--controllers`` name.

Entries are ``"module:Class"`` strings imported only when selected, so a broken
import in one controller cannot keep the other from running.
"""

from __future__ import annotations

import importlib

from ..runtime.types import Controller

REGISTRY: dict[str, str] = {
    "stage-verification": "reconciler.controllers.stage_verification:StageVerificationController",
    "rollout-plugins": "reconciler.controllers.rollout_plugins:RolloutPluginsController",
}

DEFAULT = ("stage-verification", "rollout-plugins")


class UnknownController(ValueError):
    pass


def load(name: str) -> Controller:
    """Import and instantiate the controller registered as ``name``."""
    try:
        target = REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(REGISTRY))
        raise UnknownController(f"unknown controller {name!r} (known: {known})") from None
    module_name, _, class_name = target.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls()
