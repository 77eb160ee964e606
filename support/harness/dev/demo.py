"""What ``make dev`` shows, in both of its forms (on the node, and ``--host``): the demo
namespace with the examples, the stand-in health endpoint the example AnalysisTemplate's
``web`` metric asks, the real Kargo as processes, and the steps of the banner that say
what to try (:class:`Step`: each command with what it shows, so a test runs them as
printed)."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import threading
import time
from collections.abc import Collection
from contextlib import ExitStack
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from harness.kits.kargo import running_kargo as kargo_processes
from harness.paths import REPO_ROOT as REPO
from harness.plane import ControlPlane, PlaneError
from harness.process import ManagedProcess
from harness.upstream import kargo, rollouts
from harness.upstream.trees import UpstreamMissing
from testkit import kargo_shapes
from testkit.net import send_json

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
        send_json(self, 200, {"status": "ok", "path": self.path})

    def log_message(self, *args: object) -> None:
        pass


def start_demo_health(host: str) -> ThreadingHTTPServer | None:
    """The health endpoint on ``host`` (the node's bridge address, which Argo Rollouts'
    pods reach; 127.0.0.1 with ``--host``)."""
    try:
        server = ThreadingHTTPServer((host, DEMO_HEALTH_PORT), DemoHealth)
    except OSError as err:
        print(f"[dev] cannot serve the demo health endpoint on {host}:{DEMO_HEALTH_PORT}"
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


def apply_examples(plane: ControlPlane, *, kargo_project: bool, health: str,
                   skip: Collection[str] = (), extra: Collection[Path] = ()) -> None:
    """``examples/*.yaml`` (but ``skip``) and ``extra`` into the demo namespace (a Kargo
    Project with Kargo's webhooks); the example Stage asks the health endpoint at
    ``health`` (the file names the node's address; ``--host`` serves on 127.0.0.1)."""
    if kargo_project:
        # Kargo's webhooks admit Kargo's kinds only in a Project's namespace: a Kargo
        # Project, as users make one (Kargo's webhook creates its namespace).
        kargo.create_project(plane, DEMO_NAMESPACE)
        # Kargo's webhook admits the example Freight only once its Warehouse exists.
        plane.kubectl("apply", "-n", DEMO_NAMESPACE, "-f",
                      str(REPO / "examples" / "kargo" / "warehouse.yaml"))
    else:
        plane.create_namespace(DEMO_NAMESPACE)
    files = [f for f in sorted((REPO / "examples").glob("*.yaml")) if f.name not in skip]
    args = [a for f in (*files, *extra) for a in ("-f", str(f))]
    result = plane.kubectl("apply", "-n", DEMO_NAMESPACE, *args, check=False)
    print(result.stdout, end="")
    if result.returncode != 0:
        print(f"[dev] applying examples/ failed:\n{result.stderr}", file=sys.stderr)
    elif result.stderr.strip():
        print(result.stderr, end="", file=sys.stderr)
    point_stage_at(plane, health)


def point_stage_at(plane: ControlPlane, health: str) -> None:
    """The example Stage's ``service-name`` arg set to ``health`` when it says otherwise
    (said on stderr: the Stage then differs from its file)."""
    stage = plane.get_json("-n", DEMO_NAMESPACE, "stage", DEMO_STAGE)
    args = stage["spec"]["verification"]["args"]
    if args[0]["value"] == health:
        return
    plane.kubectl("patch", "-n", DEMO_NAMESPACE, "stage", DEMO_STAGE, "--type=json", "-p",
                  json.dumps([{"op": "replace", "path": "/spec/verification/args/0/value",
                               "value": health}]))
    print(f"[dev] stage/{DEMO_STAGE}: service-name set to {health}, where the health "
          "endpoint is served here", file=sys.stderr)


def start_kargo(plane: ControlPlane, stack: ExitStack) -> ManagedProcess | None:
    """The real Kargo controller, Kargo's own webhooks (they complete the example
    Promotion: its owner, the Stage, is what wakes Kargo) and its management controller
    (it reconciles the demo's Project), as Kargo's chart runs them, when the tree and
    binary are there; stopped when ``stack`` closes."""
    try:
        return stack.enter_context(kargo_processes(plane, webhooks=True))
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


@dataclass(frozen=True)
class Step:
    """One thing the banner says to try: ``command`` as printed, what it shows
    (``note``), and whether it is a denial (its exit status then 1, the webhook's
    message on stderr)."""

    command: str
    note: str = ""
    denied: bool = False

    def line(self) -> str:
        return f"  {self.command}" + (f"   # {self.note}" if self.note else "")


def promotion_steps(*, observe: bool) -> list[Step]:
    """What to try for a promotion: a real Promotion next to the real Kargo (observe
    mode), or the played one in engine mode."""
    ns, rel = DEMO_NAMESPACE, examples_dir()
    if not observe:
        return [Step(promote_command(ns), "plays Kargo finishing the promotion: rollgate "
                                          "(engine mode) starts the AnalysisRun")]
    return [
        Step(f"kubectl create -n {ns} -f {rel}/kargo/promotion.yaml",
             "the real Kargo promotes, then creates the AnalysisRun"),
        Step(f"kubectl get -n {ns} promotions"),
    ]


def verification_steps(*, observe: bool, reconciler_metrics: str) -> list[Step]:
    """The verification as a user follows it, Argo Rollouts running the run."""
    ns = DEMO_NAMESPACE
    steps = [
        *promotion_steps(observe=observe),
        Step(f"kubectl wait -n {ns} stage/{DEMO_STAGE} --for=condition=Verified "
             "--timeout=120s", "Argo Rollouts ran the AnalysisRun"),
        Step(f"kubectl get -n {ns} analysisruns"),
        Step(f"kubectl get -n {ns} stage {DEMO_STAGE} -o yaml", "verificationHistory"),
        Step(f"kubectl rollgate explain stage {DEMO_STAGE} -n {ns}",
             "all of it as one timeline"),
        Step(f"kubectl get -n {ns} freight -o jsonpath='{{.items[*].status.verifiedIn}}'"),
    ]
    if observe:
        steps.append(Step(f"{reconciler_metrics} | grep rollgate_verifications_finished",
                          "rollgate (observe mode) counted Kargo's verification"))
    return steps


def admission_steps() -> list[Step]:
    ns, rel = DEMO_NAMESPACE, examples_dir()
    return [
        Step(f"kubectl apply -n {ns} -f {rel}/invalid/stage.yaml", "denied, every path",
             denied=True),
        Step(f"kubectl apply -n {ns} -f {rel}/invalid/rolloutmanager.yaml",
             "denied, every path", denied=True),
        Step(f"kubectl apply -n {ns} -f {rel}/defaulting/", "defaulted + warnings"),
    ]


def try_lines(steps: list[Step], *, comments: dict[int, str] | None = None) -> list[str]:
    """The banner's "Try:" part: each step's line, after the comment given for its
    index."""
    lines = ["Try:"]
    for index, step in enumerate(steps):
        if comments and index in comments:
            lines += [f"  # {c}" for c in comments[index].splitlines()]
        lines.append(step.line())
    return lines


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
