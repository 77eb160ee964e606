"""Undo what a node changed on the host, and only that: after a clean stop, and at the
next start after a killed run (the kernel ends the node's own processes with the
harness, but containerd's shims, the pods' processes, mounts, network namespaces, the
bridge, kubelet's and kube-router's firewall chains, kube-router's IP sets, cgroups and
tunables outlive it).

Everything is compared with the ``HostState`` recorded before the node first started:
a chain, IP set, link, cgroup or path that existed then is left alone, a tunable goes
back to its recorded value. Processes are ended only when their command line names the node's
own directory (so a reused PID is never hit), or when they sit in a cgroup the node
created.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from harness.node.hoststate import (
    CGROUP_ROOT,
    OUTSIDE_PATHS,
    HostState,
    capture,
    differences,
    ipsets,
    iptables_rules,
    mounts,
    sysctl_path,
)
from harness.node.settings import NodeSettings

# The cgroups kubelet (cgroupfs driver, cgroups per QoS class) and containerd make.
NODE_CGROUPS = ("kubepods", "k8s.io")
# kubelet's chains (pkg/kubelet/kubelet_network_linux.go) in the tables it touches.
KUBELET_CHAINS = ("KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT",
                  "KUBE-NODE-PORT", "KUBE-PROXY-CANARY")
# kube-router's firewall (pkg/controllers/netpol): its top-level chains, one per pod and
# one per policy; and its IP sets (pkg/utils/ipset.go: IPv6 sets carry "inet6:").
KUBE_ROUTER_CHAIN_PREFIXES = ("KUBE-ROUTER-", "KUBE-POD-FW-", "KUBE-NWPLCY-")
KUBE_ROUTER_SET_PREFIXES = ("KUBE-SRC-", "KUBE-DST-", "TMP-", "inet6:")


def kubelet_chain(name: str) -> bool:
    return name in KUBELET_CHAINS


def kube_router_chain(name: str) -> bool:
    return name.startswith(KUBE_ROUTER_CHAIN_PREFIXES)

Say = Callable[[str], None]


def _quiet(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def _all_pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _kill_and_wait(pids: set[int], timeout: float = 10.0) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while pids and time.monotonic() < deadline:
        pids = {p for p in pids if Path(f"/proc/{p}").exists()
                and "Z" not in (_stat_state(p) or "Z")}
        time.sleep(0.1)


def _stat_state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def node_processes(settings: NodeSettings) -> set[int]:
    """Live processes whose command line names the node's directory (containerd, its
    shims, kubelet, the plane's processes of this node), never this process."""
    needle = str(settings.state_dir)
    me = os.getpid()
    return {pid for pid in _all_pids() if pid != me and needle in _cmdline(pid)}


def _cgroup_dirs(baseline: HostState) -> list[Path]:
    """The node's cgroup directories that were not there before, deepest first."""
    found: list[Path] = []
    if not CGROUP_ROOT.is_dir():
        return found
    for hierarchy in CGROUP_ROOT.iterdir():
        for name in NODE_CGROUPS:
            top = hierarchy / name
            if f"{hierarchy.name}/{name}" in baseline.cgroups or not top.is_dir():
                continue
            found += [Path(root) for root, _, _ in os.walk(top)]
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


def cgroup_processes(baseline: HostState) -> set[int]:
    """Processes in cgroups the node created: the pods' and the containers'."""
    pids: set[int] = set()
    for directory in _cgroup_dirs(baseline):
        with contextlib.suppress(OSError):
            pids |= {int(x) for x in (directory / "cgroup.procs").read_text().split()}
    return pids - {os.getpid()}


def end_processes(settings: NodeSettings, baseline: HostState, say: Say) -> None:
    pids = node_processes(settings) | cgroup_processes(baseline)
    if pids:
        say(f"ending {len(pids)} leftover processes of the node")
        _kill_and_wait(pids)


def unmount_under(directory: Path, say: Say) -> None:
    """Every mount at or below ``directory``, deepest first (network namespaces, shm,
    overlay root filesystems, kubelet's volumes); lazily when busy."""
    prefix = str(directory).rstrip("/") + "/"
    for _ in range(3):
        points = [m for m in mounts() if m.startswith(prefix) or m == str(directory)]
        if not points:
            return
        for point in sorted(points, key=len, reverse=True):
            if _quiet("umount", point).returncode != 0:
                _quiet("umount", "-l", point)
        say(f"unmounted {len(points)} mounts under {directory}")


def remove_links(settings: NodeSettings, baseline: HostState, say: Say) -> None:
    """The veths left on the bridge, then the bridge (never one that was there before)."""
    if settings.bridge in baseline.links:
        return
    out = _quiet("ip", "-o", "link", "show", "master", settings.bridge).stdout
    for line in out.splitlines():
        parts = line.split(": ", 2)
        if len(parts) >= 2:
            _quiet("ip", "link", "del", parts[1].split("@", 1)[0])
    if _quiet("ip", "link", "del", settings.bridge).returncode == 0:
        say(f"removed bridge {settings.bridge}")


def remove_cgroups(baseline: HostState) -> None:
    for directory in _cgroup_dirs(baseline):
        with contextlib.suppress(OSError):
            directory.rmdir()


def _chains(lines: list[str]) -> dict[str, set[str]]:
    """table -> chain names of a normalised ``iptables-save`` dump."""
    tables: dict[str, set[str]] = {}
    table = ""
    for line in lines:
        if line.startswith("*"):
            table = line[1:]
            tables.setdefault(table, set())
        elif line.startswith(":"):
            tables.setdefault(table, set()).add(line[1:].split()[0])
    return tables


def _jumps_to(lines: list[str], chains: set[str]) -> list[tuple[str, list[str]]]:
    """(table, rule) of every rule of a normalised dump that jumps or goes to one of
    ``chains``, as ``-A CHAIN ...`` arguments (kube-router's carry comments, so a rule is
    deleted by its whole spec)."""
    found = []
    table = ""
    for line in lines:
        if line.startswith("*"):
            table = line[1:]
        elif line.startswith("-A "):
            args = shlex.split(line)
            targets = {args[i + 1] for i, arg in enumerate(args[:-1]) if arg in ("-j", "-g")}
            if targets & chains:
                found.append((table, args[1:]))
    return found


def remove_chains(baseline: HostState, *, owned: Callable[[str], bool], say: Say) -> None:
    """The chains ``owned`` names that were not there before, in every table, with the
    rules that jump to them."""
    for family, tool in (("ipv4", "iptables"), ("ipv6", "ip6tables")):
        lines = iptables_rules(family)
        now = _chains(lines)
        before = _chains(baseline.iptables.get(family, []))
        ours = {table: sorted(c for c in chains - before.get(table, set()) if owned(c))
                for table, chains in now.items()}
        for table, rule in _jumps_to(lines, {c for names in ours.values() for c in names}):
            _quiet(tool, "-t", table, "-D", *rule)
        for table, chains in ours.items():
            for chain in chains:
                _quiet(tool, "-t", table, "-F", chain)
            for chain in chains:
                _quiet(tool, "-t", table, "-X", chain)
            if chains:
                say(f"removed {family} {table} chains {', '.join(chains)}")


def remove_sets(baseline: HostState, say: Say) -> None:
    """kube-router's IP sets that were not there before (once no rule uses them)."""
    sets = [name for name in ipsets()
            if name not in baseline.ipsets and name.startswith(KUBE_ROUTER_SET_PREFIXES)]
    for name in sets:
        _quiet("ipset", "destroy", name)
    if sets:
        say(f"removed {len(sets)} IP sets")


def restore_firewall(baseline: HostState, say: Say) -> None:
    """kubelet's and kube-router's chains (and the jumps to them) and kube-router's IP
    sets, where they were not before; then the nftables tables iptables-nft created for
    them, when the host had none of them."""
    remove_chains(baseline, owned=lambda c: kubelet_chain(c) or kube_router_chain(c), say=say)
    remove_sets(baseline, say)
    before_tables = {line.removesuffix("{").strip() for line in baseline.nft
                     if line.startswith("table ")}
    for line in _quiet("nft", "list", "tables").stdout.splitlines():
        table = line.strip()
        if not table.startswith("table ") or table in before_tables:
            continue
        family_name = table.split()[1:]
        listed = _quiet("nft", "-j", "list", "table", *family_name).stdout
        # Only an empty table goes: one holding someone else's rules stays.
        with contextlib.suppress(ValueError):
            if not any("rule" in item for item in json.loads(listed).get("nftables", [])):
                _quiet("nft", "delete", "table", *family_name)
                say(f"removed nftables {table}")


def remove_paths(baseline: HostState, say: Say) -> None:
    for path in OUTSIDE_PATHS:
        if path not in baseline.paths and Path(path).exists():
            unmount_under(Path(path), say)
            _quiet("rm", "-rf", "--one-file-system", path)
            say(f"removed {path}")


def restore_sysctls(baseline: HostState, say: Say) -> None:
    for name, value in baseline.sysctls.items():
        path = sysctl_path(name)
        with contextlib.suppress(OSError):
            if value and path.read_text().strip() != value:
                path.write_text(value)
                say(f"sysctl {name} back to {value}")


def restore(settings: NodeSettings, baseline: HostState, *, say: Say = lambda _: None) -> None:
    """Undo every change of the node (see the module docstring), in an order that lets
    each step succeed: processes, mounts, links, cgroups, firewall, paths, tunables."""
    end_processes(settings, baseline, say)
    unmount_under(settings.state_dir, say)
    remove_links(settings, baseline, say)
    remove_cgroups(baseline)
    restore_firewall(baseline, say)
    remove_paths(baseline, say)
    restore_sysctls(baseline, say)


def leftovers(baseline: HostState) -> list[str]:
    """What still differs from ``baseline`` (empty after a complete restore)."""
    return differences(baseline, capture())
