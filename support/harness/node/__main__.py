"""``python -m harness.node [--pod NAME]``: a node with a plane for pods, for poking at by
hand (``make dev`` installs rollgate on it); prints the kubeconfig line and waits for
Ctrl-C or SIGTERM, which stop everything and restore the host. ``--pod NAME`` first runs
a pod of rollgate's image that sleeps, and waits until it runs."""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import time
from collections.abc import Sequence

from harness import crds
from harness.node.cluster import NodeCluster
from harness.node.lock import NodeBusy
from harness.plane import PlaneError


def sleeper(name: str, image: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{
                "name": "sleep", "image": image, "imagePullPolicy": "Never",
                "command": ["python", "-c", "import time; time.sleep(3600)"],
                "securityContext": {"runAsUser": 65532, "runAsNonRoot": True,
                                    "readOnlyRootFilesystem": True}}]}}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.node",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--pod", metavar="NAME", help="run a sleeping pod first")
    args = parser.parse_args(argv)
    # Ctrl-C and SIGTERM alike end the wait below, so the node stops in order (pods
    # first, while kubelet runs) rather than by the harness's last-resort handler.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    node = NodeCluster(crds=crds.for_plane(), verbose=True)
    try:
        node.start()
    except (PlaneError, NodeBusy) as err:
        print(f"[node] {err}", file=sys.stderr)
        return 1
    dead: list[str] = []
    try:
        with contextlib.suppress(KeyboardInterrupt):
            if args.pod:
                node.plane.kubectl("apply", "-f", "-", input=json.dumps(
                    sleeper(args.pod, node.images.rollgate.name)))
                node.plane.kubectl("wait", "--for=condition=Ready", f"pod/{args.pod}",
                                   "--timeout=120s", timeout=130)
            print(f"export KUBECONFIG={node.plane.kubeconfig}", flush=True)
            while not dead:
                dead = [f"{p.name} ({p.log_path})" for p in node.plane.processes
                        if not p.alive()]
                time.sleep(1)
    finally:
        # A second Ctrl-C or SIGTERM must not cut the stop short: the host is restored.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        node.stop()
    if dead:
        print(f"[node] exited: {', '.join(dead)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
