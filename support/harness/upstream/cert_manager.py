"""The real cert-manager (controller and cainjector) on a plane, as processes.

They come from cert-manager's published module (``build.sh cert-manager``,
``cert-manager-<CERT_MANAGER_VERSION>/`` in the cache):

- ``controller``: ``--leader-elect=false`` (else it waits for a Lease in kube-system),
  ``--cluster-resource-namespace`` (ClusterIssuers' Secrets), a loopback metrics port,
  and only the controllers that self-signed and CA issuers need (``CONTROLLERS``:
  no ACME, Vault, Venafi, ingress or gateway shims). None of them needs cert-manager's
  own webhook, which only validates and defaults cert-manager's objects. It has no
  readiness endpoint; at ``--v=4`` each controller logs ``starting worker`` once its
  caches are synced.
- ``cainjector``: ``--leader-elect=false``; it serves no metrics (port "0" in its
  source). Its webhook-configuration injectors log ``Starting workers`` when they act.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

from harness import versions
from harness.paths import BinaryMissing
from harness.paths import binary as find_binary
from harness.plane import ControlPlane
from harness.process import ManagedProcess, free_port, log_offset, logged_all
from harness.upstream.trees import UpstreamMissing

CONTROLLER = "controller"
CAINJECTOR = "cainjector"
# What issuing from the chart's own CA (self-signed Issuer -> CA Certificate -> CA
# Issuer -> serving Certificate) and from a ClusterIssuer of those kinds takes.
CONTROLLERS = (
    "issuers", "clusterissuers", "certificates-trigger", "certificates-issuing",
    "certificates-key-manager", "certificates-request-manager", "certificates-readiness",
    "certificates-revision-manager", "certificaterequests-approver",
    "certificaterequests-issuer-ca", "certificaterequests-issuer-selfsigned",
)
# The cainjector's controllers for the two kinds rollgate registers.
CAINJECTOR_READY_LINES = tuple(
    re.compile(b"cert-manager/certificate/" + kind
               + b'webhookconfiguration "msg"="Starting workers"')
    for kind in (b"validating", b"mutating"))


def binary(name: str) -> Path:
    """``controller`` or ``cainjector`` of the pinned cert-manager release."""
    try:
        return find_binary(name, f"cert-manager-{versions.cert_manager()}",
                    build="hack/k8s/build.sh cert-manager")
    except BinaryMissing as err:
        raise UpstreamMissing(str(err)) from err


def controller_args(kubeconfig: Path, *, cluster_resource_namespace: str,
                    metrics_port: int) -> list[str]:
    """The controller's flags on a plane (see the module docstring)."""
    return [
        f"--kubeconfig={kubeconfig}",
        "--leader-elect=false",
        f"--cluster-resource-namespace={cluster_resource_namespace}",
        f"--metrics-listen-address=127.0.0.1:{metrics_port}",
        f"--controllers={','.join(CONTROLLERS)}",
        "--v=4",
    ]


def controller_ready_lines() -> tuple[re.Pattern[bytes], ...]:
    """One line per enabled controller: its workers run (its caches are synced)."""
    return tuple(re.compile(b"cert-manager/" + re.escape(name.encode())
                            + b' "msg"="starting worker"')
                 for name in CONTROLLERS)


def cainjector_args(kubeconfig: Path) -> list[str]:
    return [f"--kubeconfig={kubeconfig}", "--leader-elect=false"]


def start(
    plane: ControlPlane, *, cluster_resource_namespace: str = "cert-manager",
) -> tuple[ManagedProcess, ManagedProcess]:
    """Start the real cert-manager controller and cainjector with the admin kubeconfig;
    return once the controller's issuing controllers and the cainjector's
    webhook-configuration injectors run their workers. Its CRDs are the caller's to
    install (``harness.chart.crd_dirs()``).

    ``cluster_resource_namespace``: where ClusterIssuers' Secrets are read (created
    here). No cert-manager webhook: nothing here needs it.
    """
    started = time.monotonic()
    plane.create_namespace(cluster_resource_namespace)
    procs = []
    for name, argv, lines in (
        (CONTROLLER, controller_args(
            plane.kubeconfig, cluster_resource_namespace=cluster_resource_namespace,
            metrics_port=free_port()), controller_ready_lines()),
        (CAINJECTOR, cainjector_args(plane.kubeconfig), CAINJECTOR_READY_LINES),
    ):
        log_name = f"cert-manager-{name}"
        log_path = plane.logs_dir / f"{log_name}.log"
        proc = plane.spawn(
            log_name, [str(binary(name)), *argv],
            env=plane.child_env(), cwd=plane.root,
            ready_check=logged_all(log_path, log_offset(log_path), lines),
        )
        proc.wait_ready(90)
        procs.append(proc)
    plane.timed("cert-manager", started)
    return procs[0], procs[1]
