"""Admission as a user meets it: ``kubectl`` against a real kube-apiserver with the
rollgate webhooks registered (issue 3).

Every assertion is about what ``kubectl`` prints and what ``kubectl get`` reads back,
never about the webhook's internals. The invalid manifests are the ones in
``examples/invalid/`` that the README tells users to try.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import controlplane
import pytest
import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

INVALID_STAGE_PATHS = [
    "spec.analysis.templates[0].clusterscope",
    "spec.analysis.templates[1]",
    "spec.analysis.templates[2].templateName",
    "spec.analysis.args[0].value",
    "spec.analysis.args[1].name",
    "spec.analysis.analysisRunMetadata.labels[rollgate.dev/attempt]",
]
INVALID_ROLLOUT_MANAGER_PATHS = [
    "spec.plugins.trafficManagement[0].name",
    "spec.plugins.trafficManagement[0].location",
    "spec.plugins.metric[0].sha256",
    "spec.plugins.metric[1].location",
    "spec.plugins.metric[2].location",
    "spec.plugins.metric[3].name",
]
SHA256 = "3a3e2d0e4ac4f1f7a3ee6d2e5d4d7c1e8c3b9f0a6e8d1c2b3a4f5e6d7c8b9a0f"


def example(relative: str) -> str:
    return (EXAMPLES / relative).read_text()


def apply(
    kubectl: Kubectl, namespace: str, manifest: str | dict[str, Any], *flags: str
) -> subprocess.CompletedProcess[str]:
    """``kubectl apply -f -`` as a user runs it; the result is checked by the caller."""
    text = manifest if isinstance(manifest, str) else yaml.safe_dump(manifest)
    return kubectl("apply", "-n", namespace, "-f", "-", *flags, input=text, check=False)


def get(kubectl: Kubectl, namespace: str, kind: str, name: str) -> dict[str, Any]:
    return json.loads(kubectl("get", "-n", namespace, kind, name, "-o", "json").stdout)


def exists(kubectl: Kubectl, namespace: str, kind: str, name: str) -> bool:
    result = kubectl("get", "-n", namespace, kind, name, "-o", "name", check=False)
    if result.returncode != 0:
        assert "NotFound" in result.stderr, result.stderr
    return result.returncode == 0


def stage(name: str, analysis: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kargo.akuity.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": {**spec, "analysis": analysis},
    }


def rollout_manager(name: str, plugins: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "RolloutManager",
        "metadata": {"name": name},
        "spec": {"plugins": plugins},
    }


def assert_denied(
    result: subprocess.CompletedProcess[str], webhook: str, paths: list[str]
) -> None:
    """Denied by rollgate (not by a schema or RBAC), with every field path listed.

    For a denial with ``reason: Invalid`` and causes, kubectl prints the causes under
    ``The <Kind> "<name>" is invalid:``; the API server's ``admission webhook "..."
    denied the request`` prefix is only printed when the webhook says so itself (see
    test_denial_names_the_webhook).
    """
    assert result.returncode != 0, f"expected a denial, kubectl said:\n{result.stdout}"
    assert "is invalid" in result.stderr or webhook in result.stderr, result.stderr
    missing = [p for p in paths if f"{p}:" not in result.stderr]
    assert not missing, f"field paths missing from kubectl's error: {missing}\n{result.stderr}"


def warnings_of(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Warning:")]


# ---------------------------------------------------------------- denial


def test_invalid_stage_is_denied_with_every_field_path(kubectl: Kubectl, namespace: str):
    result = apply(kubectl, namespace, example("invalid/stage.yaml"))

    assert_denied(result, "validate-stages.rollgate.dev", INVALID_STAGE_PATHS)
    assert 'Stage "broken" is invalid' in result.stderr
    assert "quote" in result.stderr  # the hint for `value: 8080`
    assert not exists(kubectl, namespace, "stages.kargo.akuity.io", "broken")


def test_invalid_rollout_manager_is_denied_with_every_field_path(
    kubectl: Kubectl, namespace: str
):
    result = apply(kubectl, namespace, example("invalid/rolloutmanager.yaml"))

    assert_denied(result, "validate-rolloutmanagers.rollgate.dev", INVALID_ROLLOUT_MANAGER_PATHS)
    assert 'RolloutManager "broken" is invalid' in result.stderr
    assert "SHA-1" in result.stderr  # the 40-hex-character hint
    assert not exists(kubectl, namespace, "rolloutmanagers.argoproj.io", "broken")


@pytest.mark.parametrize(
    ("manifest", "webhook"),
    [
        ("invalid/stage.yaml", "validate-stages.rollgate.dev"),
        ("invalid/rolloutmanager.yaml", "validate-rolloutmanagers.rollgate.dev"),
    ],
)
def test_denial_names_the_webhook(kubectl: Kubectl, namespace: str, manifest: str, webhook: str):
    """A user must be able to tell from kubectl's output who denied the request."""
    result = apply(kubectl, namespace, example(manifest))

    assert result.returncode != 0
    assert webhook in result.stderr, result.stderr


def test_both_stage_spellings_at_once_are_denied(kubectl: Kubectl, namespace: str):
    manifest = stage("both", {"templates": [{"templateName": "a"}]})
    manifest["spec"]["verification"] = {"analysisTemplates": [{"name": "a"}]}

    result = apply(kubectl, namespace, manifest)

    assert_denied(result, "validate-stages.rollgate.dev", ["spec.verification"])
    assert "spec.analysis" in result.stderr  # says which two stanzas clash


# ---------------------------------------------------------------- defaults and warnings


def test_valid_stage_is_stored_with_defaults(kubectl: Kubectl, namespace: str):
    kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "analysistemplate.yaml"))

    result = apply(kubectl, namespace, example("stage-analysis.yaml"))

    assert result.returncode == 0, result.stderr
    stored = get(kubectl, namespace, "stages.kargo.akuity.io", "test")
    assert stored["spec"]["analysis"]["templates"] == [
        {"templateName": "success-rate", "clusterScope": False}
    ]
    # What the user wrote is kept as written.
    assert stored["spec"]["analysis"]["args"] == [
        {"name": "service-name", "value": "guestbook.guestbook-test.svc.cluster.local"}
    ]


def test_verification_spelling_is_stored_with_defaults(kubectl: Kubectl, namespace: str):
    result = apply(kubectl, namespace, example("defaulting/stage.yaml"))

    assert result.returncode == 0, result.stderr
    stored = get(kubectl, namespace, "stages.kargo.akuity.io", "defaulted")
    assert stored["spec"]["verification"]["analysisTemplates"] == [
        {"name": "not-created-yet", "kind": "AnalysisTemplate"},
        {"name": "cluster-wide", "kind": "ClusterAnalysisTemplate"},
    ]


def test_missing_templates_are_warned_about_not_denied(kubectl: Kubectl, namespace: str):
    """The cross-object look-up runs as the webhook's ServiceAccount with the RBAC
    from manifests/, so this also shows that RBAC lets it read templates."""
    result = apply(kubectl, namespace, example("defaulting/stage.yaml"))

    assert result.returncode == 0, result.stderr
    warnings = warnings_of(result)
    assert any("not-created-yet" in w for w in warnings), result.stderr
    assert any("cluster-wide" in w for w in warnings), result.stderr


def test_template_args_not_supplied_are_warned_about(kubectl: Kubectl, namespace: str):
    kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "analysistemplate.yaml"))
    manifest = stage("no-args", {"templates": [{"templateName": "success-rate"}]})

    result = apply(kubectl, namespace, manifest)

    assert result.returncode == 0, result.stderr
    assert any("service-name" in w for w in warnings_of(result)), result.stderr


def test_valid_rollout_manager_is_stored_with_defaults_and_warnings(
    kubectl: Kubectl, namespace: str
):
    result = apply(kubectl, namespace, example("defaulting/rolloutmanager.yaml"))

    assert result.returncode == 0, result.stderr
    stored = get(kubectl, namespace, "rolloutmanagers.argoproj.io", "defaulted")
    assert stored["spec"]["plugins"]["metric"][0]["sha256"] == SHA256
    # The remote traffic plugin has no sha256: allowed, with a warning naming it.
    warnings = warnings_of(result)
    assert any("spec.plugins.trafficManagement[0]" in w for w in warnings), result.stderr


def test_second_rollout_manager_in_a_namespace_gets_a_warning(kubectl: Kubectl, namespace: str):
    plugins = {"metric": [{"name": "argoproj-labs/m", "location": "file:///plugins/m"}]}
    assert apply(kubectl, namespace, rollout_manager("first", plugins)).returncode == 0

    result = apply(kubectl, namespace, rollout_manager("second", plugins))

    assert result.returncode == 0, result.stderr
    assert any("first" in w for w in warnings_of(result)), result.stderr


def test_example_manifests_are_accepted(kubectl: Kubectl, namespace: str):
    """What the README and `make dev` apply must go through the webhook cleanly."""
    result = kubectl("apply", "-n", namespace, "-f", str(EXAMPLES), check=False)

    assert result.returncode == 0, result.stderr
    stored = get(kubectl, namespace, "rolloutmanagers.argoproj.io", "argo-rollouts")
    assert stored["spec"]["plugins"]["trafficManagement"][0]["sha256"] == SHA256


# ---------------------------------------------------------------- server-side dry run


def test_dry_run_denies_the_same_way_and_stores_nothing(kubectl: Kubectl, namespace: str):
    stage_result = apply(kubectl, namespace, example("invalid/stage.yaml"), "--dry-run=server")
    rm_result = apply(
        kubectl, namespace, example("invalid/rolloutmanager.yaml"), "--dry-run=server"
    )

    assert_denied(stage_result, "validate-stages.rollgate.dev", INVALID_STAGE_PATHS)
    assert_denied(
        rm_result, "validate-rolloutmanagers.rollgate.dev", INVALID_ROLLOUT_MANAGER_PATHS
    )
    assert "webhook" in stage_result.stderr and "webhook" in rm_result.stderr
    assert not exists(kubectl, namespace, "stages.kargo.akuity.io", "broken")
    assert not exists(kubectl, namespace, "rolloutmanagers.argoproj.io", "broken")


def test_dry_run_of_a_valid_object_shows_defaults_and_stores_nothing(
    kubectl: Kubectl, namespace: str
):
    result = apply(
        kubectl, namespace, example("defaulting/rolloutmanager.yaml"), "--dry-run=server",
        "-o", "json",
    )

    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["spec"]["plugins"]["metric"][0]["sha256"] == SHA256
    assert warnings_of(result), "dry run should print the same warnings"
    assert not exists(kubectl, namespace, "rolloutmanagers.argoproj.io", "defaulted")


# ---------------------------------------------------------------- objects older than the webhook


def create_without_webhooks(
    control_plane: controlplane.ControlPlane, namespace: str, manifest: dict[str, Any]
) -> None:
    control_plane.unregister_webhooks()
    try:
        result = apply(control_plane.kubectl, namespace, manifest)
        assert result.returncode == 0, result.stderr
    finally:
        control_plane.register_webhooks()


def test_stage_that_predates_the_webhook_can_still_be_edited(
    control_plane: controlplane.ControlPlane, kubectl: Kubectl, namespace: str
):
    old = stage(
        "legacy",
        {"templates": [{"templateName": "success-rate"}],
         "args": [{"name": "port", "value": 8080}]},
        subscriptions={"warehouse": "guestbook"},
    )
    create_without_webhooks(control_plane, namespace, old)

    # An edit elsewhere is allowed; kubectl shows why the old mistake was let through.
    edited = json.loads(json.dumps(old))
    edited["spec"]["subscriptions"]["warehouse"] = "guestbook-v2"
    result = apply(kubectl, namespace, edited)
    assert result.returncode == 0, result.stderr
    assert any("spec.analysis.args[0].value" in w and "unchanged" in w
               for w in warnings_of(result)), result.stderr
    assert get(kubectl, namespace, "stages.kargo.akuity.io", "legacy")["spec"][
        "subscriptions"]["warehouse"] == "guestbook-v2"

    # Labels (metadata only) can be changed too.
    kubectl("label", "-n", namespace, "stages.kargo.akuity.io/legacy", "tier=test")

    # Touching the invalid field itself is denied.
    touched = json.loads(json.dumps(edited))
    touched["spec"]["analysis"]["args"][0]["value"] = 9090
    assert_denied(apply(kubectl, namespace, touched), "validate-stages.rollgate.dev",
                  ["spec.analysis.args[0].value"])

    # Fixing it is of course allowed, and deleting always is.
    fixed = json.loads(json.dumps(edited))
    fixed["spec"]["analysis"]["args"][0]["value"] = "8080"
    assert apply(kubectl, namespace, fixed).returncode == 0
    kubectl("delete", "-n", namespace, "stages.kargo.akuity.io/legacy")


def test_rollout_manager_that_predates_the_webhook_can_still_be_edited(
    control_plane: controlplane.ControlPlane, kubectl: Kubectl, namespace: str
):
    old = rollout_manager(
        "legacy",
        {"metric": [{"name": "argoproj-labs/m", "location": "https://example.com/m",
                     "sha256": "dac10cbf57633c9832a17f8c27d2ca34aa97dd3d"}]},
    )
    create_without_webhooks(control_plane, namespace, old)

    edited = json.loads(json.dumps(old))
    edited["metadata"]["labels"] = {"team": "platform"}
    result = apply(kubectl, namespace, edited)
    assert result.returncode == 0, result.stderr
    assert any("spec.plugins.metric[0].sha256" in w for w in warnings_of(result)), result.stderr

    touched = json.loads(json.dumps(edited))
    touched["spec"]["plugins"]["metric"][0]["location"] = "http://example.com/m"
    assert_denied(apply(kubectl, namespace, touched), "validate-rolloutmanagers.rollgate.dev",
                  ["spec.plugins.metric[0].location"])

    kubectl("delete", "-n", namespace, "rolloutmanagers.argoproj.io/legacy")


# ---------------------------------------------------------------- webhook down


@pytest.fixture
def webhook_stopped(control_plane: controlplane.ControlPlane) -> Iterator[None]:
    control_plane.stop_webhook()
    try:
        yield
    finally:
        control_plane.start_webhook()
        control_plane.register_webhooks()


@pytest.mark.usefixtures("webhook_stopped")
def test_validating_webhook_fails_closed_when_the_webhook_is_down(
    kubectl: Kubectl, namespace: str
):
    result = apply(kubectl, namespace, example("stage-analysis.yaml"))

    assert result.returncode != 0
    assert 'failed calling webhook "validate-stages.rollgate.dev"' in result.stderr
    # The mutating webhook failed too, but it is failurePolicy Ignore: not the cause.
    assert "mutate-stages.rollgate.dev" not in result.stderr
    assert not exists(kubectl, namespace, "stages.kargo.akuity.io", "test")


@pytest.mark.usefixtures("webhook_stopped")
def test_mutating_webhook_fails_open_when_the_webhook_is_down(
    control_plane: controlplane.ControlPlane, kubectl: Kubectl, namespace: str
):
    # With only the mutating webhook left registered, the request goes through,
    # undefaulted: mutation is a convenience, never a gate.
    control_plane.unregister_webhooks(mutating=False)

    result = apply(kubectl, namespace, example("stage-analysis.yaml"))

    assert result.returncode == 0, result.stderr
    stored = get(kubectl, namespace, "stages.kargo.akuity.io", "test")
    assert stored["spec"]["analysis"]["templates"] == [{"templateName": "success-rate"}]


# ---------------------------------------------------------------- manifests the harness installs


def test_dev_overlay_is_the_production_install_plus_crds_and_engine_rbac(kubectl: Kubectl):
    """`make dev` and these tests install manifests/overlays/dev; it must not drift
    from what a real cluster gets, and production must never carry the CRDs."""
    root = Path(__file__).resolve().parents[2] / "manifests"

    def rendered(path: Path) -> list[dict[str, Any]]:
        out = kubectl("kustomize", str(path)).stdout
        return [d for d in yaml.safe_load_all(out) if d]

    production = rendered(root)
    engine = rendered(root / "reconciler-engine")
    dev = rendered(root / "overlays" / "dev")
    crds = [o for o in dev if o["kind"] == "CustomResourceDefinition"]

    assert not [o for o in production if o["kind"] == "CustomResourceDefinition"]
    assert not [o for o in production if o["metadata"]["name"] == "rollgate-reconciler-engine"]
    rest = [o for o in dev if o["kind"] != "CustomResourceDefinition"]
    assert sorted(map(json.dumps, rest)) == sorted(map(json.dumps, production + engine))
    names = {o["metadata"]["name"] for o in crds}
    assert {"stages.kargo.akuity.io", "freights.kargo.akuity.io",
            "analysistemplates.argoproj.io", "clusteranalysistemplates.argoproj.io",
            "analysisruns.argoproj.io", "rolloutmanagers.argoproj.io"} <= names
    assert "applications.argoproj.io" not in names  # rollgate no longer reads them


def test_status_subresources_are_where_the_real_crds_have_them(kubectl: Kubectl):
    # Discovery lists subresources as "<plural>/status".
    discovery = json.loads(kubectl("get", "--raw", "/apis/kargo.akuity.io/v1alpha1").stdout)
    kargo = {r["name"] for r in discovery["resources"]}
    discovery = json.loads(kubectl("get", "--raw", "/apis/argoproj.io/v1alpha1").stdout)
    argo = {r["name"] for r in discovery["resources"]}

    assert {"stages/status", "freights/status"} <= kargo
    assert "rolloutmanagers/status" in argo
    assert not {"analysisruns/status", "analysistemplates/status", "applications/status",
                "clusteranalysistemplates/status"} & argo
    assert {"analysisruns", "clusteranalysistemplates", "applications"} <= argo


def test_webhook_may_only_read_what_its_lookups_read(
    control_plane: controlplane.ControlPlane, namespace: str
):
    """The webhook's ServiceAccount (the identity the harness runs it under) can GET
    templates and LIST RolloutManagers, the calls webhook/lookups.py makes, and nothing
    else: the other tests' look-up warnings show those calls work with these rules."""
    sa = control_plane.serviceaccount_kubeconfig("rollgate-system", "rollgate-webhook")

    def can_i(verb: str, what: str) -> bool:
        out = control_plane.kubectl("auth", "can-i", verb, what, "-n", namespace,
                                    kubeconfig=sa, check=False)
        return out.stdout.strip() == "yes"

    assert can_i("get", "analysistemplates.argoproj.io/x")
    assert can_i("get", "clusteranalysistemplates.argoproj.io/x")
    assert can_i("list", "rolloutmanagers.argoproj.io")
    assert not can_i("list", "analysistemplates.argoproj.io")
    assert not can_i("list", "clusteranalysistemplates.argoproj.io")
    assert not can_i("watch", "rolloutmanagers.argoproj.io")
    assert not can_i("get", "rolloutmanagers.argoproj.io/x")
    assert not can_i("create", "analysistemplates.argoproj.io")
    assert not can_i("get", "stages.kargo.akuity.io/x")
    assert not can_i("get", "secrets/x")
