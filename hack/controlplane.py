"""A real Kubernetes control plane on loopback for e2e tests and ``make dev``.

Starts etcd, kube-apiserver and a minimal kube-controller-manager (garbage collection
and namespace deletion only) from the binaries ``hack/k8s/build.sh`` builds, the way
controller-runtime's envtest does, then installs what rollgate needs on top: the dev
CRDs, the Namespace/ServiceAccount/RBAC objects from ``manifests/``, the webhook
(gunicorn over TLS with certificates from ``certs``) registered with a URL client
config, and on request the reconciler.

Children are ``k8sprocess.ManagedProcess``es: a failed test, Ctrl-C or a killed
harness leaves no etcd, kube-apiserver, gunicorn or reconciler behind.

Identities: the admin kubeconfig carries a client certificate in ``system:masters``.
ServiceAccount kubeconfigs carry a client certificate whose subject *is* the
ServiceAccount (CN ``system:serviceaccount:<ns>:<name>``, O the two ServiceAccount
groups). That authenticates exactly as the ServiceAccount to RBAC, and unlike a
kubeconfig ``as:`` impersonation entry it is honoured by the official Python client,
which ignores ``as:`` (so the webhook and reconciler would silently run as admin).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import upstream
import versions
import yaml
from k8spki import CA, serviceaccount_signing_key, write_kubeconfig
from k8sprocess import (
    ManagedProcess,
    free_port,
    http_ok,
    install_signal_handlers,
    log_offset,
    logged,
    logged_all,
)
from k8sprocess import ProcessError as ControlPlaneError

__all__ = [
    "BinariesMissing",
    "ControlPlane",
    "ControlPlaneError",
    "ManagedProcess",
    "find_binaries",
    "free_port",
]

REPO_ROOT = Path(__file__).resolve().parent.parent
VERSION_FILE = versions.VERSIONS_FILE
SYSTEM_NAMESPACE = "rollgate-system"
WEBHOOK_SA = "rollgate-webhook"
RECONCILER_SA = "rollgate-reconciler"
WEBHOOK_CONFIG_NAME = "rollgate"
BINARY_NAMES = ("etcd", "kube-apiserver", "kube-controller-manager", "kubectl")
# Objects the harness takes from manifests/: the identities and permissions the
# processes run under. Deployments, Services and webhook configurations are left out
# because the processes run on the host and the webhook is registered by URL.
INSTALLED_KINDS = frozenset(
    {"Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}
)


class BinariesMissing(ControlPlaneError):
    """The Kubernetes binaries are not built; ``make k8s`` builds them."""


# --------------------------------------------------------------------------- binaries


@dataclass(frozen=True, slots=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kubectl: Path


def k8s_version() -> str:
    return versions.kubernetes()


def binaries_dir() -> Path:
    """Where build.sh puts the binaries (or ``$ROLLGATE_K8S_BIN`` when set)."""
    if os.environ.get("ROLLGATE_K8S_BIN"):
        return Path(os.environ["ROLLGATE_K8S_BIN"])
    cache = os.environ.get("ROLLGATE_K8S_CACHE") or str(Path.home() / ".cache/rollgate/k8s")
    return Path(cache) / k8s_version()


def find_binaries() -> Binaries:
    directory = binaries_dir()
    paths = {name: directory / name for name in BINARY_NAMES}
    missing = [str(p) for p in paths.values() if not os.access(p, os.X_OK)]
    if missing:
        raise BinariesMissing(
            f"Kubernetes binaries missing: {', '.join(missing)}. "
            "Run `make k8s` (hack/k8s/build.sh) to build them, "
            "or set ROLLGATE_K8S_BIN to a directory that holds them."
        )
    return Binaries(
        etcd=paths["etcd"],
        kube_apiserver=paths["kube-apiserver"],
        kube_controller_manager=paths["kube-controller-manager"],
        kubectl=paths["kubectl"],
    )


PROBE_DIGEST = "ab" * 32


def webhook_probes() -> tuple[dict[str, Any], dict[str, Any]]:
    """Dry-run objects that show whether each webhook is active, both accepted by the
    real CRDs: a Stage whose only fault is one the CRD cannot see (a duplicate template
    reference), and a RolloutManager whose digest only the mutating webhook lowercases.
    Dry runs in ``default`` (the webhooks never gate rollgate's own namespace); the
    webhook logs denials of dry runs at debug level only."""
    meta = {"name": "rollgate-probe", "namespace": "default"}
    stage = {
        "apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Stage", "metadata": meta,
        "spec": {
            "requestedFreight": [{"origin": {"kind": "Warehouse", "name": "probe"},
                                  "sources": {"direct": True}}],
            "verification": {"analysisTemplates": [{"name": "probe"}, {"name": "probe"}]},
        },
    }
    plugin = {"name": "rollgate/probe", "location": "https://plugins.invalid/probe",
              "sha256": PROBE_DIGEST.upper()}
    manager = {
        "apiVersion": "argoproj.io/v1alpha1", "kind": "RolloutManager", "metadata": meta,
        "spec": {"plugins": {"metric": [plugin]}},
    }
    return stage, manager


# --------------------------------------------------------------------------- the plane


def _objects(rendered: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(rendered) if isinstance(d, dict)]


# What the API server sets on a stored object; `kubectl get crd -o yaml` output carries
# it, and applying it back would fail (resourceVersion) or lie (status).
_SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "generation",
                  "managedFields", "selfLink")


def crds_from_dir(directory: Path) -> list[dict[str, Any]]:
    """Every CustomResourceDefinition in ``*.yaml``/``*.yml``/``*.json`` under
    ``directory`` (``List`` documents expanded), as applyable objects: files written by
    ``kubectl get crd NAME -o yaml`` lose their server-set fields and status."""
    if not directory.is_dir():
        raise ControlPlaneError(f"ROLLGATE_CRDS_DIR={directory} is not a directory")
    found: list[dict[str, Any]] = []
    for path in sorted(directory.rglob("*")):
        if path.suffix not in (".yaml", ".yml", ".json") or not path.is_file():
            continue
        try:
            docs = _objects(path.read_text())
        except yaml.YAMLError as err:
            raise ControlPlaneError(f"{path}: not YAML: {err}") from err
        for doc in docs:
            items = doc.get("items") if doc.get("kind", "").endswith("List") else [doc]
            for item in items or []:
                if isinstance(item, dict) and item.get("kind") == "CustomResourceDefinition":
                    found.append(_applyable(item))
    return found


def _applyable(crd: dict[str, Any]) -> dict[str, Any]:
    crd = {k: v for k, v in crd.items() if k != "status"}
    meta = dict(crd.get("metadata") or {})
    for key in _SERVER_FIELDS:
        meta.pop(key, None)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k != "kubectl.kubernetes.io/last-applied-configuration"}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    crd["metadata"] = meta
    return crd


@dataclass
class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager (+ webhook, reconcilers).

    ``start()`` brings everything up; ``stop()`` (or the context manager) ends it.
    """

    work_dir: Path | None = None
    repo_root: Path = REPO_ROOT
    with_webhook: bool = True
    webhook_args: Sequence[str] = ()
    # The upstream trees' CRDs in place of ours (see crd_objects); False keeps ours, so
    # tests can show that ours behave like theirs.
    tree_crds: bool = True
    verbose: bool = False
    kubeconfig: Path = field(init=False)
    binaries: Binaries = field(init=False)
    server: str = field(init=False, default="")
    webhook_url: str = field(init=False, default="")
    webhook: ManagedProcess | None = field(init=False, default=None)
    timings: dict[str, float] = field(init=False, default_factory=dict)
    _procs: list[ManagedProcess] = field(init=False, default_factory=list)
    _owns_work_dir: bool = field(init=False, default=False)
    _sa_kubeconfigs: dict[tuple[str, str], Path] = field(init=False, default_factory=dict)
    _webhook_configs: list[dict[str, Any]] = field(init=False, default_factory=list)
    _webhook_port: int = field(init=False, default=0)

    # ------------------------------------------------------------------ lifecycle

    def __post_init__(self) -> None:
        if self.work_dir is None:
            self.work_dir = Path(tempfile.mkdtemp(prefix="rollgate-cp-"))
            self._owns_work_dir = True
        self.work_dir = Path(self.work_dir).resolve()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir = self.work_dir / "logs"
        self.pki_dir = self.work_dir / "pki"
        self.kubeconfig = self.work_dir / "admin.kubeconfig"

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _say(self, message: str) -> None:
        if self.verbose:
            print(f"[controlplane] {message}", file=sys.stderr, flush=True)

    def _timed(self, label: str, started: float) -> None:
        self.timings[label] = time.monotonic() - started
        self._say(f"{label}: {self.timings[label]:.1f}s")

    def start(self) -> ControlPlane:
        self.binaries = find_binaries()
        install_signal_handlers()
        started = time.monotonic()
        # Logs of an earlier plane in a reused work dir would read as this one's.
        shutil.rmtree(self.logs_dir, ignore_errors=True)
        try:
            self._make_pki()
            self._start_etcd()
            self._start_apiserver()
            self._start_controller_manager()
            self._install_crds()
            self._install_rbac()
            if self.with_webhook:
                self._make_webhook_certs()
                self.start_webhook()
                self.register_webhooks()
        except BaseException:
            self.print_logs_hint()
            self.stop(remove_data=False)
            raise
        self._timed("total", started)
        return self

    def stop(self, *, remove_data: bool = True) -> None:
        """Stop every process this plane started, newest first.

        A work dir the caller chose keeps its logs (only etcd's data goes); a temporary
        one made here is removed entirely, unless ``remove_data=False`` (after a
        failed start, so the logs can be read).
        """
        for proc in reversed(self._procs):
            proc.stop()
        self._procs.clear()
        self.webhook = None
        if remove_data and self.work_dir is not None:
            target = self.work_dir if self._owns_work_dir else self.work_dir / "etcd"
            shutil.rmtree(target, ignore_errors=True)

    @property
    def processes(self) -> list[ManagedProcess]:
        """The processes this plane runs now, oldest first."""
        return list(self._procs)

    def print_logs_hint(self) -> None:
        """Where the process logs are, for a failure message."""
        if self.logs_dir.exists():
            paths = "\n  ".join(str(p) for p in sorted(self.logs_dir.glob("*.log")))
            print(f"[controlplane] process logs:\n  {paths}", file=sys.stderr, flush=True)

    def _spawn(self, name: str, argv: Sequence[str], **kwargs: Any) -> ManagedProcess:
        proc = ManagedProcess(name, argv, log_path=self.logs_dir / f"{name}.log", **kwargs)
        self._procs.append(proc)
        return proc

    def _forget(self, proc: ManagedProcess) -> None:
        proc.stop()
        with contextlib.suppress(ValueError):
            self._procs.remove(proc)

    # ------------------------------------------------------------------ components

    def _make_pki(self) -> None:
        self.pki_dir.mkdir(parents=True, exist_ok=True)
        self._ca = CA.create("rollgate-test-ca")
        self._ca_pem = self._ca.pem
        (self.pki_dir / "ca.crt").write_bytes(self._ca_pem)
        cert, key = self._ca.issue(
            common_name="kube-apiserver",
            sans=["127.0.0.1", "localhost", "kubernetes", "kubernetes.default",
                  "kubernetes.default.svc", "10.0.0.1"],
            server=True,
        )
        (self.pki_dir / "apiserver.crt").write_bytes(cert)
        (self.pki_dir / "apiserver.key").write_bytes(key)
        self._admin_cert, self._admin_key = self._ca.issue(
            common_name="rollgate-admin", organizations=["system:masters"], client=True
        )
        sa_private, sa_public = serviceaccount_signing_key()
        (self.pki_dir / "sa.key").write_bytes(sa_private)
        (self.pki_dir / "sa.pub").write_bytes(sa_public)

    def _start_etcd(self) -> None:
        started = time.monotonic()
        client, peer = free_port(), free_port()
        data = self.work_dir / "etcd"
        shutil.rmtree(data, ignore_errors=True)
        self.etcd_url = f"http://127.0.0.1:{client}"
        proc = self._spawn(
            "etcd",
            [
                str(self.binaries.etcd),
                f"--data-dir={data}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=default=http://127.0.0.1:{peer}",
                # Test data is thrown away: skipping fsync makes every write fast.
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
            url=self.etcd_url,
            ready_check=lambda: http_ok(self.etcd_url + "/health"),
            # Throwaway state: no graceful shutdown is worth a stray process.
            death_signal=signal.SIGKILL,
        )
        proc.wait_ready(30)
        self._timed("etcd", started)

    def _start_apiserver(self) -> None:
        started = time.monotonic()
        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        pki = self.pki_dir
        write_kubeconfig(
            self.kubeconfig, server=self.server, ca_pem=self._ca_pem,
            cert_pem=self._admin_cert, key_pem=self._admin_key, user="rollgate-admin",
        )
        (pki / "admin.crt").write_bytes(self._admin_cert)
        (pki / "admin.key").write_bytes(self._admin_key)
        ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        ctx.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        self._admin_ssl = ctx
        proc = self._spawn(
            "kube-apiserver",
            [
                str(self.binaries.kube_apiserver),
                f"--etcd-servers={self.etcd_url}",
                f"--etcd-prefix=/rollgate-{port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={pki}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                "--authorization-mode=RBAC",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--allow-privileged=true",
                # No kubelet or Pods here: admission that needs them only slows things.
                "--disable-admission-plugins=ServiceAccount",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
                "--v=1",
            ],
            url=self.server,
            ready_check=lambda: http_ok(self.server + "/readyz", self._admin_ssl),
            # A SIGTERMed kube-apiserver whose etcd died with it hangs in shutdown.
            death_signal=signal.SIGKILL,
            stop_timeout=15,
        )
        proc.wait_ready(60)
        self._timed("kube-apiserver", started)

    def _start_controller_manager(self) -> None:
        """Only the controllers whose absence users would notice in tests: garbage
        collection (owner references) and namespace deletion."""
        started = time.monotonic()
        port = free_port()
        proc = self._spawn(
            "kube-controller-manager",
            [
                str(self.binaries.kube_controller_manager),
                f"--kubeconfig={self.kubeconfig}",
                f"--authentication-kubeconfig={self.kubeconfig}",
                f"--authorization-kubeconfig={self.kubeconfig}",
                "--controllers=garbage-collector-controller,namespace-controller",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.pki_dir / 'kcm'}",
                "--concurrent-gc-syncs=5",
                "--v=1",
            ],
            url=f"https://127.0.0.1:{port}",
            ready_check=lambda: http_ok(
                f"https://127.0.0.1:{port}/healthz", ssl._create_unverified_context()
            ),
            death_signal=signal.SIGKILL,
        )
        proc.wait_ready(30)
        self._timed("kube-controller-manager", started)

    # ------------------------------------------------------------------ kubectl

    def kubectl(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        kubeconfig: Path | str | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        """Run the version-matched kubectl against this plane (admin by default)."""
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        argv = [str(self.binaries.kubectl), f"--kubeconfig={kubeconfig or self.kubeconfig}",
                *args]
        result = subprocess.run(
            argv, input=input, capture_output=True, text=True, env=env, timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise ControlPlaneError(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stderr.strip()}\n{result.stdout.strip()}"
            )
        return result

    def apply_objects(
        self, objects: Sequence[dict[str, Any]], *, server_side: bool = False, **kwargs: Any
    ) -> None:
        if objects:
            doc = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
            mode = ["--server-side", "--force-conflicts"] if server_side else []
            self.kubectl("apply", *mode, "-f", "-", input=json.dumps(doc), **kwargs)

    def kustomize(self, directory: Path) -> list[dict[str, Any]]:
        return _objects(self.kubectl("kustomize", str(directory)).stdout)

    # ------------------------------------------------------------------ installs

    def crd_objects(self) -> list[dict[str, Any]]:
        """The CRDs this plane installs: ours from ``manifests/crds``; each replaced by the
        CRD of the same name from the upstream source trees that are there (Kargo's nine,
        argo-rollouts-manager's RolloutManager), because the real controllers may run on
        this plane and must meet their own CRDs; and over both, the CRDs found in
        ``$ROLLGATE_CRDS_DIR`` (see ``crds_from_dir``), plus any other CRD found there."""
        crds = {c["metadata"]["name"]: c
                for c in self.kustomize(self.repo_root / "manifests" / "crds")}
        trees = upstream.tree_crds() if self.tree_crds else []
        if trees:
            self._say("CRDs from the upstream trees: "
                      + ", ".join(sorted(c["metadata"]["name"] for c in trees)))
        crds.update({c["metadata"]["name"]: c for c in trees})
        directory = os.environ.get("ROLLGATE_CRDS_DIR")
        if directory:
            theirs = crds_from_dir(Path(directory))
            if not theirs:
                raise ControlPlaneError(f"ROLLGATE_CRDS_DIR={directory} holds no CRD")
            self._say("CRDs from ROLLGATE_CRDS_DIR: "
                      + ", ".join(sorted(c["metadata"]["name"] for c in theirs)))
            crds.update({c["metadata"]["name"]: c for c in theirs})
        return list(crds.values())

    def _install_crds(self) -> None:
        started = time.monotonic()
        crds = self.crd_objects()
        # Server-side: upstream CRDs are too large for the last-applied annotation.
        self.apply_objects(crds, server_side=True)
        names = [c["metadata"]["name"] for c in crds]
        self.kubectl("wait", "--for=condition=Established", "--timeout=60s",
                     *[f"crd/{n}" for n in names])
        # Established is not yet "served": wait until discovery lists each resource.
        deadline = time.monotonic() + 30
        pending = {(c["spec"]["group"], c["spec"]["names"]["plural"]) for c in crds}
        while pending:
            out = self.kubectl("api-resources", "-o", "name", check=False).stdout.split()
            pending = {(g, p) for g, p in pending if f"{p}.{g}" not in out}
            if not pending:
                break
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"CRDs not served after 30s: {sorted(pending)}")
            time.sleep(0.2)
        self._timed("crds", started)

    def _install_rbac(self) -> None:
        """The Namespace/ServiceAccount/RBAC objects of the dev overlay (the production
        kustomization plus engine-mode RBAC); a failure to render it fails the start."""
        started = time.monotonic()
        rendered = self.kustomize(self.repo_root / "manifests" / "overlays" / "dev")
        wanted = [o for o in rendered if o.get("kind") in INSTALLED_KINDS]
        namespaces = [o for o in wanted if o["kind"] == "Namespace"]
        self.apply_objects(namespaces)
        self.apply_objects([o for o in wanted if o["kind"] != "Namespace"])
        self.installed_objects = [f"{o['kind']}/{o['metadata']['name']}" for o in wanted]
        self._timed("rbac", started)

    # ------------------------------------------------------------------ identities

    def serviceaccount_kubeconfig(self, namespace: str, name: str) -> Path:
        """A kubeconfig that authenticates as ServiceAccount ``namespace/name``."""
        key = (namespace, name)
        if key not in self._sa_kubeconfigs:
            cert, private_key = self._ca.issue_serviceaccount(namespace, name)
            path = self.work_dir / "kubeconfigs" / f"{namespace}.{name}.kubeconfig"
            self._sa_kubeconfigs[key] = write_kubeconfig(
                path, server=self.server, ca_pem=self._ca_pem, cert_pem=cert,
                key_pem=private_key, user=f"{namespace}.{name}",
            )
        return self._sa_kubeconfigs[key]

    def api_client(self, *, impersonate: str | None = None) -> Any:
        """An official kubernetes ``ApiClient``: admin, or acting as ``impersonate``.

        A ServiceAccount user name gets its own certificate (exact groups); any other
        name is impersonated from the admin with the Impersonate-User header.
        """
        from kubernetes import config

        prefix = "system:serviceaccount:"
        if impersonate and impersonate.startswith(prefix):
            namespace, _, name = impersonate[len(prefix):].partition(":")
            path = self.serviceaccount_kubeconfig(namespace, name)
            return config.new_client_from_config(config_file=str(path))
        client = config.new_client_from_config(config_file=str(self.kubeconfig))
        if impersonate:
            client.set_default_header("Impersonate-User", impersonate)
        return client

    # ------------------------------------------------------------------ webhook

    def _make_webhook_certs(self) -> None:
        import certs

        self.webhook_certs = certs.generate(self.work_dir / "webhook-certs")
        self._webhook_ca_bundle = certs.ca_bundle(self.webhook_certs.ca_cert)

    def start_webhook(self) -> ManagedProcess:
        """Start ``python -m webhook`` (gunicorn over TLS) and wait for /readyz."""
        if self.webhook is not None and self.webhook.alive():
            return self.webhook
        if not hasattr(self, "webhook_certs"):
            self._make_webhook_certs()
        started = time.monotonic()
        # Keep the port across restarts so the registered URL stays right.
        self._webhook_port = self._webhook_port or free_port()
        self.webhook_url = f"https://127.0.0.1:{self._webhook_port}"
        ctx = ssl.create_default_context(cafile=str(self.webhook_certs.ca_cert))
        # Readiness asks whether it serves a certificate of that CA; the name is the API
        # server's to check (cert-manager's certificate names only the Service).
        ctx.check_hostname = False
        self.webhook = self._spawn(
            "webhook",
            [
                sys.executable, "-m", "webhook",
                "--bind", f"127.0.0.1:{self._webhook_port}",
                "--tls-cert-file", str(self.webhook_certs.tls_cert),
                "--tls-key-file", str(self.webhook_certs.tls_key),
                "--kubeconfig", str(self.serviceaccount_kubeconfig(SYSTEM_NAMESPACE, WEBHOOK_SA)),
                *self.webhook_args,
            ],
            url=self.webhook_url,
            env=self._python_env(),
            cwd=self.repo_root,
            ready_check=lambda: http_ok(self.webhook_url + "/readyz", ctx),
        )
        self.webhook.wait_ready(30)
        self._timed("webhook", started)
        return self.webhook

    def stop_webhook(self) -> None:
        if self.webhook is not None:
            self._forget(self.webhook)
            self.webhook = None

    def webhook_configurations(self) -> list[dict[str, Any]]:
        """The two webhook configurations from manifests/webhook, rewritten from the
        in-cluster Service to this host's URL with the test CA bundle."""
        objects = self.kustomize(self.repo_root / "manifests" / "webhook")
        configs = [
            o for o in objects
            if o.get("kind") in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        ]
        if len(configs) != 2:
            raise ControlPlaneError(
                "manifests/webhook must render one MutatingWebhookConfiguration and one "
                f"ValidatingWebhookConfiguration; found {[o.get('kind') for o in configs]}"
            )
        for config in configs:
            config["metadata"].pop("annotations", None)
            for hook in config.get("webhooks", []):
                client = hook.get("clientConfig", {})
                path = (client.get("service") or {}).get("path", "")
                hook["clientConfig"] = {
                    "url": f"{self.webhook_url}{path}",
                    "caBundle": self._webhook_ca_bundle,
                }
        return configs

    def register_webhooks(self, *, wait: bool = True) -> None:
        """Apply both webhook configurations; with ``wait``, return once the API server
        uses them (it picks up configuration changes asynchronously)."""
        if not self._webhook_configs:
            self._webhook_configs = self.webhook_configurations()
        self.apply_objects(self._webhook_configs)
        if wait:
            self._wait_webhooks(validating=True, mutating=True)

    def unregister_webhooks(
        self, *, validating: bool = True, mutating: bool = True, wait: bool = True
    ) -> None:
        """Delete the webhook configurations (both, or the one asked for)."""
        kinds = [k for k, on in (("validatingwebhookconfiguration", validating),
                                 ("mutatingwebhookconfiguration", mutating)) if on]
        if not kinds:
            return
        self.kubectl("delete", "--ignore-not-found",
                     *[f"{k}/{WEBHOOK_CONFIG_NAME}" for k in kinds])
        if wait:
            self._wait_webhooks(validating=False if validating else None,
                                mutating=False if mutating else None)

    def _wait_webhooks(
        self, *, validating: bool | None, mutating: bool | None, timeout: float = 15
    ) -> None:
        """Wait until server-side dry runs show each webhook (in)active as asked
        (``None``: don't care), so a test's next request sees the state it set up.

        The validating webhook is visible whether or not the webhook process runs (it
        denies, or fails closed naming itself); the mutating one only while the process
        runs, since it fails open silently.
        """
        if mutating is not None and (self.webhook is None or not self.webhook.alive()):
            mutating = None
        probe_invalid, probe_valid = webhook_probes()
        deadline = time.monotonic() + timeout
        while True:
            seen_validating = seen_mutating = None
            if validating is not None:
                out = self.kubectl("create", "--dry-run=server", "-f", "-",
                                   input=json.dumps(probe_invalid), check=False)
                # The CRD accepts this probe; only the validating webhook refuses it:
                # either it denies it or, with the process down, fails closed. Both
                # messages name it; any other refusal means the probe itself is wrong.
                seen_validating = out.returncode != 0 and (
                    "validate-stages.rollgate.dev" in out.stderr + out.stdout)
            if mutating is not None:
                out = self.kubectl("create", "--dry-run=server", "-f", "-", "-o", "json",
                                   input=json.dumps(probe_valid), check=False)
                seen_mutating = out.returncode == 0 and PROBE_DIGEST in out.stdout
            if seen_validating == validating and seen_mutating == mutating:
                return
            if time.monotonic() > deadline:
                self._say(
                    f"webhooks not in the expected state after {timeout:.0f}s: validating "
                    f"active={seen_validating} (want {validating}), mutating active="
                    f"{seen_mutating} (want {mutating})"
                )
                return
            time.sleep(0.2)

    # ------------------------------------------------------------------ reconciler

    def _python_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(self.repo_root), env.get("PYTHONPATH", "")) if p
        )
        return env

    def start_reconciler(self, *extra_args: str, name: str = "reconciler") -> ManagedProcess:
        """Start ``python -m reconciler`` as ServiceAccount rollgate-system/rollgate-reconciler.

        Not waited for: callers decide (``.wait_ready()``), since a standby replica under
        leader election is alive but may not report ready the same way.
        """
        port = free_port()
        kubeconfig = self.serviceaccount_kubeconfig(SYSTEM_NAMESPACE, RECONCILER_SA)
        return self._spawn(
            name,
            [
                sys.executable, "-m", "reconciler",
                "--kubeconfig", str(kubeconfig),
                "--bind-address", f"127.0.0.1:{port}",
                *extra_args,
            ],
            url=f"http://127.0.0.1:{port}",
            env=self._python_env(),
            cwd=self.repo_root,
        )

    # ------------------------------------------------------------------ argo rollouts

    def start_rollouts_controller(
        self,
        *,
        namespace: str | None = None,
        config_namespace: str = "argo-rollouts",
        name: str = "rollouts-controller",
    ) -> ManagedProcess:
        """Start the real Argo Rollouts controller (AnalysisRuns only; see
        hack/rollouts.py) and wait until it acts on runs.

        ``namespace``: watch only that namespace, as argo-rollouts-manager runs it for a
        namespace-scoped RolloutManager (it then reads ``argo-rollouts-config`` there);
        otherwise every namespace, with the ConfigMap in ``config_namespace``.
        """
        import rollouts

        started = time.monotonic()
        config_ns = namespace or config_namespace
        self.kubectl("create", "namespace", config_ns, check=False)
        proc = rollouts.start_controller(
            self.kubeconfig, self.work_dir / name, log_path=self.logs_dir / f"{name}.log",
            namespace=namespace, config_namespace=config_ns, name=name,
        )
        self._procs.append(proc)
        proc.wait_ready(60)
        self._timed(name, started)
        return proc

    # ------------------------------------------------------------------ kargo

    def project_namespace(self, name: str) -> str:
        """Create namespace ``name`` as a Kargo Project's (the label Kargo's validators
        require)."""
        self.apply_objects([{"apiVersion": "v1", "kind": "Namespace", "metadata": {
            "name": name, "labels": {upstream.PROJECT_LABEL: "true"}}}])
        return name

    def start_kargo_controller(
        self,
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
        binary = upstream.kargo_binary()
        self.kubectl("create", "namespace", upstream.KARGO_NAMESPACE, check=False)
        log_path = self.logs_dir / f"{name}.log"
        proc = self._spawn(
            name, [str(binary), "controller"],
            env=upstream.kargo_controller_env(
                self._python_env(), self.kubeconfig, shard=shard,
                default_controller=default_controller, extra=env),
            cwd=self.work_dir,
            ready_check=logged(log_path, log_offset(log_path), upstream.KARGO_READY_LINE),
        )
        proc.wait_ready(ready_timeout)
        self._timed(name, started)
        return proc

    def start_kargo_webhooks(self, *, name: str = "kargo-webhooks") -> ManagedProcess:
        """Start Kargo's own admission webhooks (``kargo kubernetes-webhooks-server``) and
        register them by URL with a caBundle, for the Project namespaces only (see
        ``upstream.kargo_webhook_configurations``); returns once they mutate Stages."""
        started = time.monotonic()
        binary = upstream.kargo_binary()
        tmpdir = self.work_dir / name
        certs_dir = upstream.serving_cert_dir(tmpdir)
        certs_dir.mkdir(parents=True, exist_ok=True)
        cert, key = self._ca.issue(common_name=name, sans=["127.0.0.1", "localhost"],
                                   server=True)
        (certs_dir / "tls.crt").write_bytes(cert)
        (certs_dir / "tls.key").write_bytes(key)
        port = free_port()
        log_path = self.logs_dir / f"{name}.log"
        self.kubectl("create", "namespace", upstream.KARGO_NAMESPACE, check=False)
        proc = self._spawn(
            name, [str(binary), "kubernetes-webhooks-server"],
            env=upstream.kargo_webhooks_env(self._python_env(), self.kubeconfig, port=port,
                                            tmpdir=tmpdir),
            cwd=self.work_dir,
            ready_check=logged(log_path, log_offset(log_path),
                               re.compile(rb"Serving webhook server")),
        )
        proc.wait_ready(60)
        self.apply_objects(upstream.kargo_webhook_configurations(
            url=f"https://127.0.0.1:{port}", ca_bundle=base64.b64encode(self._ca_pem).decode()))
        self._wait_kargo_webhooks()
        self._timed(name, started)
        return proc

    def _wait_kargo_webhooks(self, timeout: float = 30) -> None:
        """Until a server-side dry run shows Kargo's Stage defaulter at work: it sets
        the shard label from ``spec.shard``."""
        probe_ns = self.project_namespace("kargo-webhook-probe")
        probe = {"apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Stage",
                 "metadata": {"name": "probe", "namespace": probe_ns},
                 "spec": {"shard": "probe", "requestedFreight": [
                     {"origin": {"kind": "Warehouse", "name": "probe"},
                      "sources": {"direct": True}}]}}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                               input=json.dumps(probe), check=False)
            if out.returncode == 0 and upstream.SHARD_LABEL in out.stdout:
                return
            time.sleep(0.3)
        raise ControlPlaneError(f"Kargo's webhooks not active after {timeout:.0f}s: "
                                f"{out.stderr.strip()}")

    def stop_kargo_webhooks(self, proc: ManagedProcess) -> None:
        """Unregister Kargo's webhooks (they fail closed) and stop their server."""
        self.kubectl("delete", "--ignore-not-found", "mutatingwebhookconfiguration/kargo",
                     "validatingwebhookconfiguration/kargo")
        self._forget(proc)

    # ------------------------------------------------------------------ argo-rollouts-manager

    def start_rollouts_manager(
        self, *, name: str = "argo-rollouts-manager", openshift_plugin: str | None = None,
        namespace_scoped: bool = True,
    ) -> ManagedProcess:
        """Start the real argo-rollouts-manager with the admin kubeconfig and wait until
        its RolloutManager controller runs its workers.

        ``openshift_plugin``: the location it renders for the ``argoproj-labs/openshift``
        plugin it always adds; by default a local binary (the sample metric plugin), so
        that a real Rollouts controller reading what it rendered can load every plugin.
        """
        import rollouts

        started = time.monotonic()
        binary = upstream.rollouts_manager_binary()
        location = openshift_plugin or (
            "file://" + str(rollouts.find_binaries().metrics_plugin_sample))
        log_path = self.logs_dir / f"{name}.log"
        proc = self._spawn(
            name, [str(binary), "--metrics-bind-address=0",
                   f"--health-probe-bind-address=127.0.0.1:{free_port()}"],
            env=upstream.rollouts_manager_env(self._python_env(), self.kubeconfig,
                                              openshift_plugin=location,
                                              namespace_scoped=namespace_scoped),
            cwd=self.work_dir,
            ready_check=logged(log_path, log_offset(log_path),
                               re.compile(rb"Starting workers.*RolloutManager")),
        )
        proc.wait_ready(60)
        self._timed(name, started)
        return proc

    # ------------------------------------------------------------------ cert-manager

    def start_cert_manager(
        self, *, cluster_resource_namespace: str = "cert-manager",
    ) -> tuple[ManagedProcess, ManagedProcess]:
        """Start the real cert-manager controller and cainjector (the pinned release,
        ``build.sh cert-manager``) with the admin kubeconfig; return once the
        controller's issuing controllers and the cainjector's webhook-configuration
        injectors run their workers (see hack/upstream.py). Its CRDs are the caller's
        to install (``chart.crd_dirs()``).

        ``cluster_resource_namespace``: where ClusterIssuers' Secrets are read (created
        here). No cert-manager webhook: nothing here needs it.
        """
        started = time.monotonic()
        self.kubectl("create", "namespace", cluster_resource_namespace, check=False)
        procs = []
        for name, argv, lines in (
            (upstream.CERT_MANAGER_CONTROLLER, upstream.cert_manager_controller_args(
                self.kubeconfig, cluster_resource_namespace=cluster_resource_namespace,
                metrics_port=free_port()), upstream.cert_manager_ready_lines()),
            (upstream.CERT_MANAGER_CAINJECTOR, upstream.cainjector_args(self.kubeconfig),
             upstream.CAINJECTOR_READY_LINES),
        ):
            log_name = f"cert-manager-{name}"
            log_path = self.logs_dir / f"{log_name}.log"
            proc = self._spawn(
                log_name, [str(upstream.cert_manager_binary(name)), *argv],
                env=self._python_env(), cwd=self.work_dir,
                ready_check=logged_all(log_path, log_offset(log_path), lines),
            )
            proc.wait_ready(90)
            procs.append(proc)
        self._timed("cert-manager", started)
        return procs[0], procs[1]

    def restart(self, name: str, *, downtime: float = 0.0, timeout: float = 60.0) -> float:
        """SIGKILL one of the plane's processes (``etcd``, ``kube-apiserver``, ...), wait
        ``downtime`` seconds, start it again with the same flags (same port, same data),
        and wait until it is ready. Returns the seconds from the new start to ready.

        For fault tests (tests/faults/): what clients see when their API server or its
        etcd goes away and comes back at the same address."""
        index, old = next((i, p) for i, p in enumerate(self._procs) if p.name == name)
        old.kill(signal.SIGKILL)
        if downtime > 0:
            time.sleep(downtime)
        new = old.respawn()
        self._procs[index] = new
        started = time.monotonic()
        new.wait_ready(timeout)
        return time.monotonic() - started

    def compact_etcd(self) -> int:
        """Compact etcd's history up to its current revision (through etcd's HTTP
        gateway; no etcdctl needed) and return that revision: a watch from an older
        resourceVersion then gets 410 Gone once the API server's watch cache no longer
        holds it (after an API server restart, at the latest)."""
        def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
            request = urllib.request.Request(
                self.etcd_url + path, data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"}, method="POST")
            with urllib.request.urlopen(request, timeout=10) as resp:
                return cast("dict[str, Any]", json.loads(resp.read()))

        revision = int(post("/v3/kv/range", {"key": "Lw=="})["header"]["revision"])
        post("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def stop_process(self, proc: ManagedProcess) -> None:
        """Stop one process this plane started (e.g. to restart it with new flags)."""
        self._forget(proc)


def main(argv: Sequence[str] | None = None) -> int:
    """``python hack/controlplane.py [--no-webhook]``: start, print the kubeconfig, wait."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--no-webhook", action="store_true")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in background
    plane = ControlPlane(work_dir=args.work_dir, with_webhook=not args.no_webhook, verbose=True)
    plane.start()
    try:
        print(f"export KUBECONFIG={plane.kubeconfig}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while all(p.alive() for p in plane.processes):
                time.sleep(1)
    finally:
        # A second Ctrl-C must not cut the teardown short (or print a traceback).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
