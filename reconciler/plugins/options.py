"""The plugins feature's options: each flag's one default, typed (docs/components.md, "Reconciler").

``reconciler.cli`` takes the defaults of the flags from here and builds
``PluginsOptions`` from the parsed flags; ``reconciler.controllers.load`` hands them to
the controller, and nothing else of the command line.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .decisions import DEFAULT_DEPLOYMENT
from .digests import DownloadLimits
from .executables import host_arch


@dataclass(frozen=True, kw_only=True, slots=True)
class PluginsOptions:
    """The flags of the RolloutManager plugins controller, one field each."""

    mode: str = "auto"  # --plugins-mode, one of decisions.FLAG_MODES
    # --rollouts-deployment: the Argo Rollouts Deployment; narrows its watch (and RBAC).
    rollouts_deployment: str = DEFAULT_DEPLOYMENT
    allow_http: bool = False  # --allow-http-plugins
    ca_file: str | None = None  # --plugins-ca-file, trusted besides the system CAs
    # --plugins-max-download-bytes and --plugins-download-timeout; the rest of the limits
    # have no flag.
    download_limits: DownloadLimits = field(default_factory=DownloadLimits)
    # --plugins-arch: the nodes' architecture a downloaded plugin must be built for.
    arch: str = field(default_factory=host_arch)
