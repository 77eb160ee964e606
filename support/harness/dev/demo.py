"""What ``make dev`` shows, in both of its forms (on the node, and ``--host``): the demo
namespace with the examples, the stand-in health endpoint the example AnalysisTemplate's
``web`` metric asks, the real Kargo and Argo Rollouts controllers as processes, and the
lines of the banner that say what to try."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from harness.paths import REPO_ROOT as REPO
from harness.plane import ControlPlane, PlaneError
from harness.process import ManagedProcess
from harness.upstream import kargo, rollouts
from harness.upstream.trees import UpstreamMissing
from testkit import kargo_shapes

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
    patch = kargo_shapes.promotion_patch_json(None, DEMO_FREIGHT, promotion="test.demo")
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


def apply_examples(plane: ControlPlane, *, kargo_project: bool) -> None:
    if kargo_project:
        # Kargo's webhooks admit Kargo's kinds only in a Project's namespace: a Kargo
        # Project, as users make one (Kargo's webhook creates its namespace).
        kargo.create_project(plane, DEMO_NAMESPACE)
        # Kargo's webhook admits the example Freight only once its Warehouse exists.
        plane.kubectl("apply", "-n", DEMO_NAMESPACE, "-f",
                      str(REPO / "examples" / "kargo" / "warehouse.yaml"))
    else:
        plane.create_namespace(DEMO_NAMESPACE)
    result = plane.kubectl(
        "apply", "-n", DEMO_NAMESPACE, "-f", str(REPO / "examples"), check=False
    )
    print(result.stdout, end="")
    if result.returncode != 0:
        print(f"[dev] applying examples/ failed:\n{result.stderr}", file=sys.stderr)
    elif result.stderr.strip():
        print(result.stderr, end="", file=sys.stderr)


def start_kargo(plane: ControlPlane) -> ManagedProcess | None:
    """The real Kargo controller, Kargo's own webhooks (they complete the example
    Promotion: its owner, the Stage, is what wakes Kargo) and its management controller
    (it reconciles the demo's Project), as Kargo's chart runs them, when the tree and
    binary are there."""
    try:
        kargo.start_webhooks(plane)
        kargo.start_management_controller(plane)
        return kargo.start_controller(plane)
    except UpstreamMissing as err:
        print(f"[dev] no Kargo controller: {err}\n[dev] rollgate verifies the Stages itself "
              "(engine mode)", file=sys.stderr)
    except PlaneError as err:
        print(f"[dev] the Kargo controller did not start; rollgate verifies the Stages "
              f"itself (engine mode).\n{err}", file=sys.stderr)
    return None


def running(proc: ManagedProcess | None) -> str:
    return f"running (metrics: {proc.url}/metrics)" if proc else "NOT running (see above)"


def running_kargo(proc: ManagedProcess | None) -> str:
    return f"running (log: {proc.log_path})" if proc else "not running (engine mode)"


def examples_dir() -> Path:
    """``examples/`` as the user typed paths from here (relative when under the cwd)."""
    examples = REPO / "examples"
    return examples.relative_to(Path.cwd()) if examples.is_relative_to(Path.cwd()) else examples


def promotion_lines(*, observe: bool, reconciler_metrics: str) -> list[str]:
    """What to try for a promotion: a real Promotion next to the real Kargo (observe
    mode), or the played one in engine mode."""
    ns, rel = DEMO_NAMESPACE, examples_dir()
    if not observe:
        return [
            "  # Kargo finishes promoting the example Freight to Stage `test` (this plays it):",
            f"  {promote_command(ns)}",
            "  # rollgate starts an AnalysisRun; the real Argo Rollouts controller runs it:",
        ]
    return [
        "  # Promote the example Freight to Stage `test`: the real Kargo runs the Promotion,",
        "  # then creates the AnalysisRun, which the real Argo Rollouts controller runs:",
        f"  kubectl create -n {ns} -f {rel}/kargo/promotion.yaml",
        f"  kubectl get -n {ns} promotions",
        f"  # rollgate (observe mode) reports Kargo's verification: {reconciler_metrics} "
        "| grep rollgate_verifications",
    ]


def try_lines(*, observe: bool, reconciler_metrics: str) -> list[str]:
    """The banner's "Try:" part, the same for the node and for ``--host``."""
    ns, rel = DEMO_NAMESPACE, examples_dir()
    return [
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
        *promotion_lines(observe=observe, reconciler_metrics=reconciler_metrics),
        f"  kubectl get -n {ns} analysisruns",
        f"  kubectl wait -n {ns} stage/{DEMO_STAGE} --for=condition=Verified --timeout=60s",
        f"  kubectl get -n {ns} stage {DEMO_STAGE} -o yaml  # verificationHistory",
        f"  kubectl rollgate explain stage {DEMO_STAGE} -n {ns}   # all of it as one timeline",
        f"  kubectl get -n {ns} freight -o jsonpath='{{.items[*].status.verifiedIn}}'",
    ]


def shell_lines(*, kubeconfig: Path, kubectl_dir: Path) -> list[str]:
    return [
        "In another shell:",
        f"  export KUBECONFIG={shlex.quote(str(kubeconfig))}",
        f"  export PATH={shlex.quote(str(kubectl_dir))}:$PATH   # kubectl matching the server",
        f"  source {shlex.quote(str(REPO / '.venv' / 'bin' / 'activate'))}"
        "   # rollgate and kubectl-rollgate",
    ]


def start_rollouts(plane: ControlPlane) -> ManagedProcess | None:
    try:
        return rollouts.run_on(plane)
    except PlaneError as err:
        print(f"[dev] the Argo Rollouts controller did not start; runs will not execute.\n"
              f"{err}", file=sys.stderr)
        return None
