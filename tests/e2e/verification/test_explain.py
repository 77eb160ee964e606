"""``rollgate explain stage`` and ``kubectl rollgate explain stage`` next to the real
Kargo (docs/operating.md "Why is my freight not verified?"): the real Kargo v1.11.2
controller promotes and
verifies, the real Argo Rollouts controller runs the AnalysisRuns, and what a user reads
is checked for one Stage whose freight was verified and one whose verification failed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.kits.kargo import KargoProject, running_kargo
from harness.kits.verification import MetricServer, verdict_template
from harness.plane import ControlPlane
from harness.process import ManagedProcess
from schemas.constants import ANNOTATION_REVERIFY
from testkit.paths import REPO_ROOT

BIN = Path(sys.executable).parent
# Two 4 s measurements, so Kargo's own entry reaches its cache before the run ends.
TEMPLATE = "two-step"


@pytest.fixture(scope="module")
def kargo(control_plane: ControlPlane) -> Iterator[ManagedProcess]:
    with running_kargo(control_plane, name="kargo-explain") as proc:
        yield proc


@pytest.fixture
def project(control_plane: ControlPlane, namespace: str, metrics: MetricServer,
            argo_rollouts: Any, kargo: Any) -> Iterator[KargoProject]:
    p = KargoProject.labelled(control_plane, namespace)
    template = verdict_template(metrics.url, name=TEMPLATE, count=2, interval="4s")
    template["spec"]["metrics"][0]["failureLimit"] = 1  # a failing verdict: both measured
    p.apply(template)
    p.freight("a1")
    yield p
    # While Kargo runs: it removes its finalizer from the Stages it verified, which
    # would otherwise hold the namespace Terminating once this module's Kargo stops.
    control_plane.kubectl("delete", "stages", "--all", "-n", namespace, "--timeout=60s")


def user_env(plane: ControlPlane) -> dict[str, str]:
    """A user's shell: the venv's bin on PATH (as the README says), KUBECONFIG set."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["KUBECONFIG"] = str(plane.kubeconfig)
    return env


def explain(plane: ControlPlane, *args: str,
            kubectl: bool = False) -> subprocess.CompletedProcess[str]:
    argv = ([str(plane.binaries.kubectl), "rollgate"] if kubectl else ["rollgate"])
    return subprocess.run([*argv, "explain", "stage", *args], env=user_env(plane),
                          capture_output=True, text=True, timeout=60, check=False)


def readme_sample() -> str:
    """The docs' sample of ``rollgate explain`` (docs/flags.md "rollgate explain")."""
    page = (REPO_ROOT / "docs" / "operating.md").read_text()
    found = re.search(r"^```text\n(Stage .*?)^```", page, re.MULTILINE | re.DOTALL)
    assert found, "no rollgate explain sample in docs/operating.md"
    return found.group(1)


def normalised(text: str) -> str:
    """What differs from run to run: times, UUIDs, ULIDs, the namespace."""
    for pattern, stand_in in ((r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "<time>"),
                              (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
                               "<uuid>"), (r"\.[0-9a-z]{26}\.", ".<ulid>."),
                              (r"Stage t-[0-9a-f]{10}/", "Stage <ns>/")):
        text = re.sub(pattern, stand_in, text)
    return text


def whats(doc: dict[str, Any]) -> list[str]:
    return [i["what"] for i in doc["timeline"]]


def test_a_verified_and_a_failed_stage_explained(project: KargoProject) -> None:
    project.stage("good", templates=(TEMPLATE,))
    project.stage("bad", templates=(TEMPLATE,), verdict="fail")
    good = project.promote_and_verify("good", "a1")
    project.promote("bad", "a1")
    project.wait_promoted("bad", "a1")
    bad = project.wait_latest("bad", "Failed")
    check_verified_as_text(project, good)
    check_failed_as_json_through_kubectl(project, bad)
    check_what_observe_mode_would_report(project, good)


def check_verified_as_text(project: KargoProject, good: dict[str, Any]) -> None:
    """The verified Stage, in text, as a user reads it."""
    freight = project.freight_names["a1"]
    result = explain(project.plane, "good", "-n", project.ns)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    lines = text.splitlines()
    assert lines[0].startswith(f"Stage {project.ns}/good, freight collection ")
    assert lines[1] == "Answer: verified", text
    run = good["analysisRun"]["name"]
    order = [f"promotion {project.promotions('good')[0]['name']} finished: Succeeded",
             "health: Healthy", f"verification {good['id']} started",
             # The value as Argo Rollouts stores it: the web metric's JSON result.
             f"AnalysisRun {run} started", 'metric verdict measurement 1: Successful, value "pass"',
             'metric verdict measurement 2: Successful, value "pass"',
             f"AnalysisRun {run} completed: Successful", f"verification {good['id']}: Successful",
             "condition Verified=True", f"Freight {freight} is verified in good"]
    positions = [text.find(part) for part in order]
    assert -1 not in positions and positions == sorted(positions), (order, text)
    assert lines[-1] == "Findings: none", text


def check_failed_as_json_through_kubectl(project: KargoProject, bad: dict[str, Any]) -> None:
    """The failed Stage, in JSON and through kubectl; the text form says the same."""
    freight = project.freight_names["a1"]
    result = explain(project.plane, "bad", "-n", project.ns, "-o", "json", kubectl=True)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["stage"] == {"namespace": project.ns, "name": "bad"}
    assert doc["freight"]["names"] == [freight]
    assert doc["answer"].startswith(
        f"not verified: the latest verification ({bad['id']}) is Failed"), doc["answer"]
    assert 'metric verdict: Failed, last value "fail"' in doc["answer"], doc["answer"]
    assert whats(doc) == ["promotion", "health", "verification-started",
                          "analysis-run-started", "measurement", "measurement",
                          "analysis-run-completed", "verification", "condition", "freight"]
    measurements = [i for i in doc["timeline"] if i["what"] == "measurement"]
    assert [(m["metric"], m["phase"], m["value"]) for m in measurements] == [
        ("verdict", "Failed", '"fail"'), ("verdict", "Failed", '"fail"')]
    condition = next(i for i in doc["timeline"] if i["what"] == "condition")
    assert condition["status"] != "True", condition
    assert doc["findings"] == []
    # The text form says the same: kubectl rollgate without -o.
    text = explain(project.plane, "bad", "-n", project.ns, kubectl=True).stdout
    assert f"Answer: {doc['answer']}" in text
    assert all(i["text"] in text for i in doc["timeline"]), text
    # The README's sample is such a run: the same lines but for ids, times, namespace.
    assert normalised(text) == normalised(readme_sample()), text


def check_what_observe_mode_would_report(project: KargoProject, good: dict[str, Any]) -> None:
    """A failed reverify after a success, while Kargo keeps verifiedIn: the finding."""
    project.stage("good", templates=(TEMPLATE,), verdict="fail")
    project.annotate("good", ANNOTATION_REVERIFY, json.dumps({"id": good["id"]}))
    project.wait_latest("good", "Failed", count=2)
    doc = json.loads(explain(project.plane, "good", "-n", project.ns, "-o", "json").stdout)
    assert [f["kind"] for f in doc["findings"]] == ["VerifiedDespiteFailure"], doc
    assert doc["answer"].startswith("verified (an earlier verification succeeded"), doc
    assert "VerifiedDespiteFailure" in doc["answer"]
    assert whats(doc).count("verification") == 2


def test_a_missing_stage_and_a_missing_cluster_are_one_line(
        control_plane: ControlPlane, namespace: str) -> None:
    missing = explain(control_plane, "nope", "-n", namespace)
    assert missing.returncode == 1
    assert missing.stderr == f'rollgate explain: Stage "nope" not found in namespace {namespace}\n'

    env = {**user_env(control_plane), "KUBECONFIG": "/nonexistent/kubeconfig"}
    result = subprocess.run(["rollgate", "explain", "stage", "x"], env=env,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 1
    assert result.stderr.startswith("rollgate explain: no cluster to talk to ("), result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr, (
        result.stderr)
