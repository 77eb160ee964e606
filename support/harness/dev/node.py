"""``make dev`` (``python -m harness.dev``): rollgate as users run it, on a local node.

The node (harness.node: kubelet, containerd, a plane for pods) with rollgate installed by
its chart (release ``rollgate`` in ``rollgate-system``, the ``job`` certificate source,
the image the Dockerfile builds), next to the real Kargo (controller and its own
admission webhooks) and the real Argo Rollouts controller as processes on this host, and
the stand-in health endpoint the example template asks. Without the Kargo source tree,
or with ``--engine``, the release runs in engine mode and the promotion is played with
one ``kubectl patch``. It applies ``examples/`` into ``rollgate-demo``, prints what to
export and what to try, then streams the rollgate pods' logs until Ctrl-C or SIGTERM,
when the node stops and the host is restored.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from http.server import ThreadingHTTPServer

from harness import crds
from harness.dev.demo import (
    apply_examples,
    running,
    running_kargo,
    shell_lines,
    start_demo_health,
    start_kargo,
    start_rollouts,
    try_lines,
)
from harness.kits.node import (
    NAMESPACE,
    RECONCILER,
    Release,
    image_values,
    merged,
    pods,
)
from harness.node.cluster import NodeCluster
from harness.node.lock import NodeBusy
from harness.plane import PlaneError
from harness.process import ManagedProcess

PART_OF = "app.kubernetes.io/part-of=rollgate"


def reconciler_metrics(node: NodeCluster) -> str:
    """A command that reads a reconciler pod's metrics (pods' addresses are on the
    node's bridge, which this host reaches)."""
    found = [p for p in pods(node.plane, NAMESPACE, RECONCILER)
             if p.get("status", {}).get("podIP")]
    if not found:
        return "curl -s http://<reconciler pod IP>:8080/metrics"
    return f"curl -s http://{found[0]['status']['podIP']}:8080/metrics"


def banner(node: NodeCluster, release: Release, *, kargo_proc: ManagedProcess | None,
           rollouts: ManagedProcess | None) -> str:
    plane = node.plane
    mode = "observe" if kargo_proc else "engine"
    lines = [
        "",
        f"rollgate runs on a local node ({node.settings.name}, {node.settings.address}): "
        f"helm release {release.name} in {release.namespace}, image "
        f"{node.images.rollgate.name}, reconciler in {mode} mode; logs in {plane.logs_dir}.",
        f"kargo controller: {running_kargo(kargo_proc)}",
        f"argo rollouts controller: {running(rollouts)}",
        f"  kubectl get pods -n {release.namespace}        # 2 webhook + 2 reconciler pods",
        "",
        *shell_lines(kubeconfig=plane.kubeconfig, kubectl_dir=plane.binaries.kubectl.parent),
        "",
        *try_lines(observe=kargo_proc is not None, reconciler_metrics=reconciler_metrics(node)),
        "",
        "Ctrl-C stops everything and restores the host.",
        "",
    ]
    return "\n".join(lines)


def follow_pods(node: NodeCluster) -> subprocess.Popen[bytes]:
    """``kubectl logs -f`` of every rollgate pod, prefixed with the pod's name."""
    return subprocess.Popen(
        [str(node.plane.binaries.kubectl), f"--kubeconfig={node.plane.kubeconfig}", "logs",
         "-f", "--prefix", "-n", NAMESPACE, "-l", PART_OF, "--max-log-requests=10",
         "--tail=5"], stdin=subprocess.DEVNULL)


def main(args: argparse.Namespace) -> int:
    """The node playground (``args``: ``engine``)."""
    # Ctrl-C and SIGTERM alike end the wait, so the node stops in order.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    node = NodeCluster(crds=crds.for_plane(), verbose=True)
    health: ThreadingHTTPServer | None = None
    logs: subprocess.Popen[bytes] | None = None
    try:
        node.start()
        plane = node.plane
        kargo_proc = None if args.engine else start_kargo(plane)
        values = image_values(node.images.rollgate)
        if kargo_proc is None:
            values = merged(values, {"reconciler": {"stageVerification": "engine"}})
        release = Release(node)
        release.install(values)
        rollouts = start_rollouts(plane)
        health = start_demo_health()
        apply_examples(plane, kargo_project=kargo_proc is not None)
        print(banner(node, release, kargo_proc=kargo_proc, rollouts=rollouts), flush=True)
        logs = follow_pods(node)
        while True:
            dead = [p for p in plane.processes if not p.alive()]
            if dead:
                print(f"[dev] {dead[0].name} exited; see {dead[0].log_path}", file=sys.stderr)
                return 1
            time.sleep(0.5)
    except KeyboardInterrupt:
        print("\n[dev] stopping (the node, then the host restored)", file=sys.stderr)
        return 0
    except (PlaneError, NodeBusy, AssertionError) as err:
        print(f"[dev] {err}", file=sys.stderr)
        return 1
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if logs is not None:
            logs.terminate()
        if health is not None:
            health.shutdown()
        node.stop()
