"""Every option of ``python -m reconciler``, typed: the process's own and one dataclass
per part that reads options (the runtime, each feature).

``reconciler.cli`` is the one place that turns the parsed flags into these, and takes
each flag's default from them; a part gets only its own dataclass (the Manager
``runtime``, a controller its feature's), so verification and plugins never see, or
import, each other's options.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Final

from .plugins.options import PluginsOptions
from .runtime.options import RuntimeOptions
from .verification.options import VerificationOptions

# --controllers: every controller (reconciler.controllers.REGISTRY) runs by default.
DEFAULT_CONTROLLERS: Final = ("stage-verification", "rollout-plugins")


def default_log_level() -> str:
    """$LOG_LEVEL, so a Deployment can set it without touching the arguments."""
    return os.environ.get("LOG_LEVEL", "INFO")


@dataclass(frozen=True, kw_only=True, slots=True)
class ReconcilerOptions:
    """The whole command line: the process's flags, then each part's options."""

    kubeconfig: str | None = None  # None: in-cluster config, else $KUBECONFIG
    log_level: str = field(default_factory=default_log_level)
    controllers: tuple[str, ...] = DEFAULT_CONTROLLERS  # --controllers, by name
    runtime: RuntimeOptions = field(default_factory=RuntimeOptions)
    verification: VerificationOptions = field(default_factory=VerificationOptions)
    plugins: PluginsOptions = field(default_factory=PluginsOptions)
