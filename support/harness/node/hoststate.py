"""What the node may change on the host, recorded before it starts and compared after it
stops: kernel tunables, network links, mounts, cgroups, the firewall rulesets, the IP
sets (kube-router's firewall, harness.upstream.kube_router) and the paths outside its
own directory that kubelet, containerd, CNI and buildah write.

``capture()`` reads the host (read-only: ``iptables-save``, ``nft list`` and ``ipset
list``, never a command that would create a table); ``differences()`` is pure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

# What kubelet sets at start, forwarding (which must stay as it was: pods are never
# routed beyond the bridge) and bridge netfilter (kube-router's firewall sets it).
SYSCTLS = (
    "vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes", "net.ipv4.ip_forward",
    "net.ipv6.conf.all.forwarding", "net.bridge.bridge-nf-call-iptables",
)
# Written outside the node's directory: kubelet's hard-coded device-plugins directory,
# libcni's result cache, CNI's and buildah's locks, containerd's shims and runc's state.
OUTSIDE_PATHS = (
    "/var/lib/kubelet", "/var/lib/cni", "/etc/cni", "/var/lib/containers",
    "/run/containers", "/run/containerd", "/run/runc", "/run/netns", "/var/log/pods",
    "/var/log/containers",
)
CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True, slots=True)
class HostState:
    sysctls: dict[str, str] = field(default_factory=dict)
    links: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)
    cgroups: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    iptables: dict[str, list[str]] = field(default_factory=dict)
    nft: list[str] = field(default_factory=list)
    ipsets: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> HostState:
        data = json.loads(text)
        return cls(**{k: data.get(k, v) for k, v in asdict(cls()).items()})


def sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def _run(*argv: str) -> str:
    if shutil.which(argv[0]) is None:
        return ""
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    return out.stdout


def iptables_lines(text: str) -> list[str]:
    """An ``iptables-save`` dump without comments and counters: tables, chains, rules."""
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith(":"):
            line = line.rsplit(" [", 1)[0]
        lines.append(line)
    return lines


def iptables_rules(family: str) -> list[str]:
    """The host's rules of ``family`` (``ipv4``, ``ipv6``), normalised (``iptables_lines``)."""
    return iptables_lines(_run("iptables-save" if family == "ipv4" else "ip6tables-save"))


def links() -> list[str]:
    """Network interface names (``ip -o link``), without the ``@peer`` suffix."""
    names = []
    for line in _run("ip", "-o", "link", "show").splitlines():
        parts = line.split(": ", 2)
        if len(parts) >= 2:
            names.append(parts[1].split("@", 1)[0])
    return sorted(names)


def mounts() -> list[str]:
    found = []
    for line in (_read(Path("/proc/self/mounts")) or "").splitlines():
        fields = line.split()
        if len(fields) >= 2:
            found.append(fields[1].replace("\\040", " "))
    return sorted(found)


def ipsets() -> list[str]:
    """The names of the kernel's IP sets (none where ``ipset`` is not installed)."""
    return sorted(_run("ipset", "list", "-n").split())


def cgroups() -> list[str]:
    """The top-level cgroups of each hierarchy, as ``<hierarchy>/<name>``."""
    found = []
    if CGROUP_ROOT.is_dir():
        for hierarchy in sorted(CGROUP_ROOT.iterdir()):
            if hierarchy.is_dir() and not hierarchy.is_symlink():
                found += [f"{hierarchy.name}/{d.name}" for d in sorted(hierarchy.iterdir())
                          if d.is_dir()]
    return found


def capture() -> HostState:
    return HostState(
        sysctls={name: _read(sysctl_path(name)) or "" for name in SYSCTLS},
        links=links(),
        mounts=mounts(),
        cgroups=cgroups(),
        paths=[p for p in OUTSIDE_PATHS if Path(p).exists()],
        iptables={family: iptables_rules(family) for family in ("ipv4", "ipv6")},
        nft=[line.strip() for line in _run("nft", "list", "ruleset").splitlines()
             if line.strip()],
        ipsets=ipsets(),
    )


def differences(before: HostState, after: HostState) -> list[str]:
    """What differs between two states, one line each (empty: the same host)."""
    found = [f"sysctl {name}: {before.sysctls.get(name)!r} -> {after.sysctls.get(name)!r}"
             for name in sorted(set(before.sysctls) | set(after.sysctls))
             if before.sysctls.get(name) != after.sysctls.get(name)]
    for what, old, new in (("link", before.links, after.links),
                           ("mount", before.mounts, after.mounts),
                           ("cgroup", before.cgroups, after.cgroups),
                           ("path", before.paths, after.paths),
                           ("nft", before.nft, after.nft),
                           ("ipset", before.ipsets, after.ipsets)):
        found += [f"{what} added: {x}" for x in sorted(set(new) - set(old))]
        found += [f"{what} gone: {x}" for x in sorted(set(old) - set(new))]
    for family in sorted(set(before.iptables) | set(after.iptables)):
        old, new = before.iptables.get(family, []), after.iptables.get(family, [])
        if old != new:
            found += [f"{family} rule added: {x}" for x in new if x not in old]
            found += [f"{family} rule gone: {x}" for x in old if x not in new]
    return found
