"""Argo Rollouts in pods on the node, as a user looks at them: its pinned CRDs, the
sample metric plugin served to its pods, rollgate installed to sync or audit their
plugins, and one namespace's pods, logs, ConfigMap, RolloutManager and AnalysisRuns.

Argo Rollouts itself is installed by argo-helm's chart (harness.upstream.argo_helm) or
by argo-rollouts-manager (harness.upstream.operator). Its CRDs are the pinned release's
own ``manifests/crds/`` (from the Go module the build downloads, so no file is copied
into this repository).

Facts of v1.9.1 the tests rely on: the controller downloads every plugin of
``argo-rollouts-config`` at start into ``plugin-bin/`` under its working directory,
logging ``Downloading plugin <name> from: <location>``, and exits (``level=fatal``)
when a download or its sha256 check fails; metric plugins start on first use.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from harness import versions
from harness.kits.node import NAMESPACE, Release, image_values, merged, pods, wait_ready
from harness.node import images
from harness.node.cluster import NodeCluster
from harness.paths import REPO_ROOT
from harness.plane import ControlPlane, PlaneError
from harness.upstream import rollouts as rollouts_binaries
from testkit import objects
from testkit.plugin_server import PluginServer
from testkit.waits import wait_for

MODULE = "github.com/argoproj/argo-rollouts"
DEPLOYMENT = "argo-rollouts"
SELECTOR = "app.kubernetes.io/name=argo-rollouts"
CONFIG_MAP = "argo-rollouts-config"
METRIC_KEY = "metricProviderPlugins"
CONTAINER = "argo-rollouts"
DOWNLOADING = "Downloading plugin {name} from: {location}"
MISMATCH = "does not match expected hash"
# The sample plugin reads its settings from the metric's plugin entry under this exact
# name (argo-rollouts test/cmd/metrics-plugin-sample), so it is registered so too.
SAMPLE_PLUGIN = "argoproj/sample-prometheus"
QUERY = 'sum(rate(http_requests_total{job="checkout",code!~"5.."}[5m]))'
FINISHED = ("Successful", "Failed", "Error", "Inconclusive")
CA_CONFIG_MAP = "rollgate-plugins-ca"


def module_dir() -> Path:
    """The module at the pinned tag, from Go's module cache (downloaded if missing, as
    the build that made ``rollouts-controller`` did)."""
    out = subprocess.run(
        ["go", "mod", "download", "-json", f"{MODULE}@{versions.argo_rollouts()}"],
        cwd=REPO_ROOT / "hack" / "rollouts", capture_output=True, text=True, timeout=600,
        check=False)
    if out.returncode != 0:
        raise PlaneError(f"go mod download {MODULE}: {out.stdout[-2000:]}{out.stderr[-2000:]}")
    return Path(json.loads(out.stdout)["Dir"])


def _documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def upstream_crds() -> list[dict[str, Any]]:
    """Every CRD upstream ships (Rollouts, Experiments and the analysis kinds)."""
    found: list[dict[str, Any]] = []
    for path in sorted((module_dir() / "manifests" / "crds").glob("*.yaml")):
        found += [d for d in _documents(path) if d.get("kind") == "CustomResourceDefinition"]
    return found


def install_rollgate(node: NodeCluster, values: Mapping[str, Any] | None = None) -> Release:
    """rollgate by its chart, its digest pre-flight trusting the plugins CA the Argo
    Rollouts image trusts (``reconciler.pluginsCA``, as docs/plugins.md tells users of a
    private CA), so both download the same bytes; ``values`` on top."""
    plane = node.plane
    plane.kubectl("create", "namespace", NAMESPACE)
    plane.kubectl("create", "configmap", CA_CONFIG_MAP, "-n", NAMESPACE,
                  f"--from-file=ca.crt={images.plugins_ca().cert}")
    release = Release(node)
    release.install(merged(image_values(node.images.rollgate),
                           {"reconciler": {"pluginsCA": {"configMap": CA_CONFIG_MAP}}},
                           values or {}))
    return release


@dataclass(frozen=True)
class SamplePlugins:
    """The sample metric plugin served to the node's pods; ``digest`` is its sha256."""

    server: PluginServer
    digest: str


def serve_sample_plugin(node: NodeCluster, directory: Path, paths: Iterable[str]
                        ) -> SamplePlugins:
    """Upstream's sample metric plugin at each of ``paths``, over HTTPS on the node's
    bridge address (pods do not reach the host's loopback), under a certificate from the
    plugins CA the Argo Rollouts image and rollgate's pre-flight trust; started."""
    ca = images.plugins_ca()
    body = rollouts_binaries.find_binaries().metrics_plugin_sample.read_bytes()
    server = PluginServer(directory, host=node.settings.address, ca=(ca.cert, ca.key))
    for path in paths:
        server.serve(path, body)
    return SamplePlugins(server.start(), hashlib.sha256(body).hexdigest())


def pod_log(plane: ControlPlane, namespace: str, pod: str, *, previous: bool = False) -> str:
    args = ["logs", "-n", namespace, pod, "-c", CONTAINER]
    if previous:
        args.append("--previous")
    return str(plane.kubectl(*args, check=False).stdout)


@dataclass
class ArgoNamespace:
    """A namespace with Argo Rollouts pods and a RolloutManager ``rollouts``, as a user
    looks at them: pods, logs, the ConfigMap, the condition, Events, AnalysisRuns."""

    plane: ControlPlane
    namespace: str

    def pods(self) -> list[dict[str, Any]]:
        return [p for p in pods(self.plane, self.namespace, SELECTOR)
                if not p["metadata"].get("deletionTimestamp")]

    def uids(self) -> set[str]:
        return {p["metadata"]["uid"] for p in self.pods()}

    def wait_replaced(self, old: set[str], *, count: int = 2) -> list[dict[str, Any]]:
        """Until no pod of ``old`` is left and ``count`` new ones are Ready."""
        wait_for("the Argo Rollouts pods to be replaced",
                 lambda: not ({p["metadata"]["uid"] for p in
                               pods(self.plane, self.namespace, SELECTOR)} & old),
                 timeout=240)
        return wait_ready(self.plane, self.namespace, selector=SELECTOR, count=count)

    def logs(self, found: list[dict[str, Any]]) -> dict[str, str]:
        return {p["metadata"]["name"]: pod_log(self.plane, self.namespace,
                                                p["metadata"]["name"]) for p in found}

    def apply_rm(self, plugins: dict[str, Any], **spec: Any) -> None:
        self.plane.kubectl("apply", "-n", self.namespace, "-f", "-", input=json.dumps(
            objects.rollout_manager("rollouts", plugins=plugins, spec=spec)))

    def condition(self) -> dict[str, Any]:
        rm = self.plane.get_json("-n", self.namespace, "rolloutmanager", "rollouts")
        found = [c for c in rm.get("status", {}).get("conditions", [])
                 if c["type"] == "PluginsSynced"]
        return {"generation": rm["metadata"]["generation"], **(found[0] if found else {})}

    def wait_condition(self, status: str, reason: str) -> dict[str, Any]:
        """Until ``PluginsSynced`` says so for the RolloutManager's current generation."""
        def settled() -> dict[str, Any] | None:
            cond = self.condition()
            matches = (cond.get("status"), cond.get("reason")) == (status, reason)
            current = cond.get("observedGeneration") == cond["generation"]
            return cond if matches and current else None

        return wait_for(f"PluginsSynced={status} ({reason})", settled, timeout=240)

    def metric_entries(self) -> list[dict[str, Any]]:
        cm = self.plane.get_json("-n", self.namespace, "configmap", CONFIG_MAP)
        return list(yaml.safe_load(cm.get("data", {}).get(METRIC_KEY) or "[]"))

    def events(self, reason: str) -> list[str]:
        items = self.plane.get_json("-n", self.namespace, "events",
                                    "--field-selector", f"reason={reason}")["items"]
        return [e["message"] for e in items]

    def analysis_run(self, name: str, prometheus_url: str) -> dict[str, Any]:
        """An AnalysisRun measured by the sample plugin; returns it once it finished."""
        self.plane.kubectl("create", "-n", self.namespace, "-f", "-", input=json.dumps(
            objects.analysis_run(name, metrics=[{
                "name": "success-rate", "successCondition": "result >= 0.95",
                "provider": {"plugin": {SAMPLE_PLUGIN: {"address": prometheus_url,
                                                        "query": QUERY}}}}])))

        def finished() -> dict[str, Any] | None:
            run = self.plane.get_json("-n", self.namespace, "analysisrun", name)
            return run if run.get("status", {}).get("phase") in FINISHED else None

        return wait_for(f"AnalysisRun {name} to finish", finished, timeout=180)

    def exited_pod(self, old: set[str]) -> str | None:
        """A pod not in ``old`` whose container has exited with an error at least once."""
        for pod in self.pods():
            if pod["metadata"]["uid"] in old:
                continue
            for status in pod.get("status", {}).get("containerStatuses", []):
                last = status.get("lastState", {}).get("terminated") or {}
                if status.get("restartCount", 0) >= 1 and last.get("exitCode", 0) != 0:
                    return str(pod["metadata"]["name"])
        return None
