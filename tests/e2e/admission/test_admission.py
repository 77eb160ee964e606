"""Admission as a user meets it: ``kubectl`` against a real kube-apiserver with the
rollgate webhooks registered and CRDs that behave like Kargo's and Argo's
(``ROLLGATE_CRDS_DIR`` swaps in the upstream ones).

Every assertion is about what ``kubectl`` prints and what ``kubectl get`` reads back,
never about the webhook's internals. The invalid manifests are the ones in
``examples/invalid/`` that the README tells users to try. Where the CRD schema refuses
a mistake (unknown fields, wrong types, missing required fields) the API server says
so before any webhook runs, and these tests expect its message there; the webhook
speaks for what a CRD cannot say.

Resource names such as ``stages.kargo.akuity.io`` are spelled as users type them to
kubectl, not built from schemas.kinds.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.host_rollgate import HostRollgate
from harness.plane import ControlPlane
from schemas.kinds import GROUP_KARGO
from testkit import objects
from testkit.denials import EXAMPLES, assert_denied, causes, documented_paths, warnings_of
from testkit.paths import REPO_ROOT

Kubectl = Callable[..., subprocess.CompletedProcess[str]]

INVALID_STAGE_PATHS = [
    "spec.verification.analysisTemplates[1]",
    "spec.verification.analysisTemplates[2].name",
    "spec.verification.args[1].name",
    "spec.verification.args[2].name",
    "spec.verification.analysisRunMetadata.labels[rollgate.dev/attempt]",
    "spec.verification.analysisRunMetadata.labels[team]",
    "spec.verification.analysisRunMetadata.annotations[example.com/on call]",
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
# What Kargo v1 requires of every Stage; the tests' Stages differ only in what follows.

def example(relative: str) -> str:
    return (EXAMPLES / relative).read_text()


def apply(
    kubectl: Kubectl, namespace: str, manifest: str | dict[str, Any], *flags: str
) -> subprocess.CompletedProcess[str]:
    """``kubectl apply -f -`` as a user runs it; the result is checked by the caller."""
    text = manifest if isinstance(manifest, str) else yaml.safe_dump(manifest)
    return kubectl("apply", "-n", namespace, "-f", "-", *flags, input=text, check=False)


def get(kubectl: Kubectl, namespace: str, kind: str, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        kubectl("get", "-n", namespace, kind, name, "-o", "json").stdout)
    return found


def exists(kubectl: Kubectl, namespace: str, kind: str, name: str) -> bool:
    result = kubectl("get", "-n", namespace, kind, name, "-o", "name", check=False)
    if result.returncode != 0:
        assert "NotFound" in result.stderr, result.stderr
    return result.returncode == 0


def assert_refused_by_the_api_server(result: subprocess.CompletedProcess[str]) -> None:
    """Refused before admission: no webhook was asked (so none is named)."""
    assert result.returncode != 0, f"expected a refusal, kubectl said:\n{result.stdout}"
    assert "admission webhook" not in result.stderr, result.stderr
    assert "rollgate" not in result.stderr, result.stderr





# ---------------------------------------------------------------- denial


def test_invalid_stage_is_denied_naming_every_path(kubectl: Kubectl, namespace: str):
    """examples/invalid/stage.yaml passes the CRD schema; the webhook denies it with
    every mistake at once, exactly the ones the example's comment lists."""
    result = apply(kubectl, namespace, example("invalid/stage.yaml"))

    assert_denied(result, "validate-stages.rollgate.dev", INVALID_STAGE_PATHS)
    assert 'Stage "broken" is invalid' in result.stderr
    assert sorted(causes(result)) == sorted(INVALID_STAGE_PATHS), result.stderr
    assert documented_paths(EXAMPLES / "invalid/stage.yaml") == INVALID_STAGE_PATHS
    assert not exists(kubectl, namespace, "stages.kargo.akuity.io", "broken")


def test_invalid_rollout_manager_is_denied_naming_every_path(kubectl: Kubectl, namespace: str):
    result = apply(kubectl, namespace, example("invalid/rolloutmanager.yaml"))

    assert_denied(result, "validate-rolloutmanagers.rollgate.dev", INVALID_ROLLOUT_MANAGER_PATHS)
    assert 'RolloutManager "broken" is invalid' in result.stderr
    assert sorted(causes(result)) == sorted(INVALID_ROLLOUT_MANAGER_PATHS), result.stderr
    documented = documented_paths(EXAMPLES / "invalid/rolloutmanager.yaml")
    assert documented == INVALID_ROLLOUT_MANAGER_PATHS
    assert "SHA-1" in result.stderr  # the 40-hex-character hint
    assert not exists(kubectl, namespace, "rolloutmanagers.argoproj.io", "broken")


# ---------------------------------------------------------------- what the CRD refuses first


def test_analysis_spelling_is_refused_by_the_api_server_and_pruned_without_validation(
    kubectl: Kubectl, namespace: str
):
    """No released Kargo CRD has spec.analysis: strict field validation names it, and
    with ``--validate=false`` it is dropped, so nothing would ever be verified."""
    manifest = example("migrate/stage-analysis.yaml")

    refused = apply(kubectl, namespace, manifest)

    assert_refused_by_the_api_server(refused)
    assert 'unknown field "spec.analysis"' in refused.stderr, refused.stderr
    assert not exists(kubectl, namespace, "stages.kargo.akuity.io", "prod")

    pruned = apply(kubectl, namespace, manifest, "--validate=false")

    assert pruned.returncode == 0, pruned.stderr
    spec = get(kubectl, namespace, "stages.kargo.akuity.io", "prod")["spec"]
    assert "analysis" not in spec and "verification" not in spec, spec
    assert spec["requestedFreight"] == yaml.safe_load(manifest)["spec"]["requestedFreight"]


def test_migrated_analysis_spelling_is_accepted(kubectl: Kubectl, namespace: str):
    """What examples/migrate/stage-analysis.yaml tells users to run gives a Stage the
    API server and the webhook accept, with the stanza as spec.verification."""
    migrated = subprocess.run(
        [sys.executable, "-m", "schemas", "migrate",
         str(EXAMPLES / "migrate" / "stage-analysis.yaml")],
        cwd=REPO_ROOT, capture_output=True, text=True, check=True,
    ).stdout
    kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "analysistemplate.yaml"))

    result = apply(kubectl, namespace, migrated)

    assert result.returncode == 0, result.stderr
    spec = get(kubectl, namespace, "stages.kargo.akuity.io", "prod")["spec"]
    assert spec["verification"]["analysisTemplates"] == [
        {"name": "success-rate"}, {"name": "error-budget", "kind": "ClusterAnalysisTemplate"},
    ]
    # The shared ClusterAnalysisTemplate is not installed here: allowed, with a warning.
    assert any("spec.verification.analysisTemplates[1].name" in w and "error-budget" in w
               for w in warnings_of(result)), result.stderr


def test_unquoted_arg_value_is_refused_by_the_api_server(kubectl: Kubectl, namespace: str):
    """YAML reads ``value: 8080`` as an integer; Kargo's CRD wants a string."""
    manifest = objects.stage("unquoted", verification=objects.verification(
        "success-rate", args=[{"name": "port", "value": 8080}]))

    result = apply(kubectl, namespace, manifest)

    assert_refused_by_the_api_server(result)
    assert "spec.verification.args[0].value" in result.stderr, result.stderr
    assert "must be of type string" in result.stderr, result.stderr
    assert not exists(kubectl, namespace, "stages.kargo.akuity.io", "unquoted")


# ---------------------------------------------------------------- stored as written, warnings


def test_verification_spelling_is_stored_exactly_as_written(kubectl: Kubectl, namespace: str):
    """Nothing is added to a Stage: re-applying says ``unchanged`` and server-side
    apply does not fight anyone over fields the user never wrote."""
    kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "analysistemplate.yaml"))
    path = str(EXAMPLES / "stage-test.yaml")
    written = yaml.safe_load(example("stage-test.yaml"))["spec"]

    first = kubectl("apply", "-n", namespace, "-f", path, check=False)

    assert first.returncode == 0, first.stderr
    assert not warnings_of(first), first.stderr
    assert get(kubectl, namespace, "stages.kargo.akuity.io", "test")["spec"] == written

    again = kubectl("apply", "-n", namespace, "-f", path, check=False)
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "stage.kargo.akuity.io/test unchanged", again.stdout

    versions = []
    for _ in range(2):
        server_side = kubectl("apply", "--server-side", "-n", namespace, "-f", path,
                              check=False)
        assert server_side.returncode == 0, server_side.stderr  # a conflict exits 1
        assert "serverside-applied" in server_side.stdout, server_side.stdout
        stored = get(kubectl, namespace, "stages.kargo.akuity.io", "test")
        assert stored["spec"] == written
        versions.append(stored["metadata"]["resourceVersion"])
    # The second apply found nothing to change, so nothing was written.
    assert versions[0] == versions[1]


def test_missing_templates_are_warned_about_not_denied(kubectl: Kubectl, namespace: str):
    """The cross-object look-up runs as the webhook's ServiceAccount with the RBAC
    from manifests/, so this also shows that RBAC lets it read templates."""
    manifest = objects.stage("waiting", verification={"analysisTemplates": [
        {"name": "not-created-yet"},
        {"name": "cluster-wide", "kind": "ClusterAnalysisTemplate"},
    ]})

    result = apply(kubectl, namespace, manifest)

    assert result.returncode == 0, result.stderr
    warnings = warnings_of(result)
    assert any("spec.verification.analysisTemplates[0].name" in w and "not-created-yet" in w
               for w in warnings), result.stderr
    assert any("spec.verification.analysisTemplates[1].name" in w and "cluster-wide" in w
               for w in warnings), result.stderr
    assert exists(kubectl, namespace, "stages.kargo.akuity.io", "waiting")


def test_template_args_not_supplied_are_warned_about(kubectl: Kubectl, namespace: str):
    kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "analysistemplate.yaml"))
    manifest = objects.stage("no-args", verification=objects.verification("success-rate"))

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
    first = objects.rollout_manager("first", plugins=plugins)
    assert apply(kubectl, namespace, first).returncode == 0

    result = apply(kubectl, namespace, objects.rollout_manager("second", plugins=plugins))

    assert result.returncode == 0, result.stderr
    assert any("first" in w for w in warnings_of(result)), result.stderr


def test_example_manifests_are_accepted(kubectl: Kubectl, namespace: str):
    """What the README and `make dev` apply must go through the CRDs and the webhook
    cleanly: no refusal, no warning."""
    result = kubectl("apply", "-n", namespace, "-f", str(EXAMPLES), check=False)

    assert result.returncode == 0, result.stderr
    assert not warnings_of(result), result.stderr
    stored = get(kubectl, namespace, "rolloutmanagers.argoproj.io", "argo-rollouts")
    assert stored["spec"]["plugins"]["trafficManagement"][0]["sha256"] == SHA256
    for name in ("test", "uat"):
        written = yaml.safe_load(example(f"stage-{name}.yaml"))["spec"]
        assert get(kubectl, namespace, "stages.kargo.akuity.io", name)["spec"] == written


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
    rollgate: HostRollgate, namespace: str, manifest: dict[str, Any]) -> None:
    rollgate.unregister_webhooks()
    try:
        result = apply(rollgate.plane.kubectl, namespace, manifest)
        assert result.returncode == 0, result.stderr
    finally:
        rollgate.register_webhooks()


def test_stage_that_predates_the_webhook_can_still_be_edited(
    rollgate: HostRollgate, kubectl: Kubectl, namespace: str):
    kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "analysistemplate.yaml"))
    # A duplicate arg name: the CRD lets it through, only the webhook would deny it.
    old = objects.stage(
        "legacy",
        verification={"analysisTemplates": [{"name": "success-rate"}],
         "args": [{"name": "service-name", "value": "a.example"},
                  {"name": "service-name", "value": "b.example"}]},
    )
    create_without_webhooks(rollgate, namespace, old)

    # An edit outside the stanza, or of labels, is not the webhook's business at all.
    edited = copy.deepcopy(old)
    edited["spec"]["requestedFreight"][0]["origin"]["name"] = "guestbook-v2"
    result = apply(kubectl, namespace, edited)
    assert result.returncode == 0, result.stderr
    assert not warnings_of(result), result.stderr
    assert get(kubectl, namespace, "stages.kargo.akuity.io", "legacy")["spec"][
        "requestedFreight"][0]["origin"]["name"] == "guestbook-v2"
    kubectl("label", "-n", namespace, "stages.kargo.akuity.io/legacy", "tier=test")

    # An edit elsewhere in the stanza is checked, and allowed: kubectl shows why the old
    # mistake was let through.
    edited["spec"]["verification"]["analysisRunMetadata"] = {"labels": {"team": "guestbook"}}
    result = apply(kubectl, namespace, edited)
    assert result.returncode == 0, result.stderr
    assert any("spec.verification.args[1].name" in w and "unchanged" in w
               for w in warnings_of(result)), result.stderr

    # Touching the list that holds the mistake is denied.
    touched = copy.deepcopy(edited)
    touched["spec"]["verification"]["args"][0]["value"] = "c.example"
    assert_denied(apply(kubectl, namespace, touched), "validate-stages.rollgate.dev",
                  ["spec.verification.args[1].name"])

    # Fixing it is of course allowed, and deleting always is.
    fixed = copy.deepcopy(edited)
    fixed["spec"]["verification"]["args"][1] = {"name": "path", "value": "/ready"}
    result = apply(kubectl, namespace, fixed)
    assert result.returncode == 0, result.stderr
    assert not warnings_of(result), result.stderr
    kubectl("delete", "-n", namespace, "stages.kargo.akuity.io/legacy")


def test_rollout_manager_that_predates_the_webhook_can_still_be_edited(
    rollgate: HostRollgate, kubectl: Kubectl, namespace: str):
    old = objects.rollout_manager(
        "legacy",
        plugins={"metric": [{"name": "argoproj-labs/m", "location": "https://example.com/m",
                     "sha256": "dac10cbf57633c9832a17f8c27d2ca34aa97dd3d"}]},
    )
    create_without_webhooks(rollgate, namespace, old)

    # Labels only: no webhook is asked, so nothing is said.
    edited = copy.deepcopy(old)
    edited["metadata"]["labels"] = {"team": "platform"}
    result = apply(kubectl, namespace, edited)
    assert result.returncode == 0, result.stderr
    assert not warnings_of(result), result.stderr

    # Another plugin added: checked, allowed, and the old digest is pointed out.
    edited["spec"]["plugins"]["trafficManagement"] = [
        {"name": "argoproj-labs/t", "location": "file:///plugins/t"}]
    result = apply(kubectl, namespace, edited)
    assert result.returncode == 0, result.stderr
    assert any("spec.plugins.metric[0].sha256" in w and "unchanged" in w
               for w in warnings_of(result)), result.stderr

    touched = copy.deepcopy(edited)
    touched["spec"]["plugins"]["metric"][0]["location"] = "http://example.com/m"
    assert_denied(apply(kubectl, namespace, touched), "validate-rolloutmanagers.rollgate.dev",
                  ["spec.plugins.metric[0].location"])

    kubectl("delete", "-n", namespace, "rolloutmanagers.argoproj.io/legacy")


# ---------------------------------------------------------------- webhook down


@pytest.fixture
def webhook_stopped(rollgate: HostRollgate) -> Iterator[None]:
    rollgate.stop_webhook()
    try:
        yield
    finally:
        rollgate.start_webhook()
        rollgate.register_webhooks()


@pytest.mark.usefixtures("webhook_stopped")
@pytest.mark.parametrize(
    ("manifest", "resource", "name", "webhook"),
    [
        ("stage-test.yaml", "stages.kargo.akuity.io", "test", "validate-stages.rollgate.dev"),
        # Its upper-case digest makes the API server call the mutating webhook too.
        ("defaulting/rolloutmanager.yaml", "rolloutmanagers.argoproj.io", "defaulted",
         "validate-rolloutmanagers.rollgate.dev"),
    ],
)
def test_validating_webhook_fails_closed_when_the_webhook_is_down(
    kubectl: Kubectl, namespace: str, manifest: str, resource: str, name: str, webhook: str
):
    result = apply(kubectl, namespace, example(manifest))

    assert result.returncode != 0
    assert f'failed calling webhook "{webhook}"' in result.stderr, result.stderr
    # A mutating webhook is failurePolicy Ignore: never the cause.
    assert "mutate-" not in result.stderr, result.stderr
    assert not exists(kubectl, namespace, resource, name)


@pytest.mark.usefixtures("webhook_stopped")
def test_mutating_webhook_fails_open_when_the_webhook_is_down(
    rollgate: HostRollgate, kubectl: Kubectl, namespace: str):
    # With only the mutating webhook left registered, the request goes through,
    # undefaulted: mutation is a convenience, never a gate.
    rollgate.unregister_webhooks(mutating=False)
    written = yaml.safe_load(example("defaulting/rolloutmanager.yaml"))

    result = apply(kubectl, namespace, written)

    assert result.returncode == 0, result.stderr
    stored = get(kubectl, namespace, "rolloutmanagers.argoproj.io", "defaulted")
    assert stored["spec"]["plugins"]["metric"][0]["sha256"] == (
        written["spec"]["plugins"]["metric"][0]["sha256"])
    assert stored["spec"]["plugins"]["metric"][0]["sha256"] != SHA256


# ---------------------------------------------------------------- manifests the harness installs


def test_dev_overlay_is_the_production_install_plus_crds_and_opt_in_rbac(kubectl: Kubectl):
    """`make dev` and these tests install manifests/overlays/dev; it must not drift
    from what a real cluster gets, and production must never carry the CRDs nor the
    opt-in RBAC components (engine mode, observe mode's --refresh-lagging)."""
    root = REPO_ROOT / "manifests"

    def rendered(path: Path) -> list[dict[str, Any]]:
        out = kubectl("kustomize", str(path)).stdout
        return [d for d in yaml.safe_load_all(out) if d]

    production = rendered(root)
    engine = rendered(root / "reconciler-engine")
    refresh = rendered(root / "reconciler-refresh")
    dev = rendered(root / "overlays" / "dev")
    crds = [o for o in dev if o["kind"] == "CustomResourceDefinition"]

    assert not [o for o in production if o["kind"] == "CustomResourceDefinition"]
    for component in ("rollgate-reconciler-engine", "rollgate-reconciler-refresh"):
        assert not [o for o in production if o["metadata"]["name"] == component]
    # --plugins-mode auto syncs where no operator renders: production has the writes.
    assert [o for o in production if o["metadata"]["name"] == "rollgate-reconciler-plugins-write"]
    # The refresh component grants exactly `patch` on Stages (not their status).
    (role,) = [o for o in refresh if o["kind"] == "ClusterRole"]
    assert role["rules"] == [{"apiGroups": [GROUP_KARGO], "resources": ["stages"],
                              "verbs": ["patch"]}]
    rest = [o for o in dev if o["kind"] != "CustomResourceDefinition"]
    assert sorted(map(json.dumps, rest)) == sorted(
        map(json.dumps, production + engine + refresh))
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

    assert {"stages", "stages/status", "freights", "freights/status"} <= kargo
    assert {"rolloutmanagers", "rolloutmanagers/status"} <= argo
    assert {"analysisruns", "analysistemplates", "clusteranalysistemplates"} <= argo
    assert not {"analysisruns/status", "analysistemplates/status",
                "clusteranalysistemplates/status"} & argo


def test_webhook_may_only_read_what_its_lookups_read(
    control_plane: ControlPlane, namespace: str
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
