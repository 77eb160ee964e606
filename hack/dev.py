"""``make dev``: a local rollgate playground on a real control plane.

Brings up etcd, kube-apiserver, kube-controller-manager, the webhook (registered by
URL), the real Argo Rollouts controller (AnalysisRuns only) and, what users run in
production, the real Kargo controller with rollgate's reconciler in observe mode (Kargo
verifies, rollgate reports) in ``.dev/``, plus the small HTTP service the example
AnalysisTemplate's ``web`` metric asks. Without the Kargo source tree (README,
"Set-up"), or with ``--engine``, rollgate is the verifier instead (engine mode) and the
promotion is played with one ``kubectl patch``. It applies ``examples/`` into namespace
``rollgate-demo``, prints what to export and what to try, then streams the webhook and
reconciler logs until Ctrl-C or SIGTERM, when everything is torn down.

The reconciler is started but not required: if it is missing or crashes, the
playground still serves admission and says so.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import sys
import threading
import time
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import controlplane
import kargo
import upstream

REPO = controlplane.REPO_ROOT
DEMO_NAMESPACE = "rollgate-demo"
# The example Freight (examples/freight.yaml) and the Stage it is promoted to.
DEMO_FREIGHT = {"guestbook": "58d3126f07ef3d5e76627ad80656f5feaed3c19a"}
DEMO_STAGE = "test"
# examples/analysistemplate.yaml's web metric asks this address (a Stage arg).
DEMO_HEALTH_PORT = 18089


class DemoHealth(BaseHTTPRequestHandler):
    """The guestbook's stand-in health endpoint: ``{"status": "ok"}`` (edit nothing:
    the example template succeeds on it)."""

    def do_GET(self) -> None:
        body = json.dumps({"status": "ok", "path": self.path}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def start_demo_health() -> ThreadingHTTPServer | None:
    try:
        server = ThreadingHTTPServer(("127.0.0.1", DEMO_HEALTH_PORT), DemoHealth)
    except OSError as err:
        print(f"[dev] cannot serve the demo health endpoint on 127.0.0.1:{DEMO_HEALTH_PORT}"
              f" ({err}); verifications of the example Stage will end in Error",
              file=sys.stderr)
        return None
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def promote_command(ns: str) -> str:
    """Engine mode: the command that plays Kargo finishing a promotion of the example
    Freight."""
    patch = kargo.promotion_patch_json(None, DEMO_FREIGHT, promotion="test.demo")
    return (f"kubectl patch -n {ns} stage {DEMO_STAGE} --subresource=status --type=merge "
            f"-p {shlex.quote(patch)}")


def follow(path: Path, prefix: str, stop: threading.Event) -> None:
    """Print new lines of ``path`` with ``prefix`` until ``stop`` is set."""
    while not path.exists() and not stop.is_set():
        time.sleep(0.2)
    with open(path, errors="replace") as f:
        while not stop.is_set():
            line = f.readline()
            if line:
                print(f"{prefix} {line}", end="", flush=True)
            else:
                time.sleep(0.2)


def claim(work_dir: Path) -> bool:
    """One `make dev` per work dir: a second one would wipe the first one's etcd."""
    work_dir.mkdir(parents=True, exist_ok=True)
    pid_file = work_dir / "dev.pid"
    with contextlib.suppress(OSError, ValueError):
        other = int(pid_file.read_text())
        if other != os.getpid() and Path(f"/proc/{other}").exists():
            print(f"[dev] already running in {work_dir} (pid {other}); stop it first",
                  file=sys.stderr)
            return False
    pid_file.write_text(str(os.getpid()))
    return True


def apply_examples(plane: controlplane.ControlPlane, *, kargo_project: bool) -> None:
    if kargo_project:
        plane.project_namespace(DEMO_NAMESPACE)  # Kargo's webhooks admit only Projects
        # Kargo's webhook admits the example Freight only once its Warehouse exists.
        plane.kubectl("apply", "-n", DEMO_NAMESPACE, "-f",
                      str(REPO / "examples" / "kargo" / "warehouse.yaml"))
    else:
        plane.kubectl("create", "namespace", DEMO_NAMESPACE, check=False)
    result = plane.kubectl(
        "apply", "-n", DEMO_NAMESPACE, "-f", str(REPO / "examples"), check=False
    )
    print(result.stdout, end="")
    if result.returncode != 0:
        print(f"[dev] applying examples/ failed:\n{result.stderr}", file=sys.stderr)
    elif result.stderr.strip():
        print(result.stderr, end="", file=sys.stderr)


def start_kargo(plane: controlplane.ControlPlane) -> controlplane.ManagedProcess | None:
    """The real Kargo controller and Kargo's own webhooks (they complete the example
    Promotion: its owner, the Stage, is what wakes Kargo), when the tree and binary are
    there."""
    try:
        plane.start_kargo_webhooks()
        return plane.start_kargo_controller()
    except upstream.UpstreamMissing as err:
        print(f"[dev] no Kargo controller: {err}\n[dev] rollgate verifies the Stages itself "
              "(engine mode)", file=sys.stderr)
    except controlplane.ControlPlaneError as err:
        print(f"[dev] the Kargo controller did not start; rollgate verifies the Stages "
              f"itself (engine mode).\n{err}", file=sys.stderr)
    return None


def start_reconciler(plane: controlplane.ControlPlane, *,
                     mode: str) -> controlplane.ManagedProcess | None:
    try:
        # Production defaults (all namespaces, leader election on); engine only where no
        # Kargo controller runs.
        proc = plane.start_reconciler(f"--stage-verification={mode}")
        proc.wait_ready(30)
        return proc
    except controlplane.ControlPlaneError as err:
        print(f"[dev] the reconciler did not start; admission still works.\n{err}",
              file=sys.stderr)
        return None


def start_rollouts(plane: controlplane.ControlPlane) -> controlplane.ManagedProcess | None:
    try:
        return plane.start_rollouts_controller()
    except controlplane.ControlPlaneError as err:
        print(f"[dev] the Argo Rollouts controller did not start; runs will not execute.\n"
              f"{err}", file=sys.stderr)
        return None


def running(proc: controlplane.ManagedProcess | None) -> str:
    return f"running (metrics: {proc.url}/metrics)" if proc else "NOT running (see above)"


def running_kargo(proc: controlplane.ManagedProcess | None) -> str:
    return f"running (log: {proc.log_path})" if proc else "not running (engine mode)"


def promotion_lines(plane: controlplane.ControlPlane, ns: str, rel: Path,
                    kargo_proc: controlplane.ManagedProcess | None,
                    reconciler: controlplane.ManagedProcess | None) -> list[str]:
    """What to try for a promotion: a real Promotion next to the real Kargo, or the
    played one in engine mode."""
    if kargo_proc is None:
        return [
            "  # Kargo finishes promoting the example Freight to Stage `test` (this plays it):",
            f"  {promote_command(ns)}",
            "  # rollgate starts an AnalysisRun; the real Argo Rollouts controller runs it:",
        ]
    metrics = f"{reconciler.url}/metrics" if reconciler else "<reconciler>/metrics"
    return [
        "  # Promote the example Freight to Stage `test`: the real Kargo runs the Promotion,",
        "  # then creates the AnalysisRun, which the real Argo Rollouts controller runs:",
        f"  kubectl create -n {ns} -f {rel}/kargo/promotion.yaml",
        f"  kubectl get -n {ns} promotions",
        f"  # rollgate (observe mode) reports Kargo's verification: curl -s {metrics} "
        "| grep rollgate_verifications",
    ]


def banner(plane: controlplane.ControlPlane, reconciler: controlplane.ManagedProcess | None,
           rollouts: controlplane.ManagedProcess | None,
           kargo_proc: controlplane.ManagedProcess | None = None) -> str:
    kubectl_dir = plane.binaries.kubectl.parent
    ns = DEMO_NAMESPACE
    examples = REPO / "examples"
    rel = examples.relative_to(Path.cwd()) if examples.is_relative_to(Path.cwd()) else examples
    lines = [
        "",
        "rollgate dev control plane is up "
        f"(started in {plane.timings.get('total', 0):.1f}s; logs in {plane.logs_dir}).",
        f"kargo controller: {running_kargo(kargo_proc)}",
        f"reconciler ({'observe' if kargo_proc else 'engine'} mode): {running(reconciler)}",
        f"argo rollouts controller: {running(rollouts)}",
        f"webhook metrics: {plane.webhook_url}/metrics "
        f"(TLS, CA in {plane.work_dir}/webhook-certs/ca.crt)",
        "",
        "In another shell:",
        f"  export KUBECONFIG={shlex.quote(str(plane.kubeconfig))}",
        f"  export PATH={shlex.quote(str(kubectl_dir))}:$PATH   # kubectl matching the server",
        f"  source {shlex.quote(str(REPO / '.venv' / 'bin' / 'activate'))}"
        "   # rollgate and kubectl-rollgate",
        "",
        "Try:",
        f"  kubectl apply -n {ns} -f {rel}/invalid/stage.yaml            # denied, every path",
        f"  kubectl apply -n {ns} -f {rel}/invalid/rolloutmanager.yaml   # denied, every path",
        f"  kubectl apply -n {ns} -f {rel}/defaulting/                   # defaulted + warnings",
        "  # plugins: the digest pre-flight downloads each https plugin before anything is"
        " written;",
        "  # with no route to github.com here that is PluginsSynced=False DownloadFailed and",
        "  # argo-rollouts-config left as it was:",
        f"  kubectl get -n {ns} rolloutmanager argo-rollouts "
        "-o jsonpath='{.status.conditions[0].message}'",
        *promotion_lines(plane, ns, rel, kargo_proc, reconciler),
        f"  kubectl get -n {ns} analysisruns",
        f"  kubectl wait -n {ns} stage/{DEMO_STAGE} --for=condition=Verified --timeout=60s",
        f"  kubectl get -n {ns} stage {DEMO_STAGE} -o yaml  # verificationHistory",
        f"  kubectl rollgate explain stage {DEMO_STAGE} -n {ns}   # all of it as one timeline",
        f"  kubectl get -n {ns} freight -o jsonpath='{{.items[*].status.verifiedIn}}'",
        "",
        "Ctrl-C stops everything.",
        "",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", type=Path, default=REPO / ".dev")
    parser.add_argument("--no-reconciler", action="store_true")
    parser.add_argument("--engine", action="store_true",
                        help="no Kargo controller: rollgate verifies (engine mode) and the "
                             "promotion is played with kubectl patch")
    args = parser.parse_args(argv)

    # Started in the background by a non-interactive shell, SIGINT arrives ignored;
    # Ctrl-C (or `kill -INT`) must always tear down.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if not claim(args.work_dir):
        return 1
    plane = controlplane.ControlPlane(work_dir=args.work_dir, verbose=True)
    stop = threading.Event()
    health: ThreadingHTTPServer | None = None
    try:
        plane.start()
        kargo_proc = None if args.no_reconciler or args.engine else start_kargo(plane)
        mode = "engine" if kargo_proc is None else "observe"
        reconciler = None if args.no_reconciler else start_reconciler(plane, mode=mode)
        rollouts = None if args.no_reconciler else start_rollouts(plane)
        health = start_demo_health()
        apply_examples(plane, kargo_project=kargo_proc is not None)
        print(banner(plane, reconciler, rollouts, kargo_proc), flush=True)
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
    except controlplane.ControlPlaneError as err:
        print(f"[dev] {err}", file=sys.stderr)
        return 1
    finally:
        # A second Ctrl-C must not cut the teardown short.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        stop.set()
        if health is not None:
            health.shutdown()
        plane.stop()


if __name__ == "__main__":
    sys.exit(main())
