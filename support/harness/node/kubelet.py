"""kubelet for the node, built from the same module and pins as the API server.

Settings, and why (measured on this kind of machine):

- ``failCgroupV1: false``: the host mounts cgroup v1 hierarchies, which kubelet 1.35
  refuses otherwise ("kubelet is configured to not run on a host using cgroup v1");
  ``cgroupDriver: cgroupfs`` (no systemd), ``failSwapOn: false``.
- It serves only on the node's address; its read-only port is off; the API server's
  client certificate (the plane's CA) authenticates to it.
- Eviction thresholds low and image GC high, so a busy build machine never evicts the
  pods under test.
- ``--cert-dir`` and ``--root-dir`` under the node's directory; it still creates
  ``/var/lib/kubelet/device-plugins`` (hard-coded), which ``restore`` removes.
- It sets kernel tunables at start (``vm.overcommit_memory``, ``kernel.panic``, ...);
  ``hoststate`` records them first and ``restore`` puts them back.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import yaml

from harness import versions
from harness.node.settings import NodeSettings
from harness.paths import binary
from harness.pki import write_kubeconfig
from harness.plane import ControlPlane
from harness.process import ManagedProcess, http_ok


def find() -> Path:
    return binary("kubelet", versions.kubernetes())


def config(settings: NodeSettings, ca_file: Path) -> dict[str, Any]:
    """kubelet's KubeletConfiguration for the node."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{settings.containerd_socket}",
        "imageServiceEndpoint": f"unix://{settings.containerd_socket}",
        "address": settings.address,
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(ca_file)}},
        "authorization": {"mode": "AlwaysAllow"},
        "registerNode": True,
        "podLogsDir": str(settings.state_dir / "podlogs"),
        "resolvConf": "/etc/resolv.conf",
        "serializeImagePulls": False,
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 99,
        "imageGCLowThresholdPercent": 98,
        "maxPods": settings.max_pods,
    }


def start(plane: ControlPlane, settings: NodeSettings) -> ManagedProcess:
    """Start kubelet as ``system:node:<name>`` against the plane (not waited for Ready:
    ``cluster`` waits for the Node object)."""
    started = time.monotonic()
    root = settings.state_dir / "kubelet"
    for sub in ("root", "pki"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (settings.state_dir / "podlogs").mkdir(parents=True, exist_ok=True)
    config_path = root / "config.yaml"
    config_path.write_text(yaml.safe_dump(config(settings, plane.pki_dir / "ca.crt")))
    cert, key = plane.ca.issue(common_name=f"system:node:{settings.name}",
                               organizations=["system:nodes"], client=True)
    kubeconfig = write_kubeconfig(root / "kubelet.kubeconfig", server=plane.server,
                                  ca_pem=plane.ca.pem, cert_pem=cert, key_pem=key,
                                  user=f"system:node:{settings.name}")
    proc = plane.spawn(
        "kubelet",
        [str(find()), f"--config={config_path}", f"--kubeconfig={kubeconfig}",
         f"--root-dir={root / 'root'}", f"--cert-dir={root / 'pki'}",
         f"--hostname-override={settings.name}", f"--node-ip={settings.address}", "--v=2"],
        env=plane.child_env(),
        ready_check=lambda: http_ok("http://127.0.0.1:10248/healthz"),
        stop_timeout=20,
    )
    proc.wait_ready(60)
    plane.timed("kubelet", started)
    return proc
