"""The real Kargo on a plane: its controller and its own admission webhooks, as processes.

What each needs against a bare kube-apiserver (no kubelet, no Argo CD), as found by
running them here:

- ``kargo controller``: ``ARGOCD_INTEGRATION_ENABLED=false``,
  ``ROLLOUTS_INTEGRATION_ENABLED=true``, ``METRICS_BIND_ADDRESS=0``, its nine CRDs and
  Argo Rollouts' analysis CRDs; it renews a heartbeat Lease in ``KARGO_NAMESPACE``.
  It has no readiness endpoint: the Stage controller's first ``Starting workers`` log
  line is the moment it acts. ``SHARD_NAME`` / ``IS_DEFAULT_CONTROLLER`` select the
  Stages it reconciles by the ``kargo.akuity.io/shard`` label.
- ``kargo kubernetes-webhooks-server``: ``WEBHOOK_SERVER_PORT``, ``KARGO_NAMESPACE``,
  its serving certificate in ``$TMPDIR/k8s-webhook-server/serving-certs/tls.{crt,key}``
  (controller-runtime's default); its validators refuse namespaces without the label
  ``kargo.akuity.io/project: "true"``.
"""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Mapping
from pathlib import Path

from harness.plane import ControlPlane, PlaneError
from harness.process import ManagedProcess, free_port, log_offset, logged
from harness.upstream import trees
from harness.upstream.trees import KARGO_NAMESPACE, KARGO_READY_LINE, PROJECT_LABEL, SHARD_LABEL


def controller_env(
    base: Mapping[str, str], kubeconfig: Path, *, shard: str = "",
    default_controller: bool = True, extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of ``kargo controller`` on a plane (see the module docstring).

    ``shard`` / ``default_controller``: Kargo's ``SHARD_NAME`` / ``IS_DEFAULT_CONTROLLER``.
    """
    env = {k: v for k, v in base.items() if not k.startswith("KARGO_")}
    env.update({
        "KUBECONFIG": str(kubeconfig),
        "ARGOCD_INTEGRATION_ENABLED": "false",
        "ROLLOUTS_INTEGRATION_ENABLED": "true",
        "METRICS_BIND_ADDRESS": "0",
        "KARGO_NAMESPACE": KARGO_NAMESPACE,
        "IS_DEFAULT_CONTROLLER": "true" if default_controller else "false",
        "SHARD_NAME": shard,
        "LOG_LEVEL": "info",
    })
    env.update(extra or {})
    return env


def webhooks_env(base: Mapping[str, str], kubeconfig: Path, *, port: int,
                 tmpdir: Path) -> dict[str, str]:
    env = {k: v for k, v in base.items() if not k.startswith("KARGO_")}
    env.update({
        "KUBECONFIG": str(kubeconfig),
        "WEBHOOK_SERVER_PORT": str(port),
        "METRICS_BIND_ADDRESS": "0",
        "KARGO_NAMESPACE": KARGO_NAMESPACE,
        # controller-runtime reads the serving certificate from
        # $TMPDIR/k8s-webhook-server/serving-certs.
        "TMPDIR": str(tmpdir),
        "LOG_LEVEL": "info",
    })
    return env


def serving_cert_dir(tmpdir: Path) -> Path:
    return tmpdir / "k8s-webhook-server" / "serving-certs"


def project_namespace(plane: ControlPlane, name: str) -> str:
    """Create namespace ``name`` as a Kargo Project's (the label Kargo's validators
    require)."""
    return plane.create_namespace(name, labels={PROJECT_LABEL: "true"})


def start_controller(
    plane: ControlPlane,
    *,
    name: str = "kargo-controller",
    shard: str = "",
    default_controller: bool = True,
    env: dict[str, str] | None = None,
    ready_timeout: float = 90.0,
) -> ManagedProcess:
    """Start the real Kargo controller (``kargo controller``: Stages, Promotions,
    Warehouses; Argo Rollouts integration on, Argo CD's off) with the admin
    kubeconfig, and wait until its Stage controller runs its workers.

    ``shard`` / ``default_controller``: its ``SHARD_NAME`` / ``IS_DEFAULT_CONTROLLER``;
    ``ready_timeout``: seconds to wait for its workers (its caches fill first, which
    takes minutes with 10,000 Stages).
    """
    started = time.monotonic()
    binary = trees.kargo_binary()
    plane.create_namespace(KARGO_NAMESPACE)
    log_path = plane.logs_dir / f"{name}.log"
    proc = plane.spawn(
        name, [str(binary), "controller"],
        env=controller_env(plane.child_env(), plane.kubeconfig, shard=shard,
                           default_controller=default_controller, extra=env),
        cwd=plane.root,
        ready_check=logged(log_path, log_offset(log_path), KARGO_READY_LINE),
    )
    proc.wait_ready(ready_timeout)
    plane.timed(name, started)
    return proc


def start_webhooks(plane: ControlPlane, *, name: str = "kargo-webhooks") -> ManagedProcess:
    """Start Kargo's own admission webhooks (``kargo kubernetes-webhooks-server``) and
    register them by URL with a caBundle, for the Project namespaces only (see
    ``trees.kargo_webhook_configurations``); returns once they mutate Stages."""
    started = time.monotonic()
    binary = trees.kargo_binary()
    tmpdir = plane.root / name
    certs_dir = serving_cert_dir(tmpdir)
    certs_dir.mkdir(parents=True, exist_ok=True)
    cert, key = plane.ca.issue(common_name=name, sans=["127.0.0.1", "localhost"], server=True)
    (certs_dir / "tls.crt").write_bytes(cert)
    (certs_dir / "tls.key").write_bytes(key)
    port = free_port()
    log_path = plane.logs_dir / f"{name}.log"
    plane.create_namespace(KARGO_NAMESPACE)
    proc = plane.spawn(
        name, [str(binary), "kubernetes-webhooks-server"],
        env=webhooks_env(plane.child_env(), plane.kubeconfig, port=port, tmpdir=tmpdir),
        cwd=plane.root,
        ready_check=logged(log_path, log_offset(log_path),
                           re.compile(rb"Serving webhook server")),
    )
    proc.wait_ready(60)
    plane.apply_objects(trees.kargo_webhook_configurations(
        url=f"https://127.0.0.1:{port}", ca_bundle=base64.b64encode(plane.ca.pem).decode()))
    _wait_webhooks(plane)
    plane.timed(name, started)
    return proc


def _wait_webhooks(plane: ControlPlane, timeout: float = 30) -> None:
    """Until a server-side dry run shows Kargo's Stage defaulter at work: it sets
    the shard label from ``spec.shard``."""
    probe_ns = project_namespace(plane, "kargo-webhook-probe")
    probe = {"apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Stage",
             "metadata": {"name": "probe", "namespace": probe_ns},
             "spec": {"shard": "probe", "requestedFreight": [
                 {"origin": {"kind": "Warehouse", "name": "probe"},
                  "sources": {"direct": True}}]}}
    deadline = time.monotonic() + timeout
    while True:
        out = plane.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                            input=json.dumps(probe), check=False)
        if out.returncode == 0 and SHARD_LABEL in out.stdout:
            return
        if time.monotonic() > deadline:
            raise PlaneError(f"Kargo's webhooks not active after {timeout:.0f}s: "
                             f"{out.stderr.strip()}")
        time.sleep(0.3)


def stop_webhooks(plane: ControlPlane, proc: ManagedProcess) -> None:
    """Unregister Kargo's webhooks (they fail closed) and stop their server."""
    plane.kubectl("delete", "--ignore-not-found", "mutatingwebhookconfiguration/kargo",
                  "validatingwebhookconfiguration/kargo")
    plane.stop_process(proc)
