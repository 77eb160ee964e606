"""containerd for the node: Debian's containerd with a private root, state and socket
under the node's directory, so it never meets the host's own (if any).

Settings, and why (measured on this kind of machine):

- ``restrict_oom_score_adj``: without CAP_SYS_RESOURCE runc cannot set a sandbox's
  ``oom_score_adj`` (-998) and every sandbox fails ("can't get final child's PID from
  pipe: EOF").
- ``SystemdCgroup = false``: kubelet uses the cgroupfs driver (no systemd here).
- The sandbox image is the locally made pause image (``harness.node.images``).
- Registries: every registry host resolves to ``127.0.0.1:1``, which refuses at once, so
  an image reference that was not overridden fails locally instead of trying to leave
  the machine (Argo Rollouts' ``quay.io/...``, the operator's default image). The one
  exception is the harness's own registry (``harness.registry``) on the bridge address:
  its ``hosts.toml`` names it with ``ca`` (its test CA; never ``skip_verify``), so the
  kubelet pulls from it over verified TLS, with the pod's ``imagePullSecrets``.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.node.network import cni_config
from harness.node.settings import NodeSettings
from harness.plane import ControlPlane
from harness.process import ManagedProcess

SANDBOX_IMAGE = "rollgate.local/pause:3.10"
REFUSING_REGISTRY = "https://127.0.0.1:1"
# Hosts image references name in the manifests rollgate's tests install (and the usual
# others); `_default` covers any other where containerd supports it.
REGISTRY_HOSTS = ("_default", "docker.io", "registry-1.docker.io", "ghcr.io", "quay.io",
                  "registry.k8s.io", "k8s.gcr.io", "gcr.io", "public.ecr.aws",
                  "mcr.microsoft.com")
CNI_BIN = Path("/usr/lib/cni")
RUNC = Path("/usr/sbin/runc")


class ContainerdError(RuntimeError):
    """containerd did not start, or ``ctr`` failed."""


def config(settings: NodeSettings) -> str:
    """containerd's config.toml (version 2) for the node."""
    root = settings.state_dir / "containerd"
    return f"""version = 2
root = "{root / 'root'}"
state = "{root / 'state'}"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]

[grpc]
  address = "{settings.containerd_socket}"

[ttrpc]
  address = "{settings.containerd_socket}.ttrpc"

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = "{root / 'opt'}"
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "{SANDBOX_IMAGE}"
    enable_selinux = false
    disable_apparmor = true
    restrict_oom_score_adj = true
    netns_mounts_under_state_dir = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
          BinaryName = "{RUNC}"
          Root = "{root / 'runc'}"
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "{CNI_BIN}"
      conf_dir = "{settings.state_dir / 'cni' / 'net.d'}"
      max_conf_num = 1
    [plugins."io.containerd.grpc.v1.cri".registry]
      config_path = "{root / 'certs.d'}"
"""


def refusing_hosts_toml() -> str:
    return (f'server = "{REFUSING_REGISTRY}"\n\n[host."{REFUSING_REGISTRY}"]\n'
            '  capabilities = ["pull", "resolve"]\n')


def trusted_hosts_toml(host: str, ca_file: Path) -> str:
    """A registry served over TLS whose certificate ``ca_file`` issued. containerd 1.6
    refuses a hosts.toml without a ``[host]`` table ("invalid `host` tree"), and tries
    ``server`` after the ``[host]`` entries: both carry the CA, else every not-found is
    tried again without it, and the x509 error of that try is what the pod's event shows."""
    return (f'server = "https://{host}"\nca = "{ca_file}"\n\n'
            f'[host."https://{host}"]\n  capabilities = ["pull", "resolve"]\n'
            f'  ca = "{ca_file}"\n')


def write_config(settings: NodeSettings, trusted: Mapping[str, Path] | None = None) -> Path:
    """config.toml, the registry hosts (refusing, but ``trusted``: host -> its CA file)
    and the CNI network list; returns config.toml."""
    root = settings.state_dir / "containerd"
    root.mkdir(parents=True, exist_ok=True)
    hosts = {host: refusing_hosts_toml() for host in REGISTRY_HOSTS}
    hosts.update({host: trusted_hosts_toml(host, ca) for host, ca in (trusted or {}).items()})
    for host, text in hosts.items():
        directory = root / "certs.d" / host
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "hosts.toml").write_text(text)
    net = settings.state_dir / "cni" / "net.d"
    net.mkdir(parents=True, exist_ok=True)
    (net / "10-rollgate-node.conflist").write_text(
        json.dumps(cni_config(settings, settings.state_dir / "cni" / "ipam"), indent=1))
    path = root / "config.toml"
    path.write_text(config(settings))
    return path


def ctr(settings: NodeSettings, *args: str, timeout: float = 300,
        check: bool = True) -> subprocess.CompletedProcess[str]:
    """``ctr`` against the node's containerd, in kubelet's namespace ``k8s.io``."""
    argv = ["ctr", "--address", str(settings.containerd_socket), "-n", "k8s.io", *args]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                             check=False)
    except subprocess.TimeoutExpired:
        out = subprocess.CompletedProcess(argv, 124, "", f"timed out after {timeout:.0f}s")
    if check and out.returncode != 0:
        raise ContainerdError(f"ctr {' '.join(args)}: {out.stderr.strip()}")
    return out


def start(plane: ControlPlane, settings: NodeSettings,
          trusted: Mapping[str, Path] | None = None) -> ManagedProcess:
    """Start containerd (a process of the plane: stopped with it) and wait until it
    answers; ``trusted`` registries as in :func:`write_config`."""
    started = time.monotonic()
    path = write_config(settings, trusted)
    proc = plane.spawn(
        "containerd", ["containerd", "--config", str(path)],
        env=plane.child_env(),
        ready_check=lambda: ctr(settings, "version", timeout=5, check=False).returncode == 0,
        stop_timeout=20,
    )
    proc.wait_ready(30)
    plane.timed("containerd", started)
    return proc


def import_images(settings: NodeSettings, archives: Sequence[Path]) -> None:
    """Import OCI archives into kubelet's namespace (their names as built)."""
    for archive in archives:
        ctr(settings, "images", "import", "--all-platforms", str(archive))


def remove_images(settings: NodeSettings, names: Sequence[str]) -> None:
    """Remove image names from kubelet's namespace: a pod that asks for one then finds
    no image (an image that cannot be pulled, with ``imagePullPolicy: Never``)."""
    ctr(settings, "images", "rm", *names)


def image_names(settings: NodeSettings) -> list[str]:
    return sorted(ctr(settings, "images", "ls", "-q").stdout.split())
