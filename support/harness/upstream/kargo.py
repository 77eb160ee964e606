"""The real Kargo on a plane: its controller, its own admission webhooks and its
management controller, as processes with the admin kubeconfig.

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
  (controller-runtime's default); registered as Kargo's chart registers it
  (``harness.upstream.kargo_chart``). Its webhooks gate every namespace: its validators
  refuse Stages, Freight, Promotions and Warehouses in a namespace without the label
  ``kargo.akuity.io/project: "true"``, and its Project webhook creates a Project's
  namespace (labelled, with Kargo's finalizer) when the Project is created.
- ``kargo management-controller`` (the chart runs it by default): ``KARGO_NAMESPACE``,
  ``METRICS_BIND_ADDRESS=0``, ``EXTERNAL_WEBHOOK_SERVER_BASE_URL`` (required; the chart's
  default, from ``externalWebhooksServer.host: localhost``: no external webhooks server
  runs here, and the URL only names webhook receivers in ClusterConfig and ProjectConfig
  status) and the chart's namespaces for cluster secrets, system and shared resources
  (it caches Secrets and ConfigMaps there). It reconciles Projects (their namespace, the
  ServiceAccounts, Roles and RoleBindings Kargo grants there, condition ``Ready``) and,
  when a Project's namespace is deleted, deletes the Project and removes the namespace's
  finalizer (without it the namespace stays Terminating). Ready once its Project and
  Namespace controllers log ``Starting workers``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.plane import ControlPlane, PlaneError
from harness.process import ManagedProcess, free_port, log_offset, logged, logged_all
from harness.upstream import kargo_chart, trees
from harness.upstream.trees import KARGO_NAMESPACE, KARGO_READY_LINE, PROJECT_LABEL
from testkit import objects
from testkit.waits import WaitTimeout, wait_for

# The namespaces Kargo's chart creates by default (global.clusterSecretsNamespace,
# global.systemResources.namespace, global.sharedResources.namespace), with the
# variables that name them to the management controller.
CHART_NAMESPACES = {
    "CLUSTER_SECRETS_NAMESPACE": "kargo-cluster-secrets",
    "SYSTEM_RESOURCES_NAMESPACE": "kargo-system-resources",
    "SHARED_RESOURCES_NAMESPACE": "kargo-shared-resources",
}
# The chart's default for the external webhooks server (https, host localhost).
EXTERNAL_WEBHOOK_SERVER_BASE_URL = "https://localhost"
MANAGEMENT_READY_LINES = (re.compile(rb"Starting workers.*\"Project\""),
                          re.compile(rb"Starting workers.*\"Namespace\""))


def _base_env(base: Mapping[str, str], kubeconfig: Path) -> dict[str, str]:
    env = {k: v for k, v in base.items() if not k.startswith("KARGO_")}
    env.update({"KUBECONFIG": str(kubeconfig), "METRICS_BIND_ADDRESS": "0",
                "KARGO_NAMESPACE": KARGO_NAMESPACE, "LOG_LEVEL": "info"})
    return env


def controller_env(
    base: Mapping[str, str], kubeconfig: Path, *, shard: str = "",
    default_controller: bool = True, extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of ``kargo controller`` on a plane (see the module docstring).

    ``shard`` / ``default_controller``: Kargo's ``SHARD_NAME`` / ``IS_DEFAULT_CONTROLLER``.
    """
    env = _base_env(base, kubeconfig)
    env.update({
        "ARGOCD_INTEGRATION_ENABLED": "false",
        "ROLLOUTS_INTEGRATION_ENABLED": "true",
        "IS_DEFAULT_CONTROLLER": "true" if default_controller else "false",
        "SHARD_NAME": shard,
    })
    env.update(extra or {})
    return env


def webhooks_env(base: Mapping[str, str], kubeconfig: Path, *, port: int,
                 tmpdir: Path) -> dict[str, str]:
    env = _base_env(base, kubeconfig)
    env.update({
        "WEBHOOK_SERVER_PORT": str(port),
        # controller-runtime reads the serving certificate from
        # $TMPDIR/k8s-webhook-server/serving-certs.
        "TMPDIR": str(tmpdir),
    })
    return env


def management_env(base: Mapping[str, str], kubeconfig: Path) -> dict[str, str]:
    """The environment of ``kargo management-controller`` (see the module docstring)."""
    env = _base_env(base, kubeconfig)
    env.update({"EXTERNAL_WEBHOOK_SERVER_BASE_URL": EXTERNAL_WEBHOOK_SERVER_BASE_URL,
                **CHART_NAMESPACES})
    return env


def serving_cert_dir(tmpdir: Path) -> Path:
    return tmpdir / "k8s-webhook-server" / "serving-certs"


def label_as_project(plane: ControlPlane, name: str) -> str:
    """Create namespace ``name`` labelled as Kargo labels a Project's, where Kargo's
    webhooks are not registered: nothing then turns a Project object into a namespace
    (its Project webhook does that, and the management controller runs only next to the
    webhooks), and nothing checks the label; it is set so that the namespace looks to
    Kargo's controller as a Project's does."""
    return plane.create_namespace(name, labels={PROJECT_LABEL: "true"})


def project_condition(plane: ControlPlane, name: str, kind: str) -> dict[str, Any]:
    """Condition ``kind`` of Project ``name`` ({} while Kargo has set none)."""
    out = plane.kubectl("get", "project", name, "-o", "json", check=False)
    if out.returncode != 0:
        return {}
    conditions = (json.loads(out.stdout).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c.get("type") == kind), {})


def _project_namespace(plane: ControlPlane, name: str) -> dict[str, Any] | None:
    out = plane.kubectl("get", "namespace", name, "-o", "json", "--ignore-not-found")
    return json.loads(out.stdout) if out.stdout.strip() else None


def create_project(plane: ControlPlane, name: str, *, timeout: float = 60) -> str:
    """Create Kargo Project ``name`` as a user does, with Kargo's webhooks and management
    controller running, and wait until its namespace exists (Kargo's Project webhook
    creates it, labelled and with Kargo's finalizer) and Kargo says the Project is
    ``Ready``; returns the namespace's name."""
    plane.apply_objects([objects.project(name)])
    namespace = wait_for(f"namespace {name} of Project {name}",
                         lambda: _project_namespace(plane, name), timeout=timeout)
    if namespace["metadata"].get("labels", {}).get(PROJECT_LABEL) != "true":
        raise PlaneError(f"namespace {name} exists but is not Project {name}'s: "
                         f"{namespace['metadata']}")
    wait_for(f"Project {name} Ready", lambda: project_condition(
        plane, name, "Ready").get("status") == "True", timeout=timeout)
    return name


def delete_project(plane: ControlPlane, name: str, *, timeout: float = 180) -> None:
    """Delete Kargo Project ``name`` as a user does and wait until its namespace is gone
    (Kargo's management controller deletes the namespace; the namespace controller
    deletes what is in it, through Kargo's webhooks)."""
    # kubectl waits for the Project (its finalizer goes once Kargo deleted the namespace),
    # then the namespace is waited for.
    plane.kubectl("delete", "project", name, "--ignore-not-found", f"--timeout={timeout:.0f}s",
                  timeout=timeout + 10)
    try:
        wait_for(f"namespace {name} of Project {name} to be gone",
                 lambda: _project_namespace(plane, name) is None, timeout=timeout)
    except WaitTimeout as err:
        left = (_project_namespace(plane, name) or {}).get("status")
        raise WaitTimeout(f"{err}; the namespace's status: {json.dumps(left)}") from err


def delete_projects(plane: ControlPlane) -> None:
    """``delete_project`` for every Project there is (before Kargo stops: its
    namespaces wait for Kargo's finalizers)."""
    out = plane.kubectl("get", "projects", "-o", "name")
    for ref in out.stdout.split():
        delete_project(plane, ref.partition("/")[2])


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


def start_management_controller(
    plane: ControlPlane, *, name: str = "kargo-management-controller",
) -> ManagedProcess:
    """Start ``kargo management-controller`` with the admin kubeconfig (see the module
    docstring) and wait until its Project and Namespace controllers run their workers."""
    started = time.monotonic()
    binary = trees.kargo_binary()
    for namespace in (KARGO_NAMESPACE, *CHART_NAMESPACES.values()):
        plane.create_namespace(namespace)
    log_path = plane.logs_dir / f"{name}.log"
    proc = plane.spawn(
        name, [str(binary), "management-controller"],
        env=management_env(plane.child_env(), plane.kubeconfig), cwd=plane.root,
        ready_check=logged_all(log_path, log_offset(log_path), MANAGEMENT_READY_LINES),
    )
    proc.wait_ready(60)
    plane.timed(name, started)
    return proc


def start_webhooks(plane: ControlPlane, *, name: str = "kargo-webhooks") -> ManagedProcess:
    """Start Kargo's own admission webhooks (``kargo kubernetes-webhooks-server``) and
    install what Kargo's chart installs for them, registered by URL with a caBundle
    (``kargo_chart.webhooks_server_objects``); returns once both configurations act."""
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
    plane.apply_objects(kargo_chart.webhooks_server_objects(
        url=f"https://127.0.0.1:{port}", ca_pem=plane.ca.pem.decode()))
    _wait_webhooks(plane)
    plane.timed(name, started)
    return proc


def _probe(plane: ControlPlane, obj: dict[str, Any]) -> str:
    """A server-side dry run of ``obj`` in Kargo's own namespace (not a Project's); what
    the API server answered."""
    obj = {**obj, "metadata": {"name": "probe", "namespace": KARGO_NAMESPACE}}
    out = plane.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(obj),
                        check=False)
    return out.stderr + out.stdout


def _webhooks_act(plane: ControlPlane) -> bool:
    """Both of Kargo's configurations act: its Stage validator refuses a Stage outside a
    Project namespace, and its Promotion defaulter (which runs before any validator)
    refuses a Promotion of a Stage that does not exist."""
    stage = _probe(plane, objects.stage("probe", warehouse="probe"))
    promotion = _probe(plane, objects.promotion("", stage="probe", freight="probe"))
    # Kargo's webhooks answer with a status of their own, which the API server passes on
    # as it is (without the usual "admission webhook ... denied the request").
    return ('namespace "kargo" is not a project' in stage
            and 'could not find Stage "probe"' in promotion)


def _wait_webhooks(plane: ControlPlane, timeout: float = 30) -> None:
    try:
        wait_for("Kargo's webhooks to act", lambda: _webhooks_act(plane), timeout=timeout)
    except WaitTimeout as err:
        raise PlaneError(f"Kargo's webhooks not active after {timeout:.0f}s ({err})") from err


def stop_webhooks(plane: ControlPlane, proc: ManagedProcess) -> None:
    """Remove what ``start_webhooks`` installed (the webhooks fail closed) and stop
    their server."""
    plane.kubectl("delete", "--ignore-not-found", *kargo_chart.installed_refs())
    plane.stop_process(proc)
