"""``make dev --host`` (``python -m harness.dev --host``): the playground with rollgate's
processes on the host, for fast iteration on its code (no image to rebuild).

Brings up etcd, kube-apiserver, kube-controller-manager, the webhook (registered by
URL), the real Argo Rollouts controller (AnalysisRuns only) and the real Kargo controller
with rollgate's reconciler in observe mode, in ``.dev/``, plus the stand-in health
endpoint. Without the Kargo source tree, or with ``--engine``, rollgate is the verifier
(engine mode) and the promotion is played with one ``kubectl patch``. It applies
``examples/`` into namespace ``rollgate-demo``, prints what to export and what to try,
then streams the webhook and reconciler logs until Ctrl-C or SIGTERM, when everything
is torn down. The reconciler is started but not required: if it is missing or crashes,
the playground still serves admission and says so.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from contextlib import ExitStack
from http.server import ThreadingHTTPServer
from pathlib import Path

from harness import crds
from harness.dev.demo import (
    DEMO_HEALTH_PORT,
    DEMO_NAMESPACE,
    Step,
    admission_steps,
    apply_examples,
    claim,
    follow,
    running,
    running_kargo,
    shell_lines,
    start_demo_health,
    start_kargo,
    start_rollouts,
    try_lines,
    verification_steps,
)
from harness.host_rollgate import HostRollgate
from harness.paths import REPO_ROOT as REPO
from harness.plane import ControlPlane, PlaneError
from harness.process import ManagedProcess


def start_reconciler(rollgate: HostRollgate, *,
                     mode: str) -> ManagedProcess | None:
    try:
        # Production defaults (all namespaces, leader election on); engine only where no
        # Kargo controller runs.
        proc = rollgate.start_reconciler(f"--stage-verification={mode}")
        proc.wait_ready(30)
        return proc
    except PlaneError as err:
        print(f"[dev] the reconciler did not start; admission still works.\n{err}",
              file=sys.stderr)
        return None


def banner(rollgate: HostRollgate, reconciler: ManagedProcess | None,
           rollouts: ManagedProcess | None,
           kargo_proc: ManagedProcess | None = None) -> str:
    plane = rollgate.plane
    metrics = (f"curl -s {reconciler.url}/metrics" if reconciler
               else "curl -s <reconciler>/metrics")
    lines = [
        "",
        "rollgate dev control plane is up "
        f"(started in {plane.timings.get('plane', 0):.1f}s; logs in {plane.logs_dir}).",
        f"kargo controller: {running_kargo(kargo_proc)}",
        f"reconciler ({'observe' if kargo_proc else 'engine'} mode): {running(reconciler)}",
        f"argo rollouts controller: {running(rollouts)}",
        f"webhook metrics: {rollgate.webhook_url}/metrics "
        f"(TLS, CA in {rollgate.certificates().ca_cert})",
        "",
        *shell_lines(kubeconfig=plane.kubeconfig, kubectl_dir=plane.binaries.kubectl.parent),
        "",
        *try_lines(steps(observe=kargo_proc is not None, reconciler_metrics=metrics),
                   comments=PLUGINS_COMMENT),
        "",
        "Ctrl-C stops everything.",
        "",
    ]
    return "\n".join(lines)


HEALTH = f"127.0.0.1:{DEMO_HEALTH_PORT}"
# Stand-ins for what runs in pods on a cluster (no kubelet here).
STAND_INS = (REPO / "examples" / "host" / "argo-rollouts.yaml",)
PLUGINS_COMMENT = {3: "plugins: the digest pre-flight downloads each https plugin before "
                      "anything is written;\nwith no route to github.com here that is "
                      "PluginsSynced=False DownloadFailed and\nargo-rollouts-config left "
                      "as it was (`make dev` on the node serves the plugin itself):"}


def steps(*, observe: bool, reconciler_metrics: str) -> list[Step]:
    return [
        *admission_steps(),
        Step(f"kubectl get -n {DEMO_NAMESPACE} rolloutmanager argo-rollouts "
             "-o jsonpath='{.status.conditions[0].message}'"),
        *verification_steps(observe=observe, reconciler_metrics=reconciler_metrics),
    ]


def main(args: argparse.Namespace) -> int:
    """The host playground (``args``: ``work_dir``, ``engine``, ``no_reconciler``)."""
    # Started in the background by a non-interactive shell, SIGINT arrives ignored;
    # Ctrl-C (or `kill -INT`) must always tear down.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if not claim(Path(args.work_dir)):
        return 1
    plane = ControlPlane(work_dir=Path(args.work_dir), crds=crds.for_plane(), verbose=True)
    rollgate = HostRollgate(plane)
    stop = threading.Event()
    health: ThreadingHTTPServer | None = None
    kargo_stack = ExitStack()
    try:
        plane.start()
        rollgate.start()
        kargo_proc = (None if args.no_reconciler or args.engine
                      else start_kargo(plane, kargo_stack))
        mode = "engine" if kargo_proc is None else "observe"
        reconciler = None if args.no_reconciler else start_reconciler(rollgate, mode=mode)
        rollouts = None if args.no_reconciler else start_rollouts(plane)
        health = start_demo_health("127.0.0.1")
        apply_examples(plane, kargo_project=kargo_proc is not None, health=HEALTH,
                       extra=STAND_INS)
        print(banner(rollgate, reconciler, rollouts, kargo_proc), flush=True)
        followed = [("[webhook]", plane.logs_dir / "webhook.log")]
        if reconciler is not None:
            followed.append(("[reconciler]", reconciler.log_path))
        for prefix, path in followed:
            threading.Thread(target=follow, args=(path, prefix, stop), daemon=True).start()
        core = [p for p in plane.processes if p not in (reconciler, rollouts, kargo_proc)]
        while True:
            dead = [p for p in core if not p.alive()]
            if dead:
                print(f"[dev] {dead[0].name} exited; see {dead[0].log_path}", file=sys.stderr)
                return 1
            if reconciler is not None and not reconciler.alive():
                print(f"[dev] the reconciler exited; see {reconciler.log_path}",
                      file=sys.stderr)
                reconciler = None
            time.sleep(0.5)
    except KeyboardInterrupt:
        print("\n[dev] stopping", file=sys.stderr)
        return 0
    except PlaneError as err:
        print(f"[dev] {err}", file=sys.stderr)
        return 1
    finally:
        # A second Ctrl-C must not cut the teardown short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop.set()
        if health is not None:
            health.shutdown()
        kargo_stack.close()
        plane.stop()

