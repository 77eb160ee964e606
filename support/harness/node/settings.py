"""The names, addresses and directories of the node: one per machine, so fixed."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from harness.plane import Profile, pods_profile


def _state_dir() -> Path:
    return Path(os.environ.get("ROLLGATE_NODE_DIR") or "/tmp/rollgate-node")


@dataclass(frozen=True, slots=True)
class NodeSettings:
    """Where the node lives and which addresses it takes.

    ``state_dir`` is fixed (``$ROLLGATE_NODE_DIR``, default ``/tmp/rollgate-node``) so
    that a start finds what a killed run left there. The bridge holds ``address`` in
    ``network``, part of the benchmarking range 198.18.0.0/15 that nothing else here
    uses; ``address`` is also the API server's, the node's InternalIP and the
    ``kubernetes`` Service's ClusterIP (the first of ``service_range``), so pods reach
    the API server without kube-proxy. Pods get addresses from ``pod_range`` and only
    the route to ``network``: nothing is forwarded or masqueraded.
    """

    state_dir: Path = field(default_factory=_state_dir)
    name: str = "rollgate-node"
    bridge: str = "rgnode0"
    network: str = "198.18.0.0/24"
    address: str = "198.18.0.1"
    prefix: int = 24
    pod_range: tuple[str, str] = ("198.18.0.64", "198.18.0.254")
    service_range: str = "198.18.0.0/26"
    max_pods: int = 40

    @property
    def profile(self) -> Profile:
        """The plane's profile: the API server on the bridge address, port 443."""
        return pods_profile(self.address, self.service_range)

    @property
    def containerd_socket(self) -> Path:
        return self.state_dir / "containerd" / "containerd.sock"

    @property
    def lock_file(self) -> Path:
        return self.state_dir.parent / f"{self.state_dir.name}.lock"

    @property
    def baseline_file(self) -> Path:
        return self.state_dir / "host-baseline.json"

    @property
    def pids_dir(self) -> Path:
        return self.state_dir / "pids"
