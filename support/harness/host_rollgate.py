"""rollgate's processes on the host, next to a plane: for tests of admission logic,
faults and benchmarks, and ``make dev --host``.

``HostRollgate.start()`` installs the identities and permissions the processes run
under (the Namespace/ServiceAccount/RBAC objects of ``manifests/overlays/dev``), and with
``webhook=True`` starts ``python -m webhook`` (gunicorn over TLS, certificates from
``certs``) and registers it by URL with its caBundle, using the two webhook
configurations of ``manifests/webhook`` (everything but their client config kept).
Reconcilers start on request. Deployments, Services and the chart are the node's
(``harness.kits.node``): here the processes run as the ServiceAccounts they would have
in a pod, through client certificates that name them.
"""

from __future__ import annotations

import json
import ssl
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import certs
from certs.generate import CertPaths
from harness import webhook_probes
from harness.paths import REPO_ROOT
from harness.plane import ControlPlane, PlaneError
from harness.process import ManagedProcess, free_port, http_ok

SYSTEM_NAMESPACE = "rollgate-system"
WEBHOOK_SA = "rollgate-webhook"
RECONCILER_SA = "rollgate-reconciler"
WEBHOOK_CONFIG_NAME = "rollgate"
# Objects taken from manifests/: the identities and permissions the processes run under.
# Deployments, Services and webhook configurations are left out because the processes
# run on the host and the webhook is registered by URL.
INSTALLED_KINDS = frozenset(
    {"Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
)


@dataclass
class HostRollgate:
    """rollgate's webhook and reconcilers as host processes on ``plane``."""

    plane: ControlPlane
    webhook_args: Sequence[str] = ()
    # A tree other than this checkout's (the benchmarks' baseline runs an older one).
    repo_root: Path = REPO_ROOT
    webhook: ManagedProcess | None = field(init=False, default=None)
    webhook_url: str = field(init=False, default="")
    webhook_certs: CertPaths | None = field(init=False, default=None)
    installed_objects: list[str] = field(init=False, default_factory=list)
    _webhook_port: int = field(init=False, default=0)
    _webhook_configs: list[dict[str, Any]] = field(init=False, default_factory=list)

    def start(self, *, webhook: bool = True) -> HostRollgate:
        """RBAC, then (``webhook``) the webhook, registered and active."""
        self.install_rbac()
        if webhook:
            self.start_webhook()
            self.register_webhooks()
        return self

    def _rbac_objects(self) -> list[dict[str, Any]]:
        rendered = self.plane.kustomize(self.repo_root / "manifests" / "overlays" / "dev")
        return [o for o in rendered if o.get("kind") in INSTALLED_KINDS]

    def remove(self) -> None:
        """Stop the webhook, delete its configurations and what ``install_rbac`` applied
        (the namespace last), so a chart can be installed on the same plane afterwards."""
        self.unregister_webhooks()
        self.stop_webhook()
        objects = self._rbac_objects()
        doc = {"apiVersion": "v1", "kind": "List",
               "items": [o for o in objects if o["kind"] != "Namespace"]}
        self.plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=json.dumps(doc))
        self.plane.kubectl("delete", "--ignore-not-found", "--timeout=180s", *(
            f"namespace/{o['metadata']['name']}" for o in objects if o["kind"] == "Namespace"))

    def install_rbac(self) -> None:
        """The Namespace/ServiceAccount/RBAC objects of the dev overlay (the production
        kustomization plus engine-mode RBAC); a failure to render it fails the start."""
        started = time.monotonic()
        wanted = self._rbac_objects()
        self.plane.apply_objects([o for o in wanted if o["kind"] == "Namespace"])
        self.plane.apply_objects([o for o in wanted if o["kind"] != "Namespace"])
        self.installed_objects = [f"{o['kind']}/{o['metadata']['name']}" for o in wanted]
        self.plane.timed("rbac", started)

    def _env(self) -> dict[str, str]:
        return self.plane.child_env(PYTHONPATH=str(self.repo_root))

    # ------------------------------------------------------------------ webhook

    def certificates(self) -> CertPaths:
        """The webhook's serving certificate and CA (made on first use)."""
        if self.webhook_certs is None:
            self.webhook_certs = certs.generate(self.plane.root / "webhook-certs")
        return self.webhook_certs

    def serve_files(self, files: dict[str, bytes], directory: Path) -> ManagedProcess:
        """Start the webhook with a TLS Secret's files (``tls.crt``, ``tls.key``,
        ``ca.crt``) written into ``directory``: it serves exactly the certificate an
        installer (a hook Job, cert-manager) put in the cluster."""
        directory.mkdir()
        for name, data in files.items():
            (directory / name).write_bytes(data)
        self.webhook_certs = CertPaths(
            out_dir=directory, ca_cert=directory / "ca.crt", ca_key=directory / "ca.key",
            tls_cert=directory / "tls.crt", tls_key=directory / "tls.key")
        return self.start_webhook()

    def start_webhook(self) -> ManagedProcess:
        """Start ``python -m webhook`` (gunicorn over TLS) and wait for /readyz."""
        if self.webhook is not None and self.webhook.alive():
            return self.webhook
        paths = self.certificates()
        started = time.monotonic()
        # Keep the port across restarts so the registered URL stays right.
        self._webhook_port = self._webhook_port or free_port()
        self.webhook_url = f"https://127.0.0.1:{self._webhook_port}"
        ctx = ssl.create_default_context(cafile=str(paths.ca_cert))
        # Readiness asks whether it serves a certificate of that CA; the name is the API
        # server's to check (cert-manager's certificate names only the Service).
        ctx.check_hostname = False
        url = self.webhook_url
        kubeconfig = self.plane.serviceaccount_kubeconfig(SYSTEM_NAMESPACE, WEBHOOK_SA)
        self.webhook = self.plane.spawn(
            "webhook",
            [
                sys.executable, "-m", "webhook",
                "--bind", f"127.0.0.1:{self._webhook_port}",
                "--tls-cert-file", str(paths.tls_cert),
                "--tls-key-file", str(paths.tls_key),
                "--kubeconfig", str(kubeconfig),
                *self.webhook_args,
            ],
            url=url, env=self._env(), cwd=self.repo_root,
            ready_check=lambda: http_ok(url + "/readyz", ctx),
        )
        self.webhook.wait_ready(30)
        self.plane.timed("webhook", started)
        return self.webhook

    def stop_webhook(self) -> None:
        if self.webhook is not None:
            self.plane.stop_process(self.webhook)
            self.webhook = None

    def webhook_configurations(self) -> list[dict[str, Any]]:
        """The two webhook configurations from manifests/webhook, rewritten from the
        in-cluster Service to this host's URL with the webhook's CA bundle."""
        objects = self.plane.kustomize(self.repo_root / "manifests" / "webhook")
        configs = [
            o for o in objects
            if o.get("kind") in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        ]
        if len(configs) != 2:
            raise PlaneError(
                "manifests/webhook must render one MutatingWebhookConfiguration and one "
                f"ValidatingWebhookConfiguration; found {[o.get('kind') for o in configs]}"
            )
        bundle = certs.ca_bundle(self.certificates().ca_cert)
        for config in configs:
            config["metadata"].pop("annotations", None)
            for hook in config.get("webhooks", []):
                client = hook.get("clientConfig", {})
                path = (client.get("service") or {}).get("path", "")
                hook["clientConfig"] = {"url": f"{self.webhook_url}{path}", "caBundle": bundle}
        return configs

    def register_webhooks(self, *, wait: bool = True) -> None:
        """Apply both webhook configurations; with ``wait``, return once the API server
        uses them (it picks up configuration changes asynchronously)."""
        if not self._webhook_configs:
            self._webhook_configs = self.webhook_configurations()
        self.plane.apply_objects(self._webhook_configs)
        if wait:
            self.wait_webhooks(validating=True, mutating=True)

    def unregister_webhooks(
        self, *, validating: bool = True, mutating: bool = True, wait: bool = True
    ) -> None:
        """Delete the webhook configurations (both, or the one asked for)."""
        kinds = [k for k, on in (("validatingwebhookconfiguration", validating),
                                 ("mutatingwebhookconfiguration", mutating)) if on]
        if not kinds:
            return
        self.plane.kubectl("delete", "--ignore-not-found",
                           *[f"{k}/{WEBHOOK_CONFIG_NAME}" for k in kinds])
        if wait:
            self.wait_webhooks(validating=False if validating else None,
                               mutating=False if mutating else None)

    def wait_webhooks(self, *, validating: bool | None, mutating: bool | None) -> None:
        """Until dry runs show each webhook (in)active as asked; the mutating one is
        visible only while the process runs, since it fails open silently."""
        if mutating is not None and (self.webhook is None or not self.webhook.alive()):
            mutating = None
        webhook_probes.wait_until(self.plane, validating=validating, mutating=mutating)

    # ------------------------------------------------------------------ reconciler

    def start_reconciler(self, *extra_args: str, name: str = "reconciler") -> ManagedProcess:
        """Start ``python -m reconciler`` as ServiceAccount rollgate-system/rollgate-reconciler.

        Not waited for: callers decide (``.wait_ready()``), since a standby replica under
        leader election is alive but may not report ready the same way.
        """
        port = free_port()
        kubeconfig = self.plane.serviceaccount_kubeconfig(SYSTEM_NAMESPACE, RECONCILER_SA)
        return self.plane.spawn(
            name,
            [
                sys.executable, "-m", "reconciler",
                "--kubeconfig", str(kubeconfig),
                "--bind-address", f"127.0.0.1:{port}",
                *extra_args,
            ],
            url=f"http://127.0.0.1:{port}",
            env=self._env(),
            cwd=self.repo_root,
        )
