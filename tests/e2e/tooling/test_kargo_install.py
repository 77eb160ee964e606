"""The real Kargo installed as its own chart installs it (docs/development.md, "Kargo as
its chart installs it").

What the harness registers for Kargo's webhooks server is the chart's rendering by the
real helm, compared here with an independent ``helm template`` of the same chart as the
API server stores it: every webhook's rules, selectors, policies and the rest are equal,
and only where the API server calls it (a URL on this host instead of a Service, with
the plane's CA) differs. The chart's ClusterRoles and ClusterRoleBindings are there as
rendered. Kargo's management controller runs next to them: a Project becomes a Ready
Project namespace, and a deleted Project namespace that held a Promotion goes.

Webhook names are spelled as Kargo's chart names them.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import chart
from harness.kits.kargo import STEPS, kargo_project, running_kargo
from harness.plane import ControlPlane, objects_of
from harness.process import ManagedProcess
from harness.upstream import kargo as kargo_upstream
from harness.upstream import kargo_chart
from harness.upstream.trees import KARGO_NAMESPACE, PROJECT_LABEL
from schemas.constants import KARGO_FINALIZER
from testkit import objects
from testkit.waits import wait_for

WEBHOOK_KINDS = {"MutatingWebhookConfiguration": "mutatingwebhookconfiguration",
                 "ValidatingWebhookConfiguration": "validatingwebhookconfiguration"}


@pytest.fixture(scope="module")
def kargo(control_plane: ControlPlane) -> Iterator[ManagedProcess]:
    with running_kargo(control_plane, name="kargo-install", webhooks=True) as proc:
        yield proc


@pytest.fixture(scope="module")
def charts_rendering(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """``helm template`` of the wrapper chart with the chart's own defaults: no values
    of the harness's, no change made afterwards."""
    root = kargo_chart.wrapper_chart(tmp_path_factory.mktemp("kargo-chart"))
    out = chart.helm("template", kargo_chart.RELEASE, str(root), "--namespace",
                     KARGO_NAMESPACE)
    return objects_of(out.stdout)


def as_stored(plane: ControlPlane, obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` as the API server would store it (its defaults filled in): a server-side
    dry run of a copy under another name."""
    copy = {**obj, "metadata": {"name": obj["metadata"]["name"] + "-chart-reference"}}
    out = plane.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                        input=json.dumps(copy))
    stored: dict[str, Any] = json.loads(out.stdout)
    return stored


def without_client(hook: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in hook.items() if k != "clientConfig"}


def test_the_wrapper_chart_is_the_trees_chart_with_empty_label_helpers(
        tmp_path: Path) -> None:
    """The wrapper holds the tree's values and templates byte for byte; the only named
    templates they include that the tree lacks are the label and annotation helpers,
    defined empty."""
    root = kargo_chart.wrapper_chart(tmp_path)
    source = kargo_chart.chart_source()
    assert (root / "values.yaml").read_bytes() == (source / "values.yaml").read_bytes()
    included: set[str] = set()
    for name in kargo_chart.TEMPLATES:
        copied = root / "templates" / kargo_chart.TEMPLATE_DIR / name
        original = source / "templates" / kargo_chart.TEMPLATE_DIR / name
        assert copied.read_bytes() == original.read_bytes(), name
        included |= set(re.findall(r'include "([^"]+)"', original.read_text()))
    assert included == set(kargo_chart.HELPER_STUBS)
    assert not list(source.glob("templates/_*.tpl")), "the tree now has the chart's helpers"
    stubs = (root / "templates" / kargo_chart.STUBS_FILE).read_text()
    assert stubs.splitlines() == [f'{{{{- define "{n}" -}}}}{{{{- end -}}}}'
                                  for n in kargo_chart.HELPER_STUBS]


def test_kargos_webhooks_are_registered_as_its_chart_registers_them(
        control_plane: ControlPlane, kargo: ManagedProcess,
        charts_rendering: list[dict[str, Any]]) -> None:
    configs = [o for o in charts_rendering if o["kind"] in WEBHOOK_KINDS]
    assert sorted(o["kind"] for o in configs) == sorted(WEBHOOK_KINDS)
    for reference in configs:
        registered = control_plane.get_json(WEBHOOK_KINDS[reference["kind"]],
                                            reference["metadata"]["name"])
        expected = as_stored(control_plane, reference)["webhooks"]
        assert [h["name"] for h in registered["webhooks"]] == [h["name"] for h in expected]
        for mine, theirs, rendered in zip(registered["webhooks"], expected,
                                          reference["webhooks"], strict=True):
            # Rules, selectors, failure policy, side effects, match policy, timeout,
            # review versions (and reinvocation policy): all of it.
            assert without_client(mine) == without_client(theirs), mine["name"]
            client = mine["clientConfig"]
            assert "service" not in client
            assert client["url"].startswith("https://127.0.0.1:"), client
            assert client["url"].endswith(rendered["clientConfig"]["service"]["path"])
            assert base64.b64decode(client["caBundle"]) == control_plane.ca.pem
    # What that means for users: the Stage webhook has no namespace selector in the
    # chart and judges every namespace.
    validating = next(o for o in configs if o["kind"] == "ValidatingWebhookConfiguration")
    stage_hook = next(h for h in validating["webhooks"] if h["name"] == "stage.kargo.akuity.io")
    assert "namespaceSelector" not in stage_hook
    registered = control_plane.get_json("validatingwebhookconfiguration", "kargo")
    assert next(h for h in registered["webhooks"] if h["name"] == "stage.kargo.akuity.io")[
        "namespaceSelector"] == {}


def test_a_stage_outside_a_project_is_refused_as_kargos_chart_refuses_it(
        control_plane: ControlPlane, kargo: ManagedProcess, namespace: str) -> None:
    stage = objects.stage("outside", namespace=namespace, warehouse="w",
                          spec={"promotionTemplate": {"spec": {"steps": STEPS}}})
    out = control_plane.kubectl("apply", "-f", "-", input=json.dumps(stage), check=False)
    assert out.returncode != 0
    assert f'namespace "{namespace}" is not a project' in out.stderr, out.stderr


def test_the_charts_cluster_roles_are_installed_as_rendered(
        control_plane: ControlPlane, kargo: ManagedProcess,
        charts_rendering: list[dict[str, Any]]) -> None:
    """Among them the ``promote`` verb on Stages for kube-system's namespace controller
    and garbage collector, which Kargo's Promotion webhook asks before a delete."""
    rbac = [o for o in charts_rendering if o["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    names = {(o["kind"], o["metadata"]["name"]) for o in rbac}
    assert ("ClusterRoleBinding", "kargo-webhooks-server-ns-controller") in names
    assert ("ClusterRoleBinding", "kargo-webhooks-server-generic-gc") in names
    for reference in rbac:
        registered = control_plane.get_json(reference["kind"].lower(),
                                             reference["metadata"]["name"])
        for key in ("rules", "roleRef", "subjects"):
            assert registered.get(key) == as_stored(control_plane, reference).get(key), (
                reference["metadata"]["name"], key)


def test_a_project_becomes_a_ready_project_namespace_and_goes_with_its_promotions(
        control_plane: ControlPlane, kargo: ManagedProcess) -> None:
    """Kargo's Project webhook makes the namespace (labelled, with Kargo's finalizer) and
    its management controller says the Project is Ready; deleting the namespace, as a
    user may, with a Promotion in it, removes the Project and the namespace."""
    with kargo_project(control_plane) as project:
        namespace = control_plane.get_json("namespace", project.ns)
        assert namespace["metadata"]["labels"][PROJECT_LABEL] == "true"
        assert KARGO_FINALIZER in namespace["metadata"]["finalizers"]
        ready = kargo_upstream.project_condition(control_plane, project.ns, "Ready")
        assert (ready["status"], ready["reason"]) == ("True", "Synced")
        project.apply(objects.stage("s", warehouse="w",
                                    spec={"promotionTemplate": {"spec": {"steps": STEPS}}}))
        project.freight("a1")
        project.promote("s", "a1")
        project.wait_promoted("s", "a1")
        assert project.items("promotions")

        control_plane.kubectl("delete", "namespace", project.ns, "--timeout=120s")

        def gone(ref: str) -> bool:
            return control_plane.kubectl("get", ref, "--ignore-not-found", "-o",
                                         "name").stdout == ""

        wait_for("the Project gone", lambda: gone(f"project/{project.ns}"))
        wait_for("the Project's ClusterRole gone",
                 lambda: gone(f"clusterrole/kargo-project-admin-{project.ns}"))
