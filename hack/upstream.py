"""The real Kargo and the real argo-rollouts-manager, run on the host next to rollgate.

Their Go modules are not served by the module proxy (every dependency is), so
``hack/k8s/build.sh`` builds them from source trees at the pinned tags:

- ``ROLLGATE_KARGO_SRC`` (default ``../shared/upstream/kargo-<KARGO_VERSION>`` beside
  the repository): ``kargo`` from ``cmd/controlplane``, whose subcommands
  ``controller`` and ``kubernetes-webhooks-server`` the harness runs;
- ``ROLLGATE_ROLLOUTS_MANAGER_SRC`` (default
  ``../shared/upstream/argo-rollouts-manager-<version>``): ``argo-rollouts-manager``
  from ``./cmd``.

A user gets the trees with ``git clone --depth 1 --branch <tag>`` (README, "Set-up").
This module finds the trees and the binaries built from them, reads the CRDs and
webhook registrations the trees ship, and builds the processes' command lines. What
each needs against a bare kube-apiserver (no kubelet, no Argo CD), as found by running
them here:

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
- the operator: ``--metrics-bind-address=0``, ``NAMESPACE_SCOPED_ARGO_ROLLOUTS=true``
  for namespace-scoped RolloutManagers, and ``OPENSHIFT_ROUTE_PLUGIN_LOCATION``: it
  always adds the ``argoproj-labs/openshift`` traffic plugin, and a real Rollouts
  controller that cannot download a configured plugin exits at start.

cert-manager's ``controller`` and ``cainjector`` come from its published module instead
(``build.sh cert-manager``, ``cert-manager-<CERT_MANAGER_VERSION>/`` in the cache):

- ``controller``: ``--leader-elect=false`` (else it waits for a Lease in kube-system),
  ``--cluster-resource-namespace`` (ClusterIssuers' Secrets), a loopback metrics port,
  and only the controllers that self-signed and CA issuers need (``CERT_MANAGER_CONTROLLERS``:
  no ACME, Vault, Venafi, ingress or gateway shims). None of them needs cert-manager's
  own webhook, which only validates and defaults cert-manager's objects. It has no
  readiness endpoint; at ``--v=4`` each controller logs ``starting worker`` once its
  caches are synced.
- ``cainjector``: ``--leader-elect=false``; it serves no metrics (port "0" in its
  source). Its webhook-configuration injectors log ``Starting workers`` when they act.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import versions
import yaml
from k8sprocess import ProcessError

REPO_ROOT = Path(__file__).resolve().parent.parent
KARGO = "kargo"
ROLLOUTS_MANAGER = "argo-rollouts-manager"
KARGO_NAMESPACE = "kargo"
# Logged by controller-runtime once the Stage controller's workers run.
KARGO_READY_LINE = re.compile(rb"Starting workers.*\"Stage\"")
# The project label Kargo's validators require on a namespace before they admit
# anything in it.
PROJECT_LABEL = "kargo.akuity.io/project"
SHARD_LABEL = "kargo.akuity.io/shard"
REFRESH_ANNOTATION = "kargo.akuity.io/refresh"


class UpstreamMissing(ProcessError):
    """A source tree or a binary built from it is missing; the message says what to do."""


def _default_tree(name: str) -> Path:
    return REPO_ROOT.parent / "shared" / "upstream" / name


def kargo_src() -> Path:
    return Path(os.environ.get("ROLLGATE_KARGO_SRC")
                or _default_tree(f"kargo-{versions.kargo()}"))


def rollouts_manager_src() -> Path:
    return Path(os.environ.get("ROLLGATE_ROLLOUTS_MANAGER_SRC")
                or _default_tree(f"argo-rollouts-manager-{versions.argo_rollouts_manager()}"))


def _tree_hint(variable: str, tree: Path, tag: str, project: str) -> str:
    return (f"{variable}={tree}: no such source tree; get it with `git clone --depth 1 "
            f"--branch {tag} https://github.com/{project} DIR` and set {variable}=DIR")


def require_kargo_src() -> Path:
    tree = kargo_src()
    if not (tree / "go.mod").is_file():
        raise UpstreamMissing(_tree_hint("ROLLGATE_KARGO_SRC", tree, versions.kargo(),
                                         "akuity/kargo"))
    return tree


def require_rollouts_manager_src() -> Path:
    tree = rollouts_manager_src()
    if not (tree / "go.mod").is_file():
        raise UpstreamMissing(_tree_hint(
            "ROLLGATE_ROLLOUTS_MANAGER_SRC", tree, versions.argo_rollouts_manager(),
            "argoproj-labs/argo-rollouts-manager"))
    return tree


def _cache() -> Path:
    return Path(os.environ.get("ROLLGATE_K8S_CACHE") or Path.home() / ".cache/rollgate/k8s")


def _binary(name: str, directory: str) -> Path:
    if os.environ.get("ROLLGATE_K8S_BIN"):
        path = Path(os.environ["ROLLGATE_K8S_BIN"]) / name
    else:
        path = _cache() / directory / name
    if not os.access(path, os.X_OK):
        raise UpstreamMissing(
            f"{path} is missing: run `make k8s` (hack/k8s/build.sh builds it from its "
            "source tree), or put it in $ROLLGATE_K8S_BIN")
    return path


def kargo_binary() -> Path:
    require_kargo_src()
    return _binary(KARGO, f"kargo-{versions.kargo()}")


def rollouts_manager_binary() -> Path:
    require_rollouts_manager_src()
    return _binary(ROLLOUTS_MANAGER, f"argo-rollouts-manager-{versions.argo_rollouts_manager()}")


# --------------------------------------------------------------------------- CRDs


def _crds_in(paths: list[Path]) -> list[dict[str, Any]]:
    found = []
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                found.append(doc)
    return found


def kargo_crds() -> list[dict[str, Any]]:
    """All nine CRDs of Kargo's chart (``charts/kargo/resources/crds``)."""
    directory = require_kargo_src() / "charts" / "kargo" / "resources" / "crds"
    return _crds_in(sorted(directory.glob("*.yaml")))


def rollouts_manager_crds() -> list[dict[str, Any]]:
    """Only the RolloutManager CRD: ``config/crd/bases`` also holds older copies of Argo
    Rollouts' own CRDs, which must not replace the pinned ones."""
    path = (require_rollouts_manager_src() / "config" / "crd" / "bases"
            / "argoproj.io_rolloutmanagers.yaml")
    return _crds_in([path])


def tree_crds() -> list[dict[str, Any]]:
    """The CRDs of the trees that are there (none when neither is)."""
    crds: list[dict[str, Any]] = []
    if (kargo_src() / "go.mod").is_file():
        crds += kargo_crds()
    if (rollouts_manager_src() / "go.mod").is_file():
        crds += rollouts_manager_crds()
    return crds


# --------------------------------------------------------------------------- webhooks


def _strip_helm(text: str, namespace: str) -> str:
    """The chart's ``webhooks.yaml`` as plain YAML: every line that is only a template
    action (conditions, includes, ranges) goes, and the release namespace is filled in.
    The file is regular enough for that; a change that breaks it fails to parse."""
    kept = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("{{") or stripped.startswith("caBundle: {{"):
            continue
        kept.append(line.replace("{{ .Release.Namespace }}", namespace))
    if any("{{" in line for line in kept):
        raise UpstreamMissing("Kargo's webhooks.yaml has a template action this reader "
                              "does not know; update hack/upstream.py")
    return "\n".join(kept)


def kargo_webhook_configurations(
    *, url: str, ca_bundle: str, only_namespaces_labelled: str = PROJECT_LABEL,
) -> list[dict[str, Any]]:
    """Kargo's Mutating- and ValidatingWebhookConfiguration as its chart registers them,
    pointed at ``url`` with ``ca_bundle``.

    One change: every webhook without a namespaceSelector of its own gets one for
    namespaces carrying ``only_namespaces_labelled`` (Kargo's Project label), so that
    Kargo's webhooks, which refuse anything in a namespace that is not a Project, gate
    only the tests' Project namespaces on a plane shared with tests that have none.
    Cluster-scoped objects are not affected by a namespaceSelector.
    """
    path = (require_kargo_src() / "charts" / "kargo" / "templates"
            / "kubernetes-webhooks-server" / "webhooks.yaml")
    configs = [d for d in yaml.safe_load_all(_strip_helm(path.read_text(), KARGO_NAMESPACE))
               if isinstance(d, dict)]
    for config in configs:
        config["metadata"] = {"name": config["metadata"]["name"]}
        for hook in config.get("webhooks", []):
            service = (hook.get("clientConfig") or {}).get("service") or {}
            hook["clientConfig"] = {"url": url + service.get("path", ""),
                                    "caBundle": ca_bundle}
            hook.setdefault("namespaceSelector", {"matchExpressions": [
                {"key": only_namespaces_labelled, "operator": "Exists"}]})
    return configs


# --------------------------------------------------------------------------- processes


def kargo_controller_env(
    base: Mapping[str, str], kubeconfig: Path, *, shard: str = "",
    default_controller: bool = True, extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The environment of ``kargo controller`` on this plane (see the module docstring).

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


def kargo_webhooks_env(base: Mapping[str, str], kubeconfig: Path, *, port: int,
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


def rollouts_manager_env(base: Mapping[str, str], kubeconfig: Path, *,
                         openshift_plugin: str,
                         namespace_scoped: bool = True) -> dict[str, str]:
    env = dict(base)
    env.update({
        "KUBECONFIG": str(kubeconfig),
        "NAMESPACE_SCOPED_ARGO_ROLLOUTS": "true" if namespace_scoped else "false",
        "OPENSHIFT_ROUTE_PLUGIN_LOCATION": openshift_plugin,
    })
    return env


def exprcheck_binary() -> Path:
    """hack/exprcheck: expr-lang as Kargo uses it, the oracle of the expression tests."""
    return _binary("exprcheck", f"exprcheck-{versions.expr_lang()}")


# --------------------------------------------------------------------------- cert-manager

CERT_MANAGER_CONTROLLER = "controller"
CERT_MANAGER_CAINJECTOR = "cainjector"
# What issuing from the chart's own CA (self-signed Issuer -> CA Certificate -> CA
# Issuer -> serving Certificate) and from a ClusterIssuer of those kinds takes.
CERT_MANAGER_CONTROLLERS = (
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


def cert_manager_binary(name: str) -> Path:
    """``controller`` or ``cainjector`` of the pinned cert-manager release."""
    return _binary(name, f"cert-manager-{versions.cert_manager()}")


def cert_manager_controller_args(kubeconfig: Path, *, cluster_resource_namespace: str,
                                 metrics_port: int) -> list[str]:
    """The controller's flags on this plane (see the module docstring)."""
    return [
        f"--kubeconfig={kubeconfig}",
        "--leader-elect=false",
        f"--cluster-resource-namespace={cluster_resource_namespace}",
        f"--metrics-listen-address=127.0.0.1:{metrics_port}",
        f"--controllers={','.join(CERT_MANAGER_CONTROLLERS)}",
        "--v=4",
    ]


def cert_manager_ready_lines() -> tuple[re.Pattern[bytes], ...]:
    """One line per enabled controller: its workers run (its caches are synced)."""
    return tuple(re.compile(b"cert-manager/" + re.escape(name.encode())
                            + b' "msg"="starting worker"')
                 for name in CERT_MANAGER_CONTROLLERS)


def cainjector_args(kubeconfig: Path) -> list[str]:
    return [f"--kubeconfig={kubeconfig}", "--leader-elect=false"]
