"""Argo Rollouts as argo-helm's ``argo-rollouts`` chart installs it: ``helm install`` on
the node, only ordinary values set.

The chart (``charts/argo-rollouts`` of github.com/argoproj/argo-helm, with the
repository's LICENSE) is at the version hack/versions.env pins; ``hack/k8s/build.sh
crds`` copies it out of the Go module proxy's copy of that repository (this project does
not vendor upstream files). Values set, and why (docs/development.md, "Upstreams on the
node"):

- ``controller.image``: the image made here from the ``rollouts-controller`` the build
  makes (no registry outside this machine is reachable), pinned Argo Rollouts v1.9.1;
- ``installCRDs: false``: the chart version the proxy serves carries the CRDs of a later
  Argo Rollouts than the pinned controller; the pinned release's own CRDs
  (``manifests/crds`` of its module) are applied instead, as users who manage CRDs
  apart from the chart do (:func:`install_crds`);
- replicas, a readiness probe and namespaced mode where a test asks for them.

What the chart renders that rollgate depends on: the Deployment is named after the
release (``argo-rollouts`` when the release name contains it, else
``<release>-argo-rollouts``), ``argo-rollouts-config`` carries the chart's plugin values
(none set here), and the pods carry ``checksum/cm``, the digest of the chart's ConfigMap
template, which rolls them on a ``helm upgrade`` that changes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from harness import chart, versions
from harness.paths import cache_dir
from harness.plane import ControlPlane
from harness.upstream.trees import UpstreamMissing

RELEASE = "argo-rollouts"
SELECTOR = "app.kubernetes.io/name=argo-rollouts"


def chart_dir() -> Path:
    """The chart as ``build.sh crds`` left it; one line saying how to get it when not."""
    version = versions.get("ARGO_ROLLOUTS_CHART_VERSION")
    root = cache_dir() / f"chart-argo-rollouts-{version}"
    if not (root / ".complete").is_file():
        raise UpstreamMissing(f"{root}: argo-helm's argo-rollouts chart {version} is "
                              "missing; run `hack/k8s/build.sh crds` (or `make k8s`)")
    return root / "argo-rollouts"


def deployment_name(release: str) -> str:
    """The Deployment the chart names after ``release`` (its ``argo-rollouts.fullname``)."""
    return release if "argo-rollouts" in release else f"{release}-argo-rollouts"


def values(image: Any, *, namespaced: bool = False, replicas: int = 1,
           readiness: bool = False) -> dict[str, Any]:
    """The values a user of this machine sets: the local image (``image``: a
    ``harness.node.images.Image``), the pinned CRDs applied apart, and optionally
    namespaced mode, more replicas and a readiness probe on the metrics port (the
    controller opens it after it downloaded its plugins and synced its caches)."""
    controller: dict[str, Any] = {
        "image": {"registry": image.repository.split("/", 1)[0],
                  "repository": image.repository.split("/", 1)[1],
                  "tag": image.tag, "pullPolicy": "Never"},
        "replicas": replicas,
    }
    if readiness:
        controller["readinessProbe"] = {"httpGet": {"path": "/metrics", "port": "metrics"},
                                        "periodSeconds": 2, "failureThreshold": 3}
    return {"installCRDs": False, "clusterInstall": not namespaced,
            "controller": controller}


def helm(plane: ControlPlane, *args: str, check: bool = True) -> Any:
    env = chart.cluster_env(plane.kubeconfig, plane.root / "helm")
    return chart.helm(*args, check=check, env=env, timeout=360)


def install(plane: ControlPlane, namespace: str, chart_values: Mapping[str, Any], *,
            release: str = RELEASE) -> None:
    """``helm install`` of the chart into ``namespace`` (created), waiting for its pods."""
    directory = plane.root / "helm-values"
    directory.mkdir(parents=True, exist_ok=True)
    out = helm(plane, "install", release, str(chart_dir()), "-n", namespace,
               "--create-namespace", "-f", str(chart.values_file(chart_values, directory)),
               "--wait", "--timeout", "4m", check=False)
    if out.returncode != 0:
        raise UpstreamMissing(f"helm install of argo-helm's argo-rollouts chart failed:\n"
                              f"{out.stderr}{out.stdout}")


def uninstall(plane: ControlPlane, namespace: str, *, release: str = RELEASE) -> None:
    """``helm uninstall``: the chart keeps its CRDs (none here: installCRDs is off)."""
    helm(plane, "uninstall", release, "-n", namespace, "--wait", "--timeout", "3m",
         check=False)


def install_crds(plane: ControlPlane, crds: list[dict[str, Any]]) -> None:
    """The pinned Argo Rollouts CRDs among ``crds`` the plane lacks, applied server-side
    as Argo Rollouts' docs apply ``manifests/crds``, and waited for."""
    present = {i["metadata"]["name"] for i in plane.get_json("crd")["items"]}
    missing = [c for c in crds if c["metadata"]["name"] not in present]
    plane.install_crds(missing)


def rendered(release: str, namespace: str, chart_values: Mapping[str, Any],
             work: Path) -> list[dict[str, Any]]:
    """``helm template`` of the chart: what ``install`` would create (for tests that
    read names and labels without a cluster)."""
    work.mkdir(parents=True, exist_ok=True)
    out = chart.helm("template", release, str(chart_dir()), "-n", namespace,
                     "-f", str(chart.values_file(chart_values, work)), timeout=120)
    return [d for d in yaml.safe_load_all(out.stdout) if d]
