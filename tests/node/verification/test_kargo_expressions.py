"""Engine mode evaluates Kargo expressions in verification args as the real Kargo does
(docs/verification.md, "Kargo expressions in verification args").

One Stage, promoted once: the real Kargo v1.11.2 verifies it first and its AnalysisRun's
args are recorded; then Kargo is stopped, its run, the verification history and its
finalizer are removed, and rollgate's reconciler in engine mode verifies the same Stage and freight.
Both runs must carry the same value for every arg: plain strings, ``ctx``, ``vars``
(the Stage's ``spec.vars``, one of them an expression itself), string concatenation,
``quote``/``unsafeQuote``, both delimiters, quotes and unicode in strings, ``}}`` as
text, an empty ``${{}}`` and a member Kargo does not have.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness.host_rollgate import HostRollgate
from harness.kits.kargo import STEPS, KargoProject
from harness.kits.verification import MetricServer, verdict_template
from harness.plane import ControlPlane
from harness.upstream import kargo as kargo_upstream
from harness.upstream import trees
from testkit import objects
from testkit.waits import wait_for

ARGS = [
    "plain-value", "8080", "a }} b", "${{ ctx.stage }}", "${% ctx.project %}",
    "${{ ctx['stage'] }}", "pre-${{ ctx.stage }}-post", "${{ ctx.stage + '-' + ctx.project }}",
    "${{ quote(8080) }}", "${{ quote('x') }}", "${{ unsafeQuote('x') }}", "${{ \"it's\" }}",
    "${{ 'say \"hi\"' }}", "${{ \"été 日本\" }}", "${{ vars.host }}",
    "${{ vars.host + ':' + vars.port }}", "${{ vars.missing }}-x", "x${{ \"\" }}",
    "${{ `raw` }}", "${{ '%}' }}", "${{ \"${{\" }}", "${{}}kept ${{ ctx.stage }}",
    "${{ quote(ctx.stage) }}-${% ctx.project %}",
]
VARS = [{"name": "host", "value": "svc.${{ ctx.project }}"}, {"name": "port", "value": "8080"}]


def _stage(name: str) -> dict[str, Any]:
    return objects.stage(name, warehouse="w", verification=objects.verification(
        "verdict", args=[{"name": "verdict", "value": "pass"}] + [
            {"name": f"a{i:02d}", "value": v} for i, v in enumerate(ARGS)]),
        spec={"promotionTemplate": {"spec": {"steps": STEPS}}, "vars": VARS})


def _args(run: dict[str, Any]) -> dict[str, str]:
    return {a["name"]: a.get("value") for a in run["spec"].get("args") or []}


def _run_by(project: KargoProject, stage: str, *, rollgate: bool) -> dict[str, Any]:
    def found() -> dict[str, Any] | None:
        for run in project.runs(stage):
            labels = run["metadata"].get("labels") or {}
            if (labels.get("app.kubernetes.io/managed-by") == "rollgate") == rollgate:
                return run
        return None
    return wait_for(f"{'rollgate' if rollgate else 'Kargo'}'s AnalysisRun for {stage}", found)


def test_engine_mode_builds_the_same_arg_values_as_kargo(
        control_plane: ControlPlane, namespace: str, metrics: MetricServer,
        argo_rollouts: Any, rollgate: HostRollgate) -> None:
    try:
        kargo = kargo_upstream.start_controller(control_plane)
    except trees.UpstreamMissing as err:
        pytest.fail(str(err), pytrace=False)
    try:
        project = KargoProject.labelled(control_plane, namespace)
        template = verdict_template(metrics.url)
        template["spec"]["args"] += [{"name": f"a{i:02d}"} for i in range(len(ARGS))]
        project.apply(template)
        project.freight("a1")
        project.apply(_stage("expr"))
        project.promote("expr", "a1")
        project.wait_promoted("expr", "a1")
        kargos = _args(_run_by(project, "expr", rollgate=False))
    finally:
        control_plane.stop_process(kargo)

    # Nothing of Kargo's verification is left for engine mode to stand back from.
    for run in project.runs("expr"):
        project.kubectl("delete", "analysisrun", run["metadata"]["name"], "-n", namespace,
                        "--wait=true")
    project.kubectl("patch", "stage", "expr", "-n", namespace, "--subresource=status",
                    "--type=json", "-p", json.dumps([
                        {"op": "remove", "path": "/status/freightHistory/0/verificationHistory"}]))
    assert project.history("expr") == []
    # Kargo's finalizer says a Kargo controller reconciles the Stage (engine mode stands
    # back from those); with Kargo gone it is what a user removes.
    project.kubectl("patch", "stage", "expr", "-n", namespace, "--type=json", "-p",
                    json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]))

    engine = rollgate.start_reconciler(
        "--controllers", "stage-verification", "--stage-verification", "engine",
        "--namespaces", namespace, "--no-leader-elect", name="reconciler-kargo-expressions")
    try:
        engine.wait_ready(60)
        try:
            ours = _args(_run_by(project, "expr", rollgate=True))
        except BaseException:
            print("Stage status:", json.dumps((project.get("stage", "expr") or {}).get(
                "status"), indent=1))
            print("Events:", json.dumps([(e.get("reason"), e.get("message"))
                                         for e in project.items("events")], indent=1))
            raise
    finally:
        control_plane.stop_process(engine)

    assert len(ARGS) >= 15
    assert sum("${" not in v for v in ARGS) >= 3  # plain strings
    assert set(kargos) == {"verdict", *(f"a{i:02d}" for i in range(len(ARGS)))}
    assert ours == kargos
    # A few values spelled out, so the comparison cannot pass with both sides wrong.
    assert kargos["a03"] == "expr"
    assert kargos["a04"] == namespace
    assert kargos["a15"] == f"svc.{namespace}:8080"
    assert kargos["a02"] == "a }} b"
