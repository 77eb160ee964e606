"""``make dev`` (``python -m harness.dev``): rollgate as users run it, on a local node.

The node (harness.node: kubelet, containerd, a plane for pods) with rollgate installed by
its chart (release ``rollgate`` in ``rollgate-system``, the ``job`` certificate source,
the image the Dockerfile builds), next to the real Kargo (its controller, management
controller and admission webhooks, as processes on this host) and the real Argo Rollouts
in pods from argo-helm's chart in the demo namespace. The example RolloutManager's
metric plugin is served here over HTTPS on the node's bridge address (under the plugins
CA the Argo Rollouts image and rollgate's pre-flight trust), so rollgate syncs it and the
pods download it; the stand-in health endpoint the example template asks is on that
address too. Without the Kargo source tree, or with ``--engine``, the release runs in
engine mode and the promotion is played with one ``kubectl patch``. It prints what to
export and what to try (every step a test runs as printed: tests/node/test_make_dev.py),
then streams the rollgate pods' logs until Ctrl-C or SIGTERM, when the node stops and
the host is restored.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

import yaml

from harness import crds
from harness.dev.demo import (
    DEMO_HEALTH_PORT,
    DEMO_NAMESPACE,
    Step,
    admission_steps,
    apply_examples,
    running_kargo,
    shell_lines,
    start_demo_health,
    start_kargo,
    try_lines,
    verification_steps,
)
from harness.kits import rollouts_pods as argo
from harness.kits import shapes
from harness.kits.node import NAMESPACE, Release, delete_namespace
from harness.node.cluster import NodeCluster
from harness.node.lock import NodeBusy
from harness.paths import REPO_ROOT as REPO
from harness.plane import PlaneError
from harness.process import ManagedProcess
from harness.upstream import argo_helm, kargo

PART_OF = "app.kubernetes.io/part-of=rollgate"
PLUGIN_PATH = "/releases/v1/metrics-plugin-sample"
ROLLOUT_MANAGER = "argo-rollouts"


def demo_rollout_manager(plugins: argo.SamplePlugins) -> dict[str, Any]:
    """``examples/rolloutmanager.yaml`` with the one plugin this machine can serve: the
    sample metric plugin at its local HTTPS location, pinned by its digest (the example's
    github.com location is out of reach here)."""
    rm: dict[str, Any] = yaml.safe_load((REPO / "examples" / "rolloutmanager.yaml").read_text())
    rm["spec"]["plugins"] = {"metric": [{"name": argo.SAMPLE_PLUGIN,
                                         "location": plugins.server.url(PLUGIN_PATH),
                                         "sha256": plugins.digest}]}
    return rm


@dataclass
class NodeDemo:
    """What ``setup`` made on the node, the banner it prints, and how it is undone."""

    node: NodeCluster
    release: Release
    kargo: ManagedProcess | None
    plugins: argo.SamplePlugins
    health: ThreadingHTTPServer | None
    stack: ExitStack = field(default_factory=ExitStack)

    @property
    def observe(self) -> bool:
        return self.kargo is not None

    def reconciler_metrics(self) -> str:
        """The command that reads the leader reconciler's metrics through the API
        server's pod proxy (the observe-mode counters are the leader's)."""
        pod = shapes.leader(self.node.plane)
        return (f"kubectl get --raw /api/v1/namespaces/{NAMESPACE}/pods/{pod}:"
                f"{shapes.METRICS_PORT}/proxy/metrics")

    def steps(self) -> list[Step]:
        ns = DEMO_NAMESPACE
        return [
            *admission_steps(),
            Step(f"kubectl wait -n {ns} rolloutmanager/{ROLLOUT_MANAGER} "
                 "--for=condition=PluginsSynced --timeout=180s",
                 "rollgate proved the plugin's digest and synced it"),
            Step(f"kubectl rollout status -n {ns} deploy/{argo_helm.RELEASE} --timeout=180s",
                 "Argo Rollouts rolled to load it"),
            Step(f"kubectl logs -n {ns} deploy/{argo_helm.RELEASE} | grep 'Downloading "
                 "plugin'", "the pod downloaded it"),
            *verification_steps(observe=self.observe,
                                reconciler_metrics=self.reconciler_metrics()),
        ]

    def banner(self) -> str:
        node, release, plane = self.node, self.release, self.node.plane
        plugin = self.plugins.server.url(PLUGIN_PATH)
        lines = [
            "",
            f"rollgate runs on a local node ({node.settings.name}, {node.settings.address}): "
            f"helm release {release.name} in {release.namespace}, image "
            f"{node.images.rollgate.name}, reconciler in "
            f"{'observe' if self.observe else 'engine'} mode; logs in {plane.logs_dir}.",
            f"kargo controller: {running_kargo(self.kargo)}",
            f"argo rollouts: pods of argo-helm's chart in {DEMO_NAMESPACE} "
            f"(helm release {argo_helm.RELEASE})",
            f"plugin server: {plugin} (the sample metric plugin)",
            f"health endpoint of the example template: {node.settings.address}:"
            f"{DEMO_HEALTH_PORT}",
            "  kubectl get pods -A        # rollgate's 4 pods, Argo Rollouts', the hook Jobs'",
            "",
            *shell_lines(kubeconfig=plane.kubeconfig,
                         kubectl_dir=plane.binaries.kubectl.parent),
            "",
            *try_lines(self.steps(), comments={3: (
                f"plugins: the example RolloutManager {ROLLOUT_MANAGER}, its plugin served "
                "here over HTTPS")}),
            "",
            "Ctrl-C stops everything and restores the host.",
            "",
        ]
        return "\n".join(lines)

    def close(self) -> None:
        """Undo what ``setup`` made, for a node that goes on (a test's)."""
        plane = self.node.plane
        if self.health is not None:
            self.health.shutdown()
        self.plugins.server.stop()
        argo_helm.uninstall(plane, DEMO_NAMESPACE)
        self.release.uninstall()
        if self.observe:
            kargo.delete_project(plane, DEMO_NAMESPACE)
        else:
            delete_namespace(plane, DEMO_NAMESPACE)
        self.stack.close()


def setup(node: NodeCluster, *, engine: bool) -> NodeDemo:
    """Everything ``make dev`` shows, on a started ``node``."""
    plane = node.plane
    stack = ExitStack()
    kargo_proc = None if engine else start_kargo(plane, stack)
    values = {} if kargo_proc else {"reconciler": {"stageVerification": "engine"}}
    release = argo.install_rollgate(node, values)
    address = node.settings.address
    apply_examples(plane, kargo_project=kargo_proc is not None,
                   health=f"{address}:{DEMO_HEALTH_PORT}", skip=("rolloutmanager.yaml",))
    argo_helm.install_crds(plane, argo.upstream_crds())
    argo_helm.install(plane, DEMO_NAMESPACE, argo_helm.values(
        node.images.rollouts, namespaced=True, readiness=True))
    plugins = argo.serve_sample_plugin(node, plane.root / "demo-plugins", [PLUGIN_PATH])
    plane.kubectl("apply", "-n", DEMO_NAMESPACE, "-f", "-",
                  input=json.dumps(demo_rollout_manager(plugins)))
    return NodeDemo(node, release, kargo_proc, plugins, start_demo_health(address), stack)


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
    demo: NodeDemo | None = None
    logs: subprocess.Popen[bytes] | None = None
    try:
        node.start()
        demo = setup(node, engine=args.engine)
        print(demo.banner(), flush=True)
        logs = follow_pods(node)
        while True:
            dead = [p for p in node.plane.processes if not p.alive()]
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
        if demo is not None:
            # The node's stop removes everything else with it.
            if demo.health is not None:
                demo.health.shutdown()
            demo.plugins.server.stop()
            demo.stack.close()
        node.stop()
