"""Plugin changes on the node: from ``kubectl apply`` of a RolloutManager with a new
plugin location to every Argo Rollouts pod Ready with it downloaded, and how long no
Argo Rollouts pod was Ready meanwhile.

Three contenders in the same run, same plugin (the real sample metric plugin, served
over HTTPS on the node's bridge address with the CA the Argo Rollouts image trusts),
same server:

- ``sync``: rollgate's sync mode (``make dev``'s release, plugins CA set) with Argo
  Rollouts from argo-helm's chart (namespaced) with 2 replicas and a readiness probe on
  the metrics port, as the docs advise (docs/plugins.md "Plugins in Argo Rollouts pods");
- ``sync-as-shipped``: the same with the chart's defaults (1 replica, no readiness probe;
  only the image values set);
- ``operator``: the real argo-rollouts-manager creating the Deployment itself (1 replica,
  its readiness probe) and restarting it on a plugin change (it deletes the pods).

Each contender gets its own namespace; ``--changes`` times (default 3) the metric plugin
moves to a new location (same bytes, new URL: a plugin change for every contender).
Times are polled every half second (the pods' Ready condition, their logs), so each is
good to about a second. Median and worst per contender; nothing is asserted.

    .venv/bin/python -m bench.plugin_rolls [--changes 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.stats import report
from harness import crds
from harness.kits import rollouts_pods as argo
from harness.kits.node import ReadyCount, ready
from harness.node import images
from harness.node.cluster import NodeCluster
from harness.upstream import argo_helm
from harness.upstream import operator as rollouts_manager
from testkit.plugin_server import PluginServer
from testkit.waits import wait_for

CONTENDERS = ("sync", "sync-as-shipped", "operator")


def location(plugins: PluginServer, index: int) -> str:
    return plugins.url(f"/releases/v{index}/metrics-plugin-sample")


def loaded(space: argo.ArgoNamespace, where: str, count: int) -> bool:
    """``count`` pods, all Ready, none terminating, each having downloaded ``where``."""
    found = space.pods()
    if len(found) != count or not all(ready(p) for p in found):
        return False
    line = argo.DOWNLOADING.format(name=argo.SAMPLE_PLUGIN, location=where)
    return all(line in log for log in space.logs(found).values())


def one_change(space: argo.ArgoNamespace, spec: dict[str, Any], entry: dict[str, Any],
               count: int) -> tuple[float, float]:
    """(seconds until every pod has the plugin, seconds without a Ready pod)."""
    with ReadyCount(space.plane, space.namespace, argo.SELECTOR) as readiness:
        started = time.monotonic()
        space.apply_rm({"metric": [entry]}, **spec)
        wait_for("every pod Ready with the plugin downloaded",
                 lambda: loaded(space, entry["location"], count), timeout=300, interval=0.5)
        took = time.monotonic() - started
    return took, readiness.seconds_without()


def contender(node: NodeCluster, name: str, plugins: PluginServer, digest: str,
              changes: int) -> dict[str, Any]:
    plane = node.plane
    namespace = f"bench-{name}"
    plane.kubectl("create", "namespace", namespace)
    space = argo.ArgoNamespace(plane, namespace)
    spec: dict[str, Any] = {}
    count = 2 if name == "sync" else 1
    if name == "operator":
        image = node.images.rollouts
        spec = {"namespaceScoped": True, "image": image.repository, "version": image.tag,
                "imagePullPolicy": "Never"}
    else:
        # argo-helm's chart in the namespace: as it ships (one pod, no readiness probe),
        # or as rollgate's docs advise for a roll without a gap (two, probed).
        hardened = name == "sync"
        argo_helm.install(plane, namespace, argo_helm.values(
            node.images.rollouts, namespaced=True, replicas=count, readiness=hardened))
    # The first plugin (an install with a plugin, for the operator its first Deployment)
    # is not measured: the changes after it are.
    entry = {"name": argo.SAMPLE_PLUGIN, "location": location(plugins, 0), "sha256": digest}
    one_change(space, spec, entry, count)
    took, without = [], []
    for index in range(1, changes + 1):
        entry = {**entry, "location": location(plugins, index)}
        seconds, gap = one_change(space, spec, entry, count)
        took.append(seconds)
        without.append(gap)
    return {"pods": count, "changes": changes,
            "until_every_pod_has_it_s": figures(took),
            "without_a_ready_pod_s": figures(without)}


def figures(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values), 1), "worst": round(max(values), 1)}


def measure(node: NodeCluster, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    sample = argo.serve_sample_plugin(
        node, work, (f"/releases/v{index}/metrics-plugin-sample"
                     for index in range(args.changes + 1)))
    plugins = sample.server
    plane = node.plane
    argo.install_rollgate(node)
    argo_helm.install_crds(plane, argo.upstream_crds())
    operator = rollouts_manager.start(
        plane, openshift_plugin=f"file://{images.IMAGE_SAMPLE_PLUGIN}")
    try:
        return {name: contender(node, name, plugins, sample.digest, args.changes)
                for name in CONTENDERS}
    finally:
        rollouts_manager.stop(plane, operator)
        plugins.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.plugin_rolls",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=3,
                        help="plugin changes measured per contender")
    args = parser.parse_args(argv)
    node = NodeCluster(crds=crds.for_plane(), verbose=True)
    try:
        node.start()
        with tempfile.TemporaryDirectory() as work:
            report(measure(node, args, Path(work)))
    finally:
        node.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
