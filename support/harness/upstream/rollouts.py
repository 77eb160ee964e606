"""The real Argo Rollouts controller, run on the host for AnalysisRuns only.

``hack/k8s/build.sh`` builds ``rollouts-controller`` and the sample metric plugin
(``metrics-plugin-sample``) at the version pinned in hack/versions.env. This module
finds them and builds the command line that runs the controller the way the
harness needs it; ``start_controller`` runs it as a ``ManagedProcess``.

Facts about the controller (argo-rollouts v1.9.1, cmd/rollouts-controller and
controller/controller.go) the command relies on:

- ``--controllers=analysis`` runs only the AnalysisRun controller. Its informers are
  AnalysisRuns, AnalysisTemplates, ClusterAnalysisTemplates (synced only when not
  ``--namespaced``) and batch/v1 Jobs: those CRDs must exist, Rollouts and
  Experiments need not.
- The namespace of ``argo-rollouts-config`` (plugins) is ``$POD_NAMESPACE``, else the
  in-cluster ServiceAccount namespace file, else ``argo-rollouts``. The ConfigMap is
  read once at start: plugins listed in it later need a restart.
- Plugins are copied or downloaded to ``plugin-bin/<org>/<name>`` relative to the
  working directory, hence a work directory per controller.
- ``--namespaced`` watches the namespace of the kubeconfig context, which
  ``--namespace`` overrides.
- The metrics and healthz servers listen on ``0.0.0.0:<port>`` (not configurable);
  the ports are free loopback ports picked by the caller.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from harness import versions
from harness.paths import cache_dir
from harness.plane import ControlPlane
from harness.process import ManagedProcess, ProcessError, free_port, http_ok, log_offset, logged

CONTROLLER = "rollouts-controller"
METRICS_PLUGIN_SAMPLE = "metrics-plugin-sample"
CONFIGMAP = "argo-rollouts-config"
# Logged by Manager.startLeading once the informer caches synced and the analysis
# workers run: the first moment an AnalysisRun is acted on.
READY_LOG_LINE = re.compile(rb'msg="Started controller"')


class RolloutsBinariesMissing(ProcessError):
    """The Argo Rollouts binaries are not built; ``make k8s`` builds them."""


@dataclass(frozen=True, slots=True)
class RolloutsBinaries:
    controller: Path
    metrics_plugin_sample: Path


@dataclass(frozen=True, slots=True)
class ControllerCommand:
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    healthz_url: str
    metrics_url: str


def binaries_dir() -> Path:
    """Where build.sh puts them: ``<cache>/argo-rollouts-<version>``, or ``$ROLLGATE_K8S_BIN``
    (the one directory that then holds the Kubernetes binaries too)."""
    if os.environ.get("ROLLGATE_K8S_BIN"):
        return Path(os.environ["ROLLGATE_K8S_BIN"])
    return cache_dir() / f"argo-rollouts-{versions.argo_rollouts()}"


def find_binaries() -> RolloutsBinaries:
    directory = binaries_dir()
    paths = {name: directory / name for name in (CONTROLLER, METRICS_PLUGIN_SAMPLE)}
    missing = [str(p) for p in paths.values() if not os.access(p, os.X_OK)]
    if missing:
        raise RolloutsBinariesMissing(
            f"Argo Rollouts {versions.argo_rollouts()} binaries missing: {', '.join(missing)}. "
            "Run `make k8s` (hack/k8s/build.sh) to build them, "
            "or put them in $ROLLGATE_K8S_BIN next to the Kubernetes binaries."
        )
    return RolloutsBinaries(
        controller=paths[CONTROLLER], metrics_plugin_sample=paths[METRICS_PLUGIN_SAMPLE]
    )


def controller_command(
    controller: Path,
    kubeconfig: Path,
    work_dir: Path,
    *,
    metrics_port: int,
    healthz_port: int,
    namespace: str | None = None,
    config_namespace: str | None = None,
    base_env: Mapping[str, str] | None = None,
    loglevel: str = "info",
) -> ControllerCommand:
    """The command, environment and directory that run the AnalysisRun controller.

    ``namespace``: watch only that namespace (``--namespaced``), as argo-rollouts-manager
    runs it for a namespace-scoped RolloutManager; otherwise every namespace.
    ``config_namespace``: where its ``argo-rollouts-config`` lives (``POD_NAMESPACE``),
    by default ``namespace``; required when watching every namespace.
    """
    config_namespace = config_namespace or namespace
    if not config_namespace:
        raise ValueError("config_namespace is required when the controller watches every namespace")
    argv = [
        str(controller),
        f"--kubeconfig={kubeconfig}",
        "--controllers=analysis",
        # Single instance: a Lease would only delay the start by its renew period.
        "--leader-elect=false",
        f"--metricsPort={metrics_port}",
        f"--healthzPort={healthz_port}",
        f"--loglevel={loglevel}",
    ]
    if namespace:
        argv += ["--namespaced", f"--namespace={namespace}"]
    env = dict(os.environ if base_env is None else base_env)
    env["POD_NAMESPACE"] = config_namespace
    return ControllerCommand(
        argv=argv,
        env=env,
        cwd=work_dir,
        healthz_url=f"http://127.0.0.1:{healthz_port}/healthz",
        metrics_url=f"http://127.0.0.1:{metrics_port}/metrics",
    )


def _ready_check(log_path: Path, offset: int, healthz_url: str) -> Callable[[], bool]:
    """Ready once this run's log (from ``offset``: the file is appended to across runs)
    says the controller started and healthz answers."""

    started = logged(log_path, offset, READY_LOG_LINE)

    def check() -> bool:
        return started() and http_ok(healthz_url)

    return check


def start_controller(
    kubeconfig: Path,
    work_dir: Path,
    *,
    log_path: Path,
    namespace: str | None = None,
    config_namespace: str | None = None,
    binaries: RolloutsBinaries | None = None,
    name: str = CONTROLLER,
    base_env: Mapping[str, str] | None = None,
) -> ManagedProcess:
    """Start the controller in ``work_dir`` (created); not waited for: ``.wait_ready()``.

    ``base_env``: its environment instead of ours (see ``controller_command``), e.g. ours
    plus ``SSL_CERT_FILE``: it downloads https plugins with Go's default client, which
    trusts only the CAs that variable (else the system) names.
    """
    binaries = binaries or find_binaries()
    work_dir.mkdir(parents=True, exist_ok=True)
    command = controller_command(
        binaries.controller,
        kubeconfig,
        work_dir,
        metrics_port=free_port(),
        healthz_port=free_port(),
        namespace=namespace,
        config_namespace=config_namespace,
        base_env=base_env,
    )
    offset = log_offset(log_path)
    return ManagedProcess(
        name,
        command.argv,
        log_path=log_path,
        url=command.metrics_url.removesuffix("/metrics"),
        env=command.env,
        cwd=command.cwd,
        ready_check=_ready_check(log_path, offset, command.healthz_url),
    )


def run_on(
    plane: ControlPlane,
    *,
    namespace: str | None = None,
    config_namespace: str = "argo-rollouts",
    name: str = CONTROLLER,
    base_env: Mapping[str, str] | None = None,
) -> ManagedProcess:
    """Start the controller against ``plane`` (admin kubeconfig, work directory
    ``<plane>/<name>``) and wait until it acts on runs.

    ``namespace``: watch only that namespace, as argo-rollouts-manager runs it for a
    namespace-scoped RolloutManager (it then reads ``argo-rollouts-config`` there);
    otherwise every namespace, with the ConfigMap in ``config_namespace``.
    """
    started = time.monotonic()
    config_ns = namespace or config_namespace
    plane.create_namespace(config_ns)
    proc = start_controller(
        plane.kubeconfig, plane.root / name, log_path=plane.logs_dir / f"{name}.log",
        namespace=namespace, config_namespace=config_ns, name=name,
        base_env=base_env if base_env is not None else plane.child_env(),
    )
    plane.track(proc)
    proc.wait_ready(60)
    plane.timed(name, started)
    return proc
