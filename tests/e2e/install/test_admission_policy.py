"""The chart's ValidatingAdmissionPolicy backstop (``admissionPolicy.enabled``, docs/install.md
"Admission policy backstop") on a plane of its own with no rollgate webhook, which is what
the API server sees while no webhook pod answers under ``webhook.failurePolicy: Ignore``:
every rule the policy states refused with its field path, valid objects allowed, and
objects that predate the policy still editable and deletable."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from harness import chart
from harness.kits.plane import fresh_namespace, running_plane, tool_or_fail
from harness.plane import ControlPlane
from testkit import objects
from testkit.waits import wait_for

POLICY_KINDS = ("ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding")
STAGES = "ValidatingAdmissionPolicy 'rollgate-stages'"
MANAGERS = "ValidatingAdmissionPolicy 'rollgate-rolloutmanagers'"
DIGEST = "0123456789abcdef" * 4
# A digest as users paste it: the policy judges it trimmed and lower-cased, as the webhook.
DIGEST_AS_WRITTEN = f"  {DIGEST.upper()} "


def policy_objects(**webhook: Any) -> list[dict[str, Any]]:
    """The chart's policies and bindings, rendered with ``webhook`` values."""
    values = {"admissionPolicy": {"enabled": True}, "webhook": webhook}
    return [o for o in chart.render(values) if o["kind"] in POLICY_KINDS]


def bad_stage(name: str = "bad") -> dict[str, Any]:
    """A Stage that breaks two of the policy's Stage rules."""
    return objects.stage(name, verification=objects.verification(
        "Success_Rate", "ok", "ok"))


def bad_manager(name: str = "bad") -> dict[str, Any]:
    """A RolloutManager that breaks each of the policy's plugin rules once."""
    return objects.rollout_manager(name, traffic=[
        {"name": "argoproj-labs/gatewayAPI", "location": "http://plugins.example/gw"}],
        metric=[{"name": "argoproj-labs/gatewayAPI", "location": "https://plugins.example/m",
                 "sha256": "sha256:" + DIGEST}])


def create(plane: ControlPlane, namespace: str, obj: dict[str, Any], *args: str
           ) -> subprocess.CompletedProcess[str]:
    return plane.kubectl("create", "-n", namespace, "-f", "-", *args,
                         input=json.dumps(obj), check=False)


def probes() -> list[dict[str, Any]]:
    """One object per policy that every variant of it refuses."""
    return [bad_stage("probe"), objects.rollout_manager("probe", metric=[
        {"name": "a/b", "location": "https://plugins.example/b", "sha256": "x"}])]


def refused_count(plane: ControlPlane, namespace: str) -> int:
    outs = [create(plane, namespace, probe, "--dry-run=server") for probe in probes()]
    return sum(1 for out in outs if out.returncode != 0)


def enforce(plane: ControlPlane, namespace: str, policies: list[dict[str, Any]]) -> None:
    """Apply ``policies`` and wait until the API server enforces both (it loads a new
    binding a moment after it is stored)."""
    plane.apply_objects(policies)
    wait_for("the policies to be enforced", lambda: refused_count(plane, namespace) == 2,
             timeout=60)


def suspend(plane: ControlPlane, namespace: str) -> None:
    """Delete the bindings and wait until nothing is refused any more."""
    for name in ("rollgate-stages", "rollgate-rolloutmanagers"):
        plane.kubectl("delete", "validatingadmissionpolicybinding", name, "--ignore-not-found")
    wait_for("the policies to be lifted", lambda: refused_count(plane, namespace) == 0,
             timeout=60)


@pytest.fixture(scope="module")
def plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    tool_or_fail()
    with running_plane(tmp_path_factory.mktemp("policy-plane")) as started:
        yield started


@pytest.fixture
def namespace(plane: ControlPlane) -> Iterator[str]:
    with fresh_namespace(plane) as name:
        yield name


@pytest.fixture
def enforced(plane: ControlPlane, namespace: str) -> Iterator[str]:
    """The default policies enforced; ``namespace`` to use."""
    enforce(plane, namespace, policy_objects())
    yield namespace
    suspend(plane, namespace)


def test_every_stage_rule_is_refused_with_its_field_path(plane: ControlPlane,
                                                         enforced: str) -> None:
    out = create(plane, enforced, bad_stage())
    assert out.returncode != 0
    assert STAGES in out.stderr, out.stderr
    assert ("spec.verification.analysisTemplates[0].name: must be a DNS-1123 subdomain"
            in out.stderr), out.stderr
    assert ("spec.verification.analysisTemplates[2]: duplicate template reference: "
            "AnalysisTemplate ok is already listed" in out.stderr), out.stderr

    empty = create(plane, enforced, objects.stage("empty", verification={}))
    assert ("spec.verification.analysisTemplates: at least one template is required"
            in empty.stderr), empty.stderr


def test_every_plugin_rule_is_refused_with_its_field_path(plane: ControlPlane,
                                                          enforced: str) -> None:
    out = create(plane, enforced, bad_manager())
    assert out.returncode != 0
    assert MANAGERS in out.stderr, out.stderr
    for message in (
            "spec.plugins.metric[0].sha256: must be 64 hex characters",
            "spec.plugins.trafficManagement[0].location: must be an https:// or file:// URL",
            "spec.plugins.metric[0].name: plugin argoproj-labs/gatewayAPI is already listed"):
        assert message in out.stderr, out.stderr


def test_valid_objects_are_allowed(plane: ControlPlane, enforced: str) -> None:
    """The same name as an AnalysisTemplate and a ClusterAnalysisTemplate is two
    templates; a digest with spaces and capitals and a FILE:// location are valid."""
    stage = objects.stage("good", verification=objects.verification("ok", ("ok",)))
    manager = objects.rollout_manager("good", metric=[
        {"name": "argoproj-labs/prom", "location": "FILE:///plugins/prom",
         "sha256": DIGEST_AS_WRITTEN},
        {"name": "argoproj-labs/other", "location": "https://plugins.example/o"}])
    for obj in (stage, manager):
        out = create(plane, enforced, obj)
        assert out.returncode == 0, out.stderr


def test_http_locations_follow_allow_http_plugins(plane: ControlPlane, namespace: str) -> None:
    enforce(plane, namespace, policy_objects(allowHttpPlugins=True))
    try:
        over_http = objects.rollout_manager("http", metric=[
            {"name": "argoproj-labs/prom", "location": "http://plugins.example/prom"}])
        out = create(plane, namespace, over_http)
        assert out.returncode == 0, out.stderr
        sha = create(plane, namespace, objects.rollout_manager("sha", metric=[
            {"name": "a/b", "location": "http://plugins.example/b", "sha256": "abc"}]))
        assert "spec.plugins.metric[0].sha256: must be 64 hex" in sha.stderr, sha.stderr
        ftp = create(plane, namespace, objects.rollout_manager("ftp", metric=[
            {"name": "a/b", "location": "ftp://plugins.example/b"}]))
        assert "must be an https://, http:// or file:// URL" in ftp.stderr, ftp.stderr
    finally:
        suspend(plane, namespace)


def test_objects_that_predate_the_policy_stay_editable_and_deletable(
        plane: ControlPlane, namespace: str) -> None:
    """Made while no policy was bound: an edit outside the stanza is not checked, an
    edit of the stanza that keeps its old mistake is let through (ratcheting), a new
    kind of mistake is refused, and the finalizer comes off so the object can go."""
    hold = "example.com/hold"
    old_stage = bad_stage("old")
    old_stage["metadata"]["finalizers"] = [hold]
    old_manager = bad_manager("old")
    old_manager["metadata"]["finalizers"] = [hold]
    for obj in (old_stage, old_manager):
        assert create(plane, namespace, obj).returncode == 0
    enforce(plane, namespace, policy_objects())
    try:
        def patch(kind: str, ops: list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
            return plane.kubectl("patch", "-n", namespace, kind, "old", "--type=json",
                                 "-p", json.dumps(ops), check=False)

        labelled = patch("stage", [{"op": "add", "path": "/metadata/labels",
                                    "value": {"team": "shop"}}])
        assert labelled.returncode == 0, labelled.stderr
        kept = patch("stage", [{"op": "add", "path": "/spec/verification/args",
                                "value": [{"name": "service", "value": "checkout"}]}])
        assert kept.returncode == 0, kept.stderr
        emptied = patch("stage", [{"op": "replace", "path": "/spec/verification",
                                   "value": {}}])
        assert "at least one template is required" in emptied.stderr, emptied.stderr
        relocated = patch("rolloutmanager", [{"op": "replace",
                                              "path": "/spec/plugins/metric/0/location",
                                              "value": "https://plugins.example/m2"}])
        assert relocated.returncode == 0, relocated.stderr
        for kind in ("stage", "rolloutmanager"):
            freed = patch(kind, [{"op": "remove", "path": "/metadata/finalizers"}])
            assert freed.returncode == 0, freed.stderr
            gone = plane.kubectl("delete", "-n", namespace, kind, "old", "--timeout=30s",
                                 check=False)
            assert gone.returncode == 0, gone.stderr
    finally:
        suspend(plane, namespace)
