"""The core plane: etcd, kube-apiserver and kube-controller-manager, as envtest starts them.

controller-runtime's envtest starts only the API server and etcd; everything else belongs
to the caller. So does this plane: rollgate's processes (``harness.host_rollgate``), the
upstream controllers (``harness.upstream``), the node (``harness.node``) and faults
(``harness.faults``) take a started plane and add to it. What the plane owns besides:
its PKI (one CA signs every serving and client certificate), the CRDs it installs at
start, kubectl and the official client against it, and the processes others start on
it (``spawn``), which ``stop`` ends newest first.

Two profiles (``Profile``): ``LOOPBACK`` (the default) serves on a free loopback port
with only what tests without pods need; ``PODS`` serves where pods reach it (the node's
bridge address, port 443: the ``kubernetes`` Service's address, so no kube-proxy is
needed) with ServiceAccount admission, Node+RBAC authorization, the controllers pods need
and a scheduler.

Identities: the admin kubeconfig carries a client certificate in ``system:masters``.
ServiceAccount kubeconfigs carry a client certificate whose subject *is* the
ServiceAccount (CN ``system:serviceaccount:<ns>:<name>``, O the two ServiceAccount
groups). That authenticates exactly as the ServiceAccount to RBAC, and unlike a
kubeconfig ``as:`` impersonation entry it is honoured by the official Python client,
which ignores ``as:``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harness import components, versions
from harness.paths import BinaryMissing, binary
from harness.pki import CA, write_kubeconfig
from harness.process import (
    ManagedProcess,
    ProcessError,
    free_port,
    http_ok,
    install_signal_handlers,
)

__all__ = ["LOOPBACK", "PODS", "ControlPlane", "PlaneError", "Profile"]


class PlaneError(ProcessError):
    """The plane, or a process on it, failed to start or to do what was asked."""


@dataclass(frozen=True, slots=True)
class Profile:
    """How the API server serves and what runs beside it.

    ``address``/``port``: where it listens (port 0: a free one). ``for_pods``: the
    admission, authorization, controllers and scheduler that running pods takes.
    ``service_range``: the Service ClusterIP range; its first address is the
    ``kubernetes`` Service's, which pods use to reach the API server.
    """

    address: str = "127.0.0.1"
    port: int = 0
    for_pods: bool = False
    service_range: str = "10.0.0.0/24"
    controllers: tuple[str, ...] = ("garbage-collector-controller", "namespace-controller")


LOOPBACK = Profile()
# The controllers a Deployment, its Service, a PodDisruptionBudget, Helm's hook Jobs and
# ServiceAccount tokens need; nothing for nodes' lifecycle (one node, never lost).
POD_CONTROLLERS = (
    "deployment-controller", "replicaset-controller", "endpointslice-controller",
    "disruption-controller", "garbage-collector-controller", "namespace-controller",
    "job-controller", "cronjob-controller", "ttl-after-finished-controller",
    "serviceaccount-controller", "serviceaccount-token-controller",
    "root-ca-certificate-publisher-controller", "pod-garbage-collector-controller",
    # Takes the not-ready taint off the Node once kubelet reports Ready.
    "node-lifecycle-controller",
)


def pods_profile(address: str, service_range: str) -> Profile:
    """The API server on ``address``:443, which must be the first address of
    ``service_range`` (the ``kubernetes`` Service's ClusterIP)."""
    return Profile(address=address, port=443, for_pods=True, service_range=service_range,
                   controllers=POD_CONTROLLERS)


PODS = pods_profile("198.18.0.1", "198.18.0.0/26")


@dataclass(frozen=True, slots=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kubectl: Path
    kube_scheduler: Path | None


def find_binaries(*, scheduler: bool = False) -> Binaries:
    """The Kubernetes binaries ``make k8s`` builds; raises ``BinaryMissing`` naming it."""
    directory = versions.kubernetes()

    def find(name: str) -> Path:
        return binary(name, directory)

    return Binaries(
        etcd=find("etcd"), kube_apiserver=find("kube-apiserver"),
        kube_controller_manager=find("kube-controller-manager"), kubectl=find("kubectl"),
        kube_scheduler=find("kube-scheduler") if scheduler else None,
    )


def objects_of(rendered: str) -> list[dict[str, Any]]:
    """The mappings of a multi-document YAML text (empty documents dropped)."""
    return [d for d in yaml.safe_load_all(rendered) if isinstance(d, dict)]


@dataclass
class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager (+ kube-scheduler for pods).

    ``start()`` brings them up and installs ``crds``; ``stop()`` (or the context
    manager) ends every process started on the plane, newest first.
    """

    work_dir: Path | None = None
    profile: Profile = LOOPBACK
    crds: Sequence[Mapping[str, Any]] = ()
    verbose: bool = False
    kubeconfig: Path = field(init=False)
    binaries: Binaries = field(init=False)
    server: str = field(init=False, default="")
    etcd_url: str = field(init=False, default="")
    ca: CA = field(init=False)
    timings: dict[str, float] = field(init=False, default_factory=dict)
    _procs: list[ManagedProcess] = field(init=False, default_factory=list)
    _owns_work_dir: bool = field(init=False, default=False)
    _sa_kubeconfigs: dict[tuple[str, str], Path] = field(init=False, default_factory=dict)
    _admin_pem: tuple[bytes, bytes] = field(init=False)

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

    @property
    def root(self) -> Path:
        """The work directory (always set after construction)."""
        assert self.work_dir is not None
        return self.work_dir

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def say(self, message: str) -> None:
        """A harness note on stderr (only when verbose)."""
        if self.verbose:
            print(f"[plane] {message}", file=sys.stderr, flush=True)

    def timed(self, label: str, started: float) -> None:
        """Record (and say) how long ``label`` took since ``started`` (monotonic)."""
        self.timings[label] = time.monotonic() - started
        self.say(f"{label}: {self.timings[label]:.1f}s")

    def start(self) -> ControlPlane:
        try:
            self.binaries = find_binaries(scheduler=self.profile.for_pods)
        except BinaryMissing as err:
            raise PlaneError(str(err)) from err
        install_signal_handlers()
        started = time.monotonic()
        # Logs of an earlier plane in a reused work dir would read as this one's.
        shutil.rmtree(self.logs_dir, ignore_errors=True)
        try:
            self._make_pki()
            self._start_etcd()
            self._start_apiserver()
            # Only now: a controller manager started before the API server's RBAC
            # bootstrap is done exits ("cannot get resource configmaps").
            self._start_controller_manager()
            if self.profile.for_pods:
                self._start_scheduler()
            self.install_crds(self.crds)
        except BaseException:
            self.print_logs_hint()
            self.stop(remove_data=False)
            raise
        self.timed("plane", started)
        return self

    def stop(self, *, remove_data: bool = True) -> None:
        """Stop every process started on this plane, newest first.

        A work dir the caller chose keeps its logs (only etcd's data goes); a temporary
        one made here is removed entirely, unless ``remove_data=False`` (after a
        failed start, so the logs can be read).
        """
        for proc in reversed(self._procs):
            proc.stop()
        self._procs.clear()
        if remove_data and self.work_dir is not None:
            target = self.work_dir if self._owns_work_dir else self.work_dir / "etcd"
            shutil.rmtree(target, ignore_errors=True)

    @property
    def processes(self) -> list[ManagedProcess]:
        """The processes running on this plane now, oldest first."""
        return list(self._procs)

    def process(self, name: str) -> ManagedProcess:
        """The running process called ``name`` (``kube-apiserver``, ``etcd``, ...)."""
        for proc in self._procs:
            if proc.name == name:
                return proc
        raise PlaneError(f"no process {name!r} on this plane")

    def print_logs_hint(self) -> None:
        """Where the process logs are, for a failure message."""
        if self.logs_dir.exists():
            paths = "\n  ".join(str(p) for p in sorted(self.logs_dir.glob("*.log")))
            print(f"[plane] process logs:\n  {paths}", file=sys.stderr, flush=True)

    def spawn(self, name: str, argv: Sequence[str], **kwargs: Any) -> ManagedProcess:
        """Start a process that lives as long as the plane (log: ``logs/<name>.log``);
        ``kwargs`` go to ``ManagedProcess``. Not waited for: ``.wait_ready()``."""
        proc = ManagedProcess(name, argv, log_path=self.logs_dir / f"{name}.log", **kwargs)
        self._procs.append(proc)
        return proc

    def track(self, proc: ManagedProcess) -> None:
        """Stop ``proc`` with the plane (a process started by another module's helper)."""
        self._procs.append(proc)

    def replace(self, old: ManagedProcess, new: ManagedProcess) -> None:
        """Track ``new`` in ``old``'s place (a respawn keeps the stop order)."""
        self._procs[self._procs.index(old)] = new

    def stop_process(self, proc: ManagedProcess) -> None:
        """Stop one process started on this plane (e.g. to restart it with new flags)."""
        proc.stop()
        with contextlib.suppress(ValueError):
            self._procs.remove(proc)

    def child_env(self, **extra: str) -> dict[str, str]:
        """Our environment for a child, without a KUBECONFIG that is not this plane's."""
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env["PYTHONUNBUFFERED"] = "1"
        env.update(extra)
        return env

    # ------------------------------------------------------------------ components

    def _make_pki(self) -> None:
        self.ca, self._admin_pem = components.make_pki(self.pki_dir, self.profile)

    def admin_ssl_context(self) -> ssl.SSLContext:
        """TLS to the API server as the admin (for raw HTTPS: /metrics, /readyz)."""
        ctx = ssl.create_default_context(cafile=str(self.pki_dir / "ca.crt"))
        ctx.load_cert_chain(str(self.pki_dir / "admin.crt"), str(self.pki_dir / "admin.key"))
        return ctx

    def _start_etcd(self) -> None:
        started = time.monotonic()
        client, peer = free_port(), free_port()
        data = self.root / "etcd"
        shutil.rmtree(data, ignore_errors=True)
        self.etcd_url = f"http://127.0.0.1:{client}"
        proc = self.spawn(
            "etcd", components.etcd_args(self.binaries.etcd, data=data, url=self.etcd_url,
                                         peer_port=peer),
            url=self.etcd_url,
            ready_check=lambda: http_ok(self.etcd_url + "/health"),
            # Throwaway state: no graceful shutdown is worth a stray process.
            death_signal=signal.SIGKILL,
        )
        proc.wait_ready(30)
        self.timed("etcd", started)

    def _start_apiserver(self) -> None:
        started = time.monotonic()
        port = self.profile.port or free_port()
        host = self.profile.address
        self.server = f"https://{host}:{port}"
        write_kubeconfig(
            self.kubeconfig, server=self.server, ca_pem=self.ca.pem,
            cert_pem=self._admin_pem[0], key_pem=self._admin_pem[1], user="rollgate-admin",
        )
        ctx = self.admin_ssl_context()
        proc = self.spawn(
            "kube-apiserver",
            components.apiserver_args(self.binaries.kube_apiserver, etcd_url=self.etcd_url,
                                      pki=self.pki_dir, profile=self.profile, port=port),
            url=self.server,
            ready_check=lambda: http_ok(self.server + "/readyz", ctx),
            # A SIGTERMed kube-apiserver whose etcd died with it hangs in shutdown.
            death_signal=signal.SIGKILL,
            stop_timeout=15,
        )
        proc.wait_ready(60)
        self.timed("kube-apiserver", started)

    def _start_controller_manager(self) -> None:
        started = time.monotonic()
        port = free_port()
        args = components.controller_manager_args(
            self.binaries.kube_controller_manager, kubeconfig=self.kubeconfig,
            pki=self.pki_dir, profile=self.profile, port=port)
        proc = self.spawn(
            "kube-controller-manager", args,
            url=f"https://127.0.0.1:{port}",
            ready_check=lambda: http_ok(
                f"https://127.0.0.1:{port}/healthz", ssl._create_unverified_context()
            ),
            death_signal=signal.SIGKILL,
        )
        proc.wait_ready(30)
        self.timed("kube-controller-manager", started)

    def _start_scheduler(self) -> None:
        started = time.monotonic()
        port = free_port()
        assert self.binaries.kube_scheduler is not None
        proc = self.spawn(
            "kube-scheduler",
            components.scheduler_args(self.binaries.kube_scheduler,
                                      kubeconfig=self.kubeconfig, port=port),
            url=f"https://127.0.0.1:{port}",
            ready_check=lambda: http_ok(
                f"https://127.0.0.1:{port}/healthz", ssl._create_unverified_context()),
            death_signal=signal.SIGKILL,
        )
        proc.wait_ready(30)
        self.timed("kube-scheduler", started)

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
            raise PlaneError(
                f"kubectl {' '.join(args)} failed ({result.returncode}):\n"
                f"{result.stderr.strip()}\n{result.stdout.strip()}"
            )
        return result

    def get_json(self, *args: str) -> dict[str, Any]:
        """``kubectl get ARGS -o json`` as a dict."""
        out: dict[str, Any] = json.loads(self.kubectl("get", *args, "-o", "json").stdout)
        return out

    def apply_objects(
        self, objects: Sequence[Mapping[str, Any]], *, server_side: bool = False,
        **kwargs: Any,
    ) -> None:
        if objects:
            doc = {"apiVersion": "v1", "kind": "List", "items": list(objects)}
            mode = ["--server-side", "--force-conflicts"] if server_side else []
            self.kubectl("apply", *mode, "-f", "-", input=json.dumps(doc), **kwargs)

    def kustomize(self, directory: Path) -> list[dict[str, Any]]:
        return objects_of(self.kubectl("kustomize", str(directory)).stdout)

    def install_crds(self, crds: Sequence[Mapping[str, Any]]) -> None:
        """Apply ``crds`` and wait until discovery serves every one of them."""
        if not crds:
            return
        started = time.monotonic()
        # Server-side: upstream CRDs are too large for the last-applied annotation.
        self.apply_objects(crds, server_side=True)
        self.wait_served(crds)
        self.timed("crds", started)

    def wait_served(self, crds: Sequence[Mapping[str, Any]], *, timeout: float = 60) -> None:
        """Until discovery lists the resource of each of ``crds``. The API server serves a
        CRD once it is Established; polling discovery rather than ``kubectl wait
        --for=condition=Established``, which errors on a CRD whose status has no
        conditions yet (one created a moment before)."""
        deadline = time.monotonic() + timeout
        pending = {(c["spec"]["group"], c["spec"]["names"]["plural"]) for c in crds}
        while pending:
            out = self.kubectl("api-resources", "-o", "name", check=False).stdout.split()
            pending = {(g, p) for g, p in pending if f"{p}.{g}" not in out}
            if not pending:
                break
            if time.monotonic() > deadline:
                raise PlaneError(f"CRDs not served after {timeout:.0f}s: {sorted(pending)}")
            time.sleep(0.2)

    # ------------------------------------------------------------------ identities

    def serviceaccount_kubeconfig(self, namespace: str, name: str) -> Path:
        """A kubeconfig that authenticates as ServiceAccount ``namespace/name``."""
        key = (namespace, name)
        if key not in self._sa_kubeconfigs:
            cert, private_key = self.ca.issue_serviceaccount(namespace, name)
            path = self.root / "kubeconfigs" / f"{namespace}.{name}.kubeconfig"
            self._sa_kubeconfigs[key] = write_kubeconfig(
                path, server=self.server, ca_pem=self.ca.pem, cert_pem=cert,
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

    def create_namespace(self, name: str, *, labels: Mapping[str, str] | None = None) -> str:
        """Create (or keep) namespace ``name`` with ``labels``; returns the name."""
        meta: dict[str, Any] = {"name": name}
        if labels:
            meta["labels"] = dict(labels)
        self.apply_objects([{"apiVersion": "v1", "kind": "Namespace", "metadata": meta}])
        return name

