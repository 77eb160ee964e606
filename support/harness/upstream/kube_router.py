"""kube-router's firewall on the node: the NetworkPolicy controller that makes the
node's policies take effect, for the tests that prove what a policy lets through.

The node's CNI (the bridge plugin alone) enforces no NetworkPolicy. kube-router
(hack/kube-router, built by ``make k8s``) runs here with the flags of its own
``daemonset/kube-router-firewall-daemonset.yaml`` (``--run-router=false
--run-firewall=true --run-service-proxy=false``) as a process on the host, as its user
guide's "running as agent" runs it (the DaemonSet is a host-network, privileged pod
doing the same; its init container would install kube-router's own CNI configuration,
which the node does not use). What a user sets for their cluster is set for the node's:
``--service-cluster-ip-range`` (the API server's) and ``--hostname-override`` (the
node's name, the DaemonSet's ``NODE_NAME``). Its health port is a free one. Its proxy
is never run (docs/development.md "NetworkPolicies on the node").

Traffic between pods on the node's bridge passes the iptables chains only with
``net.bridge.bridge-nf-call-iptables`` at 1, which kubeadm's preflight requires of every
node (and the default where the kernel has bridge netfilter built in, as here):
``running_firewall`` sets it for the test where it is 0 and puts it back after.

``running_firewall`` starts it for one test and, on the way out, stops it, runs
``kube-router --cleanup-config`` (the cleanup its user guide names) and then removes
what that release's cleanup leaves (harness.node.restore: its chains and IP sets that
the node's record did not have), so a later test's pods meet no stale rule.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from harness import versions
from harness.node import restore
from harness.node.cluster import NodeCluster
from harness.node.hoststate import iptables_rules, sysctl_path
from harness.paths import binary
from harness.process import ManagedProcess, free_port, http_ok

NAME = "kube-router"
# kube-router's top-level chain for the pods' traffic (pkg/controllers/netpol).
FORWARD_CHAIN = "KUBE-ROUTER-FORWARD"
BRIDGED = sysctl_path("net.bridge.bridge-nf-call-iptables")


def kube_router_binary() -> Path:
    return binary(NAME, f"kube-router-{versions.get('KUBE_ROUTER_VERSION')}")


def args(node: NodeCluster, *, health_port: int) -> list[str]:
    """The firewall DaemonSet's flags, with the cluster's values a user sets."""
    return [str(kube_router_binary()), "--run-router=false", "--run-firewall=true",
            "--run-service-proxy=false", f"--kubeconfig={node.plane.kubeconfig}",
            f"--hostname-override={node.settings.name}",
            f"--service-cluster-ip-range={node.settings.profile.service_range}",
            f"--health-port={health_port}"]


def has_chain(name: str) -> bool:
    """kube-router has declared the chain ``name`` (in any table) on the host."""
    return any(line.startswith(f":{name} ") or line == f":{name}"
               for line in iptables_rules("ipv4"))


def filters(pod_ip: str) -> bool:
    """kube-router has a rule for the pod at ``pod_ip`` (its traffic goes through the
    pod's firewall chain)."""
    return any(f"{pod_ip}/32" in line for line in iptables_rules("ipv4"))


@contextmanager
def running_firewall(node: NodeCluster) -> Iterator[ManagedProcess]:
    """kube-router's firewall on ``node`` until the block ends (see the module)."""
    bridged = BRIDGED.read_text().strip()
    if bridged != "1":
        BRIDGED.write_text("1")
    port = free_port()
    proc = node.plane.spawn(
        NAME, args(node, health_port=port), env=node.plane.child_env(),
        ready_check=lambda: http_ok(f"http://127.0.0.1:{port}/healthz")
        and has_chain(FORWARD_CHAIN))
    try:
        proc.wait_ready(120)
        yield proc
    finally:
        node.plane.stop_process(proc)
        subprocess.run([str(kube_router_binary()), "--cleanup-config"], capture_output=True,
                       timeout=120, check=False)
        restore.remove_chains(node.baseline, owned=restore.kube_router_chain, say=node.say)
        restore.remove_sets(node.baseline, node.say)
        if bridged != "1":
            BRIDGED.write_text(bridged)
