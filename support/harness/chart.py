"""The Helm chart (charts/rollgate) and its monitoring files, for the tests.

``helm`` is the binary hack/k8s/build.sh builds from the helm.sh/helm/v3 module
(``helm-<HELM_VERSION>/`` in the cache); the cert-manager and Prometheus Operator CRDs
the chart's optional objects need are copied there by ``build.sh crds`` from those
projects' modules. This module renders the chart, finds those files, and reads the
metric names the alerts and the dashboard use.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from harness import versions
from harness.paths import REPO_ROOT, cache_dir

CHART = REPO_ROOT / "charts" / "rollgate"
ALERTS = CHART / "files" / "alerts.yaml"
DASHBOARD = CHART / "files" / "dashboard.json"
PROMETHEUS_RULE = REPO_ROOT / "manifests" / "monitoring" / "prometheusrule.yaml"
RELEASE = "rollgate"
NAMESPACE = "rollgate-system"
# Series Prometheus itself records for every scrape target (not exported by rollgate).
PROMETHEUS_SERIES = frozenset({"up"})
# What every install must set (values.yaml has no image: docs/install.md "Get the image
# and the chart"), for renders whose pods never run: a repository that resolves nowhere.
REQUIRED: Mapping[str, Any] = {"image": {"repository": "registry.invalid/rollgate"}}
_METRIC = re.compile(r"\brollgate_[a-z0-9_]+\b|\bup\b(?=\{)")


class ChartToolMissing(RuntimeError):
    """helm or a CRD directory is not where build.sh puts it."""


def helm_binary() -> Path:
    """``$ROLLGATE_K8S_BIN/helm`` when set, else the cache's ``helm-<version>/helm``."""
    if os.environ.get("ROLLGATE_K8S_BIN"):
        path = Path(os.environ["ROLLGATE_K8S_BIN"]) / "helm"
    else:
        path = cache_dir() / f"helm-{versions.get('HELM_VERSION')}" / "helm"
    if not os.access(path, os.X_OK):
        raise ChartToolMissing(f"{path}: missing; run `hack/k8s/build.sh helm`")
    return path


def crd_dirs() -> tuple[Path, Path]:
    """The cert-manager CRDs and the monitoring.coreos.com CRDs (``build.sh crds``)."""
    dirs = (cache_dir() / f"crds-cert-manager-{versions.get('CERT_MANAGER_VERSION')}",
            cache_dir() / f"crds-prometheus-operator-{versions.get('PROMETHEUS_OPERATOR_VERSION')}")
    for directory in dirs:
        if not (directory / ".complete").is_file():
            raise ChartToolMissing(f"{directory}: missing; run `hack/k8s/build.sh crds`")
    return dirs


def helm(*args: str, check: bool = True, env: Mapping[str, str] | None = None,
         timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The pinned helm; ``env`` for its environment (a cluster's, see ``cluster_env``)."""
    result = subprocess.run([str(helm_binary()), *args], capture_output=True, text=True,
                            timeout=timeout, check=False, env=None if env is None else dict(env))
    if check and result.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({result.returncode}):\n"
                             f"{result.stderr}{result.stdout}")
    return result


def cluster_env(kubeconfig: Path, home: Path) -> dict[str, str]:
    """helm's environment against a cluster: its kubeconfig, and helm's cache, config and
    data under ``home`` (never the user's own)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HELM_")}
    env.update({"KUBECONFIG": str(kubeconfig), "HELM_CACHE_HOME": str(home / "cache"),
                "HELM_CONFIG_HOME": str(home / "config"), "HELM_DATA_HOME": str(home / "data")})
    return env


def merged(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Values layered as helm layers several ``-f`` files: later ones win, maps merge."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            if isinstance(value, Mapping) and isinstance(out.get(key), dict):
                out[key] = merged(out[key], value)
            else:
                out[key] = value
    return out


def values_file(values: Mapping[str, Any], directory: Path) -> Path:
    """``values`` written as a values file in ``directory`` (JSON is YAML)."""
    path = directory / f"values-{len(list(directory.glob('values-*.json')))}.json"
    path.write_text(json.dumps(values))
    return path


def lint(values: Mapping[str, Any] | None = None) -> subprocess.CompletedProcess[str]:
    """``helm lint --strict`` with :data:`REQUIRED` under ``values``."""
    with tempfile.TemporaryDirectory() as tmp:
        return helm("lint", "--strict", str(CHART), "-f",
                    str(values_file(merged(REQUIRED, values or {}), Path(tmp))), check=False)


def template(values: Mapping[str, Any] | None = None, *, namespace: str = NAMESPACE,
             check: bool = True, chart: Path = CHART, required: bool = True,
             extra: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    """``helm template`` of ``chart`` with ``values`` (over :data:`REQUIRED` unless
    ``required`` is False), for the Kubernetes version the test plane runs;
    ``check=False`` to look at a refusal."""
    layers = (REQUIRED, values or {}) if required else (values or {},)
    with tempfile.TemporaryDirectory() as tmp:
        return helm("template", RELEASE, str(chart), "--namespace", namespace,
                    "--kube-version", versions.kubernetes(),
                    "-f", str(values_file(merged(*layers), Path(tmp))), *extra, check=check)


def render(values: Mapping[str, Any] | None = None, *,
           namespace: str = NAMESPACE) -> list[dict[str, Any]]:
    """``helm template`` of the chart with ``values``, hooks included, as objects, for
    the Kubernetes version the test plane runs."""
    out = template(values, namespace=namespace).stdout
    return [d for d in yaml.safe_load_all(out) if isinstance(d, dict)]


_NOTES_TEMPLATE = """apiVersion: v1
kind: ConfigMap
metadata:
  name: rollgate-notes
data:
  notes: {{ include "rollgate.harness.notes" . | toJson }}
"""


def notes(values: Mapping[str, Any] | None = None, *, namespace: str = NAMESPACE) -> str:
    """templates/NOTES.txt rendered with ``values``, as ``helm install`` prints it, without
    a cluster: the pinned helm's ``install --dry-run=client`` still dials one, and ``helm
    template`` leaves the notes out. So a copy of the chart carries NOTES.txt as a named
    template that one ConfigMap includes: the same engine, values and root context."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / CHART.name
        shutil.copytree(CHART, copy)
        source = copy / "templates" / "NOTES.txt"
        (copy / "templates" / "_harness_notes.tpl").write_text(
            '{{- define "rollgate.harness.notes" -}}\n' + source.read_text() + "{{- end }}\n")
        source.unlink()
        (copy / "templates" / "harness-notes.yaml").write_text(_NOTES_TEMPLATE)
        out = template(values, namespace=namespace, chart=copy,
                       extra=("--show-only", "templates/harness-notes.yaml")).stdout
    return str(yaml.safe_load(out)["data"]["notes"])


def app_version() -> str:
    return str(yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"])


def alert_rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"]
            for rule in group["rules"]]


def dashboard_exprs() -> list[str]:
    def panels(items: Iterable[Mapping[str, Any]]) -> Iterable[Mapping[str, Any]]:
        for panel in items:
            yield panel
            yield from panels(panel.get("panels") or [])

    board = json.loads(DASHBOARD.read_text())
    return [target["expr"] for panel in panels(board["panels"])
            for target in panel.get("targets") or []]


def metric_names(exprs: Iterable[str]) -> set[str]:
    """Every series name in PromQL ``exprs`` (rollgate's, plus ``up``)."""
    return {name for expr in exprs for name in _METRIC.findall(expr)}


def used_metric_names() -> set[str]:
    """What the alerts and the dashboard query."""
    return metric_names([r["expr"] for r in alert_rules()] + dashboard_exprs())


def exported_names(exposition: str) -> set[str]:
    """The series names a /metrics text exposition declares (``# TYPE`` lines, so a
    labelled metric without samples yet counts) and carries, with the suffixes each
    type's samples get (counter ``_total``/``_created``, histogram
    ``_bucket``/``_sum``/``_count``/``_created``)."""
    suffixes = {"counter": ("_total", "_created"), "gauge": ("",),
                "histogram": ("_bucket", "_sum", "_count", "_created"),
                "summary": ("", "_sum", "_count", "_created")}
    names: set[str] = set()
    for line in exposition.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[:2] == ["#", "TYPE"]:
            base = parts[2].removesuffix("_total") if parts[3] == "counter" else parts[2]
            names.update(base + s for s in suffixes.get(parts[3], ("",)))
        elif parts and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, maxsplit=1)[0])
    return names
