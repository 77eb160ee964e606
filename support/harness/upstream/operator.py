"""The real argo-rollouts-manager (the operator) on a plane, as a process.

It needs ``--metrics-bind-address=0``, ``NAMESPACE_SCOPED_ARGO_ROLLOUTS=true`` for
namespace-scoped RolloutManagers, and ``OPENSHIFT_ROUTE_PLUGIN_LOCATION``: it always adds
the ``argoproj-labs/openshift`` traffic plugin, and a real Rollouts controller that
cannot download a configured plugin exits at start, so that location must be local.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from pathlib import Path

from harness.plane import ControlPlane
from harness.process import ManagedProcess, free_port, log_offset, logged
from harness.upstream import rollouts, trees

READY_LINE = re.compile(rb"Starting workers.*RolloutManager")
# What the operator creates cluster-wide for Argo Rollouts, owned by nothing, so they
# outlive it; argo-helm's chart renders ClusterRoles of these names too (and refuses to
# install over ones it does not own).
CLUSTER_ROLES = tuple(f"argo-rollouts-aggregate-to-{verb}" for verb in ("admin", "edit", "view"))


def env(base: Mapping[str, str], kubeconfig: Path, *, openshift_plugin: str,
        namespace_scoped: bool = True) -> dict[str, str]:
    out = dict(base)
    out.update({
        "KUBECONFIG": str(kubeconfig),
        "NAMESPACE_SCOPED_ARGO_ROLLOUTS": "true" if namespace_scoped else "false",
        "OPENSHIFT_ROUTE_PLUGIN_LOCATION": openshift_plugin,
    })
    return out


def start(
    plane: ControlPlane, *, name: str = "argo-rollouts-manager",
    openshift_plugin: str | None = None, namespace_scoped: bool = True,
) -> ManagedProcess:
    """Start the real argo-rollouts-manager with the admin kubeconfig and wait until
    its RolloutManager controller runs its workers.

    ``openshift_plugin``: the location it renders for the ``argoproj-labs/openshift``
    plugin it always adds; by default a local binary (the sample metric plugin), so
    that a real Rollouts controller reading what it rendered can load every plugin.
    """
    started = time.monotonic()
    binary = trees.rollouts_manager_binary()
    location = openshift_plugin or (
        "file://" + str(rollouts.find_binaries().metrics_plugin_sample))
    log_path = plane.logs_dir / f"{name}.log"
    proc = plane.spawn(
        name, [str(binary), "--metrics-bind-address=0",
               f"--health-probe-bind-address=127.0.0.1:{free_port()}"],
        env=env(plane.child_env(), plane.kubeconfig, openshift_plugin=location,
                namespace_scoped=namespace_scoped),
        cwd=plane.root,
        ready_check=logged(log_path, log_offset(log_path), READY_LINE),
    )
    proc.wait_ready(60)
    plane.timed(name, started)
    return proc


def stop(plane: ControlPlane, proc: ManagedProcess) -> None:
    """Stop the operator and remove what it made cluster-wide, as a user who removes
    argo-rollouts-manager does before installing Argo Rollouts another way."""
    plane.stop_process(proc)
    plane.kubectl("delete", "clusterrole", "--ignore-not-found", *CLUSTER_ROLES)
