"""Registry of controllers by ``--controllers`` name.

Each entry is a function that imports its controller only when called (when selected),
so a broken import in one controller cannot keep the other from running, and builds it
from its own feature's options: the verification controllers get
``VerificationOptions``, the plugins controller ``PluginsOptions``, never the whole
command line. ``stage-verification`` has one class per ``--stage-verification`` mode
(``off`` runs none); the modes come from ``reconciler.verification.options``, the one
place both this loader and the command line take them from.
"""

from __future__ import annotations

from collections.abc import Callable

from ..options import ReconcilerOptions
from ..runtime.types import Controller
from ..verification.options import MODES


def _engine(options: ReconcilerOptions) -> Controller:
    from ..verification.engine import StageVerificationController

    return StageVerificationController(options=options.verification)


def _observer(options: ReconcilerOptions) -> Controller:
    from ..verification.observer import VerificationObserver

    return VerificationObserver(options=options.verification)


def _rollout_plugins(options: ReconcilerOptions) -> Controller:
    from ..plugins.controller import RolloutPluginsController

    return RolloutPluginsController(options=options.plugins)


REGISTRY: dict[str, Callable[[ReconcilerOptions], Controller]] = {
    "stage-verification": _engine,
    "stage-verification/observe": _observer,
    "rollout-plugins": _rollout_plugins,
}


class UnknownController(ValueError):
    pass


def load(name: str, *, options: ReconcilerOptions | None = None) -> Controller | None:
    """Import and instantiate the controller registered as ``name`` (with the default
    options without ``options``); None when its mode turns it off."""
    options = options if options is not None else ReconcilerOptions()
    if name == "stage-verification":
        mode = options.verification.mode
        if mode not in MODES:
            raise UnknownController(f"unknown --stage-verification mode {mode!r} (known: "
                                    f"{', '.join(MODES)})")
        if mode == "off":
            return None
        if mode == "observe":
            name = "stage-verification/observe"
    try:
        build = REGISTRY[name]
    except KeyError:
        known = ", ".join(sorted(k for k in REGISTRY if "/" not in k))
        raise UnknownController(f"unknown controller {name!r} (known: {known})") from None
    # Built from the flags: a controller's watches may depend on them.
    return build(options)
