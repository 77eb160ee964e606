"""The node's one network change: a bridge holding the node's address, which the CNI
bridge plugin attaches pods to (no gateway, no masquerade, no forwarding: pods reach
the bridge's /24 and nothing else)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

from harness.node.settings import NodeSettings


class NetworkError(RuntimeError):
    """The bridge could not be made."""


def _ip(*args: str) -> None:
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30,
                         check=False)
    if out.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)}: {out.stderr.strip()}")


def bridge_up(settings: NodeSettings) -> None:
    """Create the bridge with the node's address (it must not exist)."""
    _ip("link", "add", settings.bridge, "type", "bridge")
    _ip("addr", "add", f"{settings.address}/{settings.prefix}", "dev", settings.bridge)
    _ip("link", "set", settings.bridge, "up")


def cni_config(settings: NodeSettings, ipam_dir: Path) -> dict[str, Any]:
    """The CNI network list containerd gives every pod sandbox."""
    start, end = settings.pod_range
    return {
        "cniVersion": "0.4.0",
        "name": "rollgate-node",
        "plugins": [{
            "type": "bridge",
            "bridge": settings.bridge,
            "isGateway": False,
            "isDefaultGateway": False,
            "ipMasq": False,
            "hairpinMode": True,
            "ipam": {
                "type": "host-local",
                "dataDir": str(ipam_dir),
                "ranges": [[{"subnet": settings.network, "rangeStart": start,
                             "rangeEnd": end}]],
            },
        }],
    }
