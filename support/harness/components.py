"""The core plane's components as ``harness.plane`` starts them: the PKI they share and
the command line of each (etcd, kube-apiserver, kube-controller-manager,
kube-scheduler). Apart from the plane's lifecycle so each flag is read in one place."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import TYPE_CHECKING

from harness.pki import CA, serviceaccount_signing_key

if TYPE_CHECKING:
    from harness.plane import Profile

# The names the API server answers to inside and outside the cluster.
APISERVER_NAMES = ("127.0.0.1", "localhost", "kubernetes", "kubernetes.default",
                   "kubernetes.default.svc", "kubernetes.default.svc.cluster.local")


def make_pki(pki_dir: Path, profile: Profile) -> tuple[CA, tuple[bytes, bytes]]:
    """One CA, the API server's serving certificate, the admin's client certificate and
    the ServiceAccount signing key, written to ``pki_dir``; (the CA, the admin's
    (certificate, key))."""
    pki_dir.mkdir(parents=True, exist_ok=True)
    ca = CA.create("rollgate-test-ca")
    (pki_dir / "ca.crt").write_bytes(ca.pem)
    sans = [*APISERVER_NAMES, profile.address, _first_address(profile.service_range)]
    cert, key = ca.issue(common_name="kube-apiserver", sans=sorted(set(sans)), server=True)
    (pki_dir / "apiserver.crt").write_bytes(cert)
    (pki_dir / "apiserver.key").write_bytes(key)
    admin = ca.issue(common_name="rollgate-admin", organizations=["system:masters"],
                     client=True)
    (pki_dir / "admin.crt").write_bytes(admin[0])
    (pki_dir / "admin.key").write_bytes(admin[1])
    sa_private, sa_public = serviceaccount_signing_key()
    (pki_dir / "sa.key").write_bytes(sa_private)
    (pki_dir / "sa.pub").write_bytes(sa_public)
    return ca, admin


def etcd_args(binary: Path, *, data: Path, url: str, peer_port: int) -> list[str]:
    peer = f"http://127.0.0.1:{peer_port}"
    return [
        str(binary),
        f"--data-dir={data}",
        f"--listen-client-urls={url}",
        f"--advertise-client-urls={url}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=default={peer}",
        # Test data is thrown away: skipping fsync makes every write fast.
        "--unsafe-no-fsync=true",
        "--log-level=warn",
    ]


def apiserver_args(binary: Path, *, etcd_url: str, pki: Path, profile: Profile,
                   port: int) -> list[str]:
    args = [
        str(binary),
        f"--etcd-servers={etcd_url}",
        f"--etcd-prefix=/rollgate-{port}",
        f"--bind-address={profile.address}",
        f"--advertise-address={profile.address}",
        f"--secure-port={port}",
        f"--cert-dir={pki}",
        f"--tls-cert-file={pki / 'apiserver.crt'}",
        f"--tls-private-key-file={pki / 'apiserver.key'}",
        f"--client-ca-file={pki / 'ca.crt'}",
        f"--service-cluster-ip-range={profile.service_range}",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki / 'sa.pub'}",
        f"--service-account-signing-key-file={pki / 'sa.key'}",
        "--allow-privileged=true",
        "--enable-priority-and-fairness=false",
        "--profiling=false",
        "--v=1",
    ]
    if profile.for_pods:
        return [*args,
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                f"--kubelet-client-certificate={pki / 'admin.crt'}",
                f"--kubelet-client-key={pki / 'admin.key'}",
                "--kubelet-preferred-address-types=InternalIP",
                # Webhook Services are called at their endpoints: no kube-proxy.
                "--enable-aggregator-routing=true"]
    # No kubelet or Pods here: admission that needs them only slows things.
    return [*args, "--authorization-mode=RBAC",
            "--disable-admission-plugins=ServiceAccount"]


def controller_manager_args(binary: Path, *, kubeconfig: Path, pki: Path, profile: Profile,
                            port: int) -> list[str]:
    args = [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        f"--controllers={','.join(profile.controllers)}",
        "--leader-elect=false",
        "--bind-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={pki / 'kcm'}",
        "--concurrent-gc-syncs=5",
        "--v=1",
    ]
    if profile.for_pods:
        args += ["--use-service-account-credentials=true",
                 f"--service-account-private-key-file={pki / 'sa.key'}",
                 f"--root-ca-file={pki / 'ca.crt'}",
                 f"--service-cluster-ip-range={profile.service_range}",
                 "--allocate-node-cidrs=false"]
    return args


def scheduler_args(binary: Path, *, kubeconfig: Path, port: int) -> list[str]:
    return [str(binary),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--leader-elect=false", "--bind-address=127.0.0.1", f"--secure-port={port}",
            "--v=1"]


def _first_address(cidr: str) -> str:
    return str(next(ipaddress.ip_network(cidr).hosts()))
