"""Least privilege by plugins mode, asked of the real API server: the RBAC the chart
renders for each ``reconciler.pluginsMode``, and that of manifests/ (auto) and
manifests/overlays/audit, applied as rendered and queried with `kubectl auth can-i` as the
reconciler's ServiceAccount. Audit writes no ConfigMap and no Deployment; auto and sync
may create and patch ``argo-rollouts-config`` and patch the ``argo-rollouts`` Deployment,
and nothing more (docs/install.md "RBAC by mode").

Resource names such as ``stages.kargo.akuity.io`` are spelled as users type them to
kubectl, not built from schemas.kinds."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness import chart
from harness.kits.plane import tool_or_fail
from harness.plane import ControlPlane
from reconciler.plugins.decisions import FLAG_MODES
from testkit import objects
from testkit.paths import REPO_ROOT
from testkit.waits import wait_for

RBAC_KINDS = frozenset({"ServiceAccount", "Role", "RoleBinding", "ClusterRole",
                        "ClusterRoleBinding"})
SA = "rollgate-reconciler"
CONFIG_MAP = "configmap/argo-rollouts-config"
DEPLOYMENT = "deployment.apps/argo-rollouts"
WRITES = ("create", "update", "patch", "delete")
# What each mode may write, as (verb, resource): the writing modes exactly these.
SYNC_WRITES = {("create", CONFIG_MAP), ("patch", CONFIG_MAP), ("patch", DEPLOYMENT)}
MODE_WRITES = {"auto": SYNC_WRITES, "sync": SYNC_WRITES, "audit": set()}

CanI = Callable[..., bool]
HOME = "<the install's namespace>"
RENEW_SA = "rollgate-certs-renew"
CERT_SECRETS = ("secret/rollgate-webhook-tls", "secret/rollgate-webhook-ca")
WEBHOOK_CONFIGS = ("validatingwebhookconfiguration.admissionregistration.k8s.io/rollgate",
                   "mutatingwebhookconfiguration.admissionregistration.k8s.io/rollgate")


def rehomed(rendered: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """The RBAC objects of ``rendered`` as another install's: namespaced ones (and the
    bindings' ServiceAccount subjects) in ``namespace``, cluster-scoped ones named with
    ``namespace`` as suffix, so several installs (and the session plane's own rollgate)
    live side by side. Rules and role references are kept as rendered."""
    out = []
    for obj in copy.deepcopy([o for o in rendered if o["kind"] in RBAC_KINDS]):
        meta = obj["metadata"]
        if obj["kind"].startswith("Cluster"):
            meta["name"] = f"{meta['name']}-{namespace}"
        else:
            meta["namespace"] = namespace
        if obj["kind"].endswith("Binding"):
            if obj["roleRef"]["kind"] == "ClusterRole":
                obj["roleRef"]["name"] = f"{obj['roleRef']['name']}-{namespace}"
            for subject in obj["subjects"]:
                subject["namespace"] = namespace
        out.append(obj)
    return out


@pytest.fixture
def installed(control_plane: ControlPlane) -> Iterator[Callable[..., CanI]]:
    """Applies an install's RBAC in a namespace of its own; returns `kubectl auth can-i`
    as that install's ServiceAccount ``sa`` (the reconciler's unless said), asked about
    another namespace (the RolloutManagers') unless ``ns`` is given (``HOME``: the
    install's own), once the API server's authorizer has the install's rules: once
    ``ready`` (verb, resource) is allowed."""
    made: list[tuple[str, list[dict[str, Any]]]] = []

    def install(rendered: list[dict[str, Any]], *, sa: str = SA,
                ready: tuple[str, str] = ("list", "rolloutmanagers.argoproj.io")) -> CanI:
        namespace = objects.fresh_name()
        control_plane.kubectl("create", "namespace", namespace)
        rbac = rehomed(rendered, namespace)
        made.append((namespace, rbac))
        control_plane.apply_objects(rbac)
        config = control_plane.serviceaccount_kubeconfig(namespace, sa)

        def can_i(verb: str, what: str, *extra: str, ns: str = "apps") -> bool:
            out = control_plane.kubectl("auth", "can-i", verb, what, "-n",
                                        namespace if ns == HOME else ns, *extra,
                                        kubeconfig=config, check=False)
            assert out.stdout.strip() in ("yes", "no"), out.stderr
            return out.stdout.strip() == "yes"

        wait_for("the install's RBAC to reach the authorizer", lambda: can_i(
            *ready, ns=HOME), timeout=30)
        return can_i

    yield install
    for namespace, rbac in made:
        doc = json.dumps({"apiVersion": "v1", "kind": "List",
                          "items": [o for o in rbac if o["kind"].startswith("Cluster")]})
        control_plane.kubectl("delete", "--ignore-not-found", "-f", "-", input=doc,
                              check=False)
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false", check=False)


def writes(can_i: CanI) -> set[tuple[str, str]]:
    """Every write the reconciler may make on ConfigMaps and Deployments: the plugin
    objects by name, another object by name, and an unnamed create."""
    asked = [(verb, what) for verb in WRITES
             for what in (CONFIG_MAP, "configmap/other", DEPLOYMENT, "deployment.apps/other")]
    asked += [("create", "configmaps"), ("create", "deployments.apps"),
              ("deletecollection", "configmaps"), ("deletecollection", "deployments.apps")]
    return {(verb, what) for verb, what in asked if can_i(verb, what)}


def assert_plugins_rights(can_i: CanI, mode: str) -> None:
    """The reads and the status patch every mode uses, and exactly the mode's writes."""
    for verb in ("get", "list", "watch"):
        assert can_i(verb, CONFIG_MAP), verb
        assert can_i(verb, DEPLOYMENT), verb
    assert can_i("watch", "rolloutmanagers.argoproj.io")
    # Audit too: it removes, once, a PluginsSynced condition an earlier rollgate wrote.
    assert can_i("patch", "rolloutmanagers.argoproj.io", "--subresource=status")
    assert not can_i("update", "rolloutmanagers.argoproj.io", "--subresource=status")
    assert not can_i("patch", "rolloutmanagers.argoproj.io")
    assert can_i("create", "events")
    assert writes(can_i) == MODE_WRITES[mode], mode
    # Nor anywhere else: the same in the operator's own namespace of a cluster.
    assert not can_i("patch", "configmap/aws-auth", ns="kube-system")


@pytest.mark.parametrize("mode", FLAG_MODES)
def test_chart_grants_the_plugins_writes_only_to_the_modes_that_write(installed, mode):
    tool_or_fail()
    rendered = chart.render({"reconciler": {"pluginsMode": mode}})
    assert_plugins_rights(installed(rendered), mode)


@pytest.mark.parametrize(("directory", "mode"), [("", "auto"), ("overlays/audit", "audit")],
                         ids=["production", "audit-overlay"])
def test_manifests_grant_the_plugins_writes_only_to_the_modes_that_write(
        control_plane, installed, directory, mode):
    rendered = control_plane.kustomize(REPO_ROOT / "manifests" / directory)
    (reconciler,) = [o for o in rendered if o["kind"] == "Deployment"
                     and o["metadata"]["name"] == "rollgate-reconciler"]
    args = reconciler["spec"]["template"]["spec"]["containers"][0]["args"]
    # The RBAC is the one for the mode the Deployment runs.
    assert [a for a in args if a.startswith("--plugins-mode")] == (
        [] if mode == "auto" else [f"--plugins-mode={mode}"])
    assert_plugins_rights(installed(rendered), mode)


def test_the_check_tells_a_write_apart(installed):
    """The comparison can fail: audit's RBAC with the sync writes added is refused."""
    tool_or_fail()
    audit = chart.render({"reconciler": {"pluginsMode": "audit"}})
    sync = chart.render({"reconciler": {"pluginsMode": "sync"}})
    extra = [o for o in sync if o["metadata"]["name"] == "rollgate-reconciler-plugins-write"]
    assert len(extra) == 2
    with pytest.raises(AssertionError):
        assert_plugins_rights(installed(audit + extra), "audit")


@pytest.mark.parametrize("source", ["chart", "manifests"])
def test_the_renewal_may_touch_its_secrets_and_webhook_configurations_only(
        control_plane, installed, source):
    """The certificate renewal's ServiceAccount, from the chart's `job` source and from
    manifests/certificates, may do what docs/install.md "Certificate renewal" lists:
    `get`/`update` on the two certificate Secrets, `list` EndpointSlices in its
    namespace, `get`/`patch` on the two `rollgate` webhook configurations: nothing more."""
    if source == "chart":
        tool_or_fail()
        rendered = chart.render({"certificates": {"source": "job"}})
    else:
        rendered = control_plane.kustomize(REPO_ROOT / "manifests")
    can_i = installed(rendered, sa=RENEW_SA, ready=("get", CERT_SECRETS[0]))
    for secret in CERT_SECRETS:
        assert {v for v in ("get", "update", "patch", "delete", "list", "watch")
                if can_i(v, secret, ns=HOME)} == {"get", "update"}, secret
    assert not can_i("get", "secret/other", ns=HOME)
    assert not can_i("create", "secrets", ns=HOME)
    assert not can_i("get", CERT_SECRETS[0], ns="kube-system")
    assert can_i("list", "endpointslices.discovery.k8s.io", ns=HOME)
    assert not can_i("list", "endpointslices.discovery.k8s.io", ns="kube-system")
    for config in WEBHOOK_CONFIGS:
        assert {v for v in ("get", "patch", "update", "delete")
                if can_i(v, config)} == {"get", "patch"}, config
        assert not can_i("get", config.replace("/rollgate", "/other"))
