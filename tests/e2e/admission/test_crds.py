"""The CRDs the harness installs behave like the upstream ones, as a user meets
them: ``kubectl`` against the real kube-apiserver, asserting on what it prints and on
what ``kubectl get`` reads back.

Every expectation here is upstream's (Kargo v1.11.2, Argo Rollouts v1.9.1,
argo-rollouts-manager v0.0.9), so this file passes both with manifests/crds and with
``ROLLGATE_CRDS_DIR`` pointing at the upstream CRDs: that is what shows ours agree.
The API server checks the schema before any webhook, so these messages are the API
server's own.

Every test runs twice: on the session's plane, which installs the upstream trees' CRDs
when they are there (the real Kargo's and argo-rollouts-manager's), and on a plane with
``manifests/crds`` only (what ``make dev`` and the suite use without the trees).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness.kits.plane import fresh_namespace, running_plane
from harness.plane import ControlPlane
from schemas.kinds import API_VERSION_ARGO, API_VERSION_KARGO, GROUP_ARGO
from testkit import objects

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module", params=["upstream-or-overridden", "manifests-crds"])
def crd_plane(request: pytest.FixtureRequest, control_plane: ControlPlane,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    if request.param == "upstream-or-overridden":
        yield control_plane
        return
    with running_plane(tmp_path_factory.mktemp("ours"), tree_crds=False) as plane:
        yield plane


@pytest.fixture
def kubectl(crd_plane: ControlPlane) -> Kubectl:
    return crd_plane.kubectl


@pytest.fixture
def namespace(crd_plane: ControlPlane) -> Iterator[str]:
    with fresh_namespace(crd_plane) as name:
        yield name


NOW = "2025-01-01T00:00:00Z"
ORIGIN = {"kind": "Warehouse", "name": "guestbook"}
WEB_METRIC = {"name": "web", "provider": {"web": {"url": "http://127.0.0.1:1/ok"}}}


def analysis_run(name: str) -> dict[str, Any]:
    return objects.analysis_run(name, metrics=[WEB_METRIC])


def rollout_manager(name: str) -> dict[str, Any]:
    return objects.rollout_manager(name, metric=[{"name": "argoproj-labs/sample",
                                                  "location": "file:///plugins/sample"}])


def create(kubectl: Kubectl, namespace: str, obj: dict[str, Any],
           *flags: str) -> subprocess.CompletedProcess[str]:
    """``kubectl create -f -`` (strict field validation unless ``flags`` say otherwise)."""
    return kubectl("create", "-n", namespace, "-f", "-", *flags,
                   input=json.dumps(obj), check=False)


def patch(kubectl: Kubectl, namespace: str, what: str, body: dict[str, Any],
          *flags: str) -> subprocess.CompletedProcess[str]:
    return kubectl("patch", "-n", namespace, *what.split(), "--type=merge",
                   "-p", json.dumps(body), *flags, check=False)


def get(kubectl: Kubectl, namespace: str, what: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(
        kubectl("get", "-n", namespace, *what.split(), "-o", "json").stdout)
    return found


def created(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, result.stderr


def refused(result: subprocess.CompletedProcess[str], *messages: str) -> None:
    assert result.returncode != 0, result.stdout
    for message in messages:
        assert message in result.stderr, result.stderr


# ---------------------------------------------------------------- Stage spec


def test_a_stage_without_requested_freight_is_refused(kubectl: Kubectl, namespace: str):
    result = create(kubectl, namespace, objects.stage(
        "no-freight", freight=False, verification=objects.verification("success-rate")))

    refused(result, 'The Stage "no-freight" is invalid',
            "spec.requestedFreight: Required value")
    assert "NotFound" in kubectl("get", "-n", namespace, "stage", "no-freight",
                                 check=False).stderr


def test_spec_analysis_is_refused_by_strict_validation(kubectl: Kubectl, namespace: str):
    """The form first proposed for Kargo is not in any released Stage schema."""
    result = create(kubectl, namespace, objects.stage(
        "proposed", spec={"analysis": objects.analysis("success-rate")}))

    refused(result, 'unknown field "spec.analysis"')


def test_spec_analysis_is_pruned_without_validation(kubectl: Kubectl, namespace: str):
    """With ``--validate=false`` the server drops the stanza silently, so nothing would
    ever be verified: what users of the proposed form get on a real cluster."""
    created(create(kubectl, namespace, objects.stage(
        "proposed", spec={"analysis": objects.analysis("success-rate")}), "--validate=false"))

    spec = get(kubectl, namespace, "stage proposed")["spec"]
    assert "analysis" not in spec
    assert spec["requestedFreight"] == objects.requested_freight()


def test_verification_arg_values_must_be_strings(kubectl: Kubectl, namespace: str):
    result = create(kubectl, namespace, objects.stage(
        "port", verification=objects.verification(
            "success-rate", args=[{"name": "port", "value": 8080}])))

    refused(result, "spec.verification.args[0].value: Invalid value",
            'must be of type string: "integer"')


def test_verification_args_need_a_value(kubectl: Kubectl, namespace: str):
    result = create(kubectl, namespace, objects.stage(
        "no-value", verification=objects.verification("success-rate",
                                                      args=[{"name": "port"}])))

    refused(result, "spec.verification.args[0].value: Required value")


def test_template_kind_is_one_of_the_two_template_kinds(kubectl: Kubectl, namespace: str):
    result = create(kubectl, namespace, objects.stage(
        "kind",
        verification={"analysisTemplates": [{"name": "success-rate", "kind": "Template"}]}))

    refused(result, 'spec.verification.analysisTemplates[0].kind: Unsupported value: "Template"',
            '"AnalysisTemplate", "ClusterAnalysisTemplate"')


def test_the_verification_stanza_is_stored_as_written(kubectl: Kubectl, namespace: str):
    verification = objects.verification(
        "success-rate", ("shared",), args=[{"name": "service-name", "value": "guestbook"}],
        run_metadata={"labels": {"team": "guestbook"},
                      "annotations": {"example.com/dashboard": "https://x"}})
    created(create(kubectl, namespace, objects.stage(
        "full", verification=verification,
        spec={"promotionTemplate": {"spec": {"steps": [
            {"uses": "argocd-update", "config": {"apps": [{"name": "gb"}]}}]}}})))

    spec = get(kubectl, namespace, "stage full")["spec"]
    assert spec["verification"] == verification
    assert spec["promotionTemplate"]["spec"]["steps"][0]["config"] == {"apps": [{"name": "gb"}]}


# ---------------------------------------------------------------- Stage status


def test_a_freight_history_entry_without_id_is_refused(kubectl: Kubectl, namespace: str):
    created(create(kubectl, namespace, objects.stage("test")))

    result = patch(kubectl, namespace, "stage test", {"status": {"freightHistory": [
        {"items": {"Warehouse/guestbook": {"name": "f1", "origin": ORIGIN}}}]}},
        "--subresource=status")

    refused(result, "status.freightHistory[0].id: Required value")


def test_kargo_status_shapes_are_stored_as_written(kubectl: Kubectl, namespace: str):
    """What Kargo writes after a promotion and what rollgate adds to it."""
    entry = {"id": "test.5e6f7a8.1", "actor": "rollgate", "startTime": NOW,
             "phase": "Successful", "message": "Freight verified",
             "analysisRun": {"name": "test.5e6f7a8.1", "namespace": namespace,
                             "phase": "Successful"},
             "finishTime": NOW}
    status = {
        "freightHistory": [{"id": "5e6f7a8",
                            "items": {"Warehouse/guestbook": {"name": "f1", "origin": ORIGIN}},
                            "verificationHistory": [entry]}],
        "lastPromotion": {"name": "test.promo", "freight": {"name": "f1", "origin": ORIGIN},
                          "status": {"phase": "Succeeded",
                                     "freightCollection": {"id": "5e6f7a8"}},
                          "finishedAt": NOW},
        "health": {"status": "Healthy"},
        "conditions": [{"type": "Verified", "status": "True", "reason": "Verified",
                        "message": "Freight has been verified", "lastTransitionTime": NOW,
                        "observedGeneration": 1}],
        "observedGeneration": 1,
    }
    created(create(kubectl, namespace, objects.stage("test")))

    created(patch(kubectl, namespace, "stage test", {"status": status}, "--subresource=status"))

    assert get(kubectl, namespace, "stage test")["status"] == status


def test_a_server_side_apply_of_an_unknown_status_field_is_refused(
    kubectl: Kubectl, namespace: str
):
    """A server-side apply (how rollgate writes some status) cannot carry a field the
    schema lacks, whatever the validation setting."""
    created(create(kubectl, namespace, objects.stage("test")))
    status = {**objects.stage("test"), "status": {"verification": {"phase": "Running"}}}
    del status["spec"]

    result = kubectl("apply", "-n", namespace, "--server-side", "--subresource=status",
                     "-f", "-", input=json.dumps(status), check=False)

    refused(result, ".status.verification: field not declared in schema")


@pytest.mark.parametrize("kind", ["stage", "freight", "rolloutmanager", "analysisrun"])
def test_an_unknown_status_field_is_gone_on_read(kubectl: Kubectl, namespace: str, kind: str):
    """Pruning. ``kubectl patch`` (like a controller that does not ask for strict
    validation) gets the server's default: a warning per unknown field, which is
    dropped, while the known fields are stored."""
    # kind: (the object, known status fields, unknown status fields, kubectl patch flags)
    cases: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any], list[str]]] = {
        "stage": (objects.stage("test"),
                  {"health": {"status": "Healthy"}},
                  {"verification": {"phase": "Running"},
                   "verificationHistory": [{"id": "x"}]},
                  ["--subresource=status"]),
        "freight": (objects.freight("f1"),
                    {"verifiedIn": {"test": {"verifiedAt": NOW}}},
                    {"verifiedBy": "rollgate"},
                    ["--subresource=status"]),
        "rolloutmanager": (rollout_manager("test"),
                           {"phase": "Available"},
                           {"plugins": {"synced": True}},
                           ["--subresource=status"]),
        # AnalysisRun has no status subresource: its status goes with a normal patch.
        "analysisrun": (analysis_run("test"),
                        {"phase": "Running"},
                        {"verification": {"phase": "Running"}},
                        []),
    }
    obj, known, unknown, flags = cases[kind]
    name = obj["metadata"]["name"]
    created(create(kubectl, namespace, obj))

    result = patch(kubectl, namespace, f"{kind} {name}", {"status": {**known, **unknown}},
                   *flags)

    created(result)
    for field in unknown:
        assert f'Warning: unknown field "status.{field}"' in result.stderr
    assert get(kubectl, namespace, f"{kind} {name}")["status"] == known


def test_unknown_fields_inside_status_entries_are_pruned(kubectl: Kubectl, namespace: str):
    """Only Kargo's fields survive in a verification entry and a verifiedIn record."""
    created(create(kubectl, namespace, objects.stage("test")))
    created(create(kubectl, namespace, objects.freight("f1")))
    entry = {"id": "run-1", "actor": "rollgate", "phase": "Running"}

    created(patch(kubectl, namespace, "stage test", {"status": {"freightHistory": [
        {"id": "c1", "verificationHistory": [{**entry, "attempt": 2, "freight": ["f1"]}]}]}},
        "--subresource=status"))
    created(patch(kubectl, namespace, "freight f1", {"status": {"verifiedIn": {
        "test": {"verifiedAt": NOW, "run": "run-1"}}}}, "--subresource=status"))

    history = get(kubectl, namespace, "stage test")["status"]["freightHistory"]
    assert history == [{"id": "c1", "verificationHistory": [entry]}]
    verified = get(kubectl, namespace, "freight f1")["status"]["verifiedIn"]
    assert verified == {"test": {"verifiedAt": NOW}}


def test_stage_status_written_with_the_object_is_ignored(kubectl: Kubectl, namespace: str):
    """Stage has a status subresource: a patch of the main resource leaves status alone,
    so anything playing Kargo must write through ``--subresource=status``."""
    created(create(kubectl, namespace, objects.stage("test")))

    result = patch(kubectl, namespace, "stage test", {"status": {"health": {"status": "Healthy"}}})

    created(result)
    assert "no change" in result.stdout
    assert "status" not in get(kubectl, namespace, "stage test")


# ---------------------------------------------------------------- Freight


def test_freight_has_no_spec_and_needs_an_origin(kubectl: Kubectl, namespace: str):
    without_origin = objects.freight("f0")
    del without_origin["origin"]
    refused(create(kubectl, namespace, without_origin), "origin: Required value")

    refused(create(kubectl, namespace, {**objects.freight("f1"), "spec": {"origin": ORIGIN}}),
            'unknown field "spec"')


# ---------------------------------------------------------------- AnalysisRun


def test_analysis_run_status_is_written_with_a_normal_update(kubectl: Kubectl, namespace: str):
    """No status subresource upstream: the Rollouts controller updates runs whole."""
    created(create(kubectl, namespace, analysis_run("run")))

    subresource = patch(kubectl, namespace, "analysisrun run",
                        {"status": {"phase": "Successful"}}, "--subresource=status")
    normal = patch(kubectl, namespace, "analysisrun run",
                   {"status": {"phase": "Successful", "message": "done"}})

    assert subresource.returncode != 0
    assert "NotFound" in subresource.stderr or "not find" in subresource.stderr
    created(normal)
    assert get(kubectl, namespace, "analysisrun run")["status"] == {
        "phase": "Successful", "message": "done"}


def test_analysis_run_status_needs_a_phase(kubectl: Kubectl, namespace: str):
    created(create(kubectl, namespace, analysis_run("run")))

    refused(patch(kubectl, namespace, "analysisrun run", {"status": {"message": "x"}}),
            "status.phase: Required value")


def test_analysis_run_needs_metrics(kubectl: Kubectl, namespace: str):
    run = analysis_run("run")
    del run["spec"]["metrics"]
    run["spec"]["args"] = [{"name": "a", "value": "b"}]

    refused(create(kubectl, namespace, run), "spec.metrics: Required value")


def test_metric_plugin_configuration_is_kept_whole(kubectl: Kubectl, namespace: str):
    """Argo Rollouts keeps a plugin's configuration opaque; rollgate copies it into runs."""
    plugin = {"argoproj-labs/sample": {"query": "up", "nested": {"list": [1, "two"]}}}
    run = analysis_run("run")
    run["spec"]["metrics"] = [{"name": "plugin", "provider": {"plugin": plugin}}]

    created(create(kubectl, namespace, run))

    stored = get(kubectl, namespace, "analysisrun run")["spec"]["metrics"][0]
    assert stored["provider"]["plugin"] == plugin


# ---------------------------------------------------------------- RolloutManager


def test_plugins_need_a_name_and_a_location(kubectl: Kubectl, namespace: str):
    rm = rollout_manager("test")
    rm["spec"]["plugins"] = {"trafficManagement": [{"name": "argoproj-labs/gatewayAPI"}]}

    refused(create(kubectl, namespace, rm),
            "spec.plugins.trafficManagement[0].location: Required value")


def test_rollout_manager_conditions_are_checked_as_conditions(kubectl: Kubectl, namespace: str):
    created(create(kubectl, namespace, rollout_manager("test")))

    result = patch(kubectl, namespace, "rolloutmanager test", {"status": {"conditions": [
        {"type": "PluginsSynced", "status": "True", "reason": "Digest Mismatch",
         "message": "x", "lastTransitionTime": NOW}]}}, "--subresource=status")

    refused(result, "status.conditions[0].reason: Invalid value")


# ---------------------------------------------------------------- the kinds as served


def test_kinds_are_served_as_upstream_serves_them(kubectl: Kubectl):
    """Scope, short names and subresources, as ``kubectl api-resources`` and discovery
    show them."""
    resources = {}
    for group_version in (API_VERSION_KARGO, API_VERSION_ARGO):
        listed = json.loads(kubectl("get", "--raw", f"/apis/{group_version}").stdout)
        resources.update({r["name"]: r for r in listed["resources"]})

    def short(name: str) -> list[str]:
        return resources[name].get("shortNames") or []

    assert {n for n in resources if n.endswith("/status")} >= {
        "stages/status", "freights/status", "rolloutmanagers/status"}
    assert not {"analysisruns/status", "analysistemplates/status",
                "clusteranalysistemplates/status"} & set(resources)
    assert not resources["clusteranalysistemplates"]["namespaced"]
    assert all(resources[n]["namespaced"] for n in (
        "stages", "freights", "analysistemplates", "analysisruns", "rolloutmanagers"))
    assert (short("analysisruns"), short("analysistemplates"),
            short("clusteranalysistemplates")) == (["ar"], ["at"], ["cat"])


def test_the_three_analysis_kinds_share_one_metric_schema(kubectl: Kubectl):
    """Upstream generates the metric schema of templates and runs from one Go type; our
    files repeat it, so this catches one copy drifting from the others."""

    def metrics(crd: str) -> dict[str, Any]:
        served = json.loads(kubectl("get", "crd", crd, "-o", "json").stdout)
        schema = served["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        found: dict[str, Any] = schema["properties"]["spec"]["properties"]["metrics"]
        return found

    run = metrics(f"analysisruns.{GROUP_ARGO}")
    assert run == metrics(f"analysistemplates.{GROUP_ARGO}")
    assert run == metrics(f"clusteranalysistemplates.{GROUP_ARGO}")
