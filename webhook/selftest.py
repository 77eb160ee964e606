"""What ``rollgate selftest`` sends and how it judges the answers (pure).

The self-test makes server-side dry runs through the API server, as ``kubectl apply
--dry-run=server`` would, so it proves the whole path a user's write takes: the API
server, the webhook configurations, the Service and the webhook pods. It passes only
when an invalid Stage and an invalid RolloutManager are denied by rollgate's own
validating webhooks with the field paths expected, and a valid Stage is allowed. A
check whose kind the API server does not serve (its CRD is not installed: no Kargo, or
Argo Rollouts without argo-rollouts-manager) is skipped and says so; a denial by another
webhook (Kargo's, in a namespace that is not a Project) is a failure.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

STAGE_HOOK = "validate-stages.rollgate.dev"
ROLLOUT_MANAGER_HOOK = "validate-rolloutmanagers.rollgate.dev"


@dataclass(frozen=True, slots=True)
class Probe:
    """One dry run: the object, where it goes, and what must come back."""

    title: str
    crd: str  # the CRD's name, for the message when it is not installed
    body: dict[str, Any]
    denied_by: str | None  # the webhook that must deny it; None: it must be allowed
    paths: tuple[str, ...] = ()  # field paths the denial must name


@dataclass(frozen=True, slots=True)
class Answer:
    """What the API server said: 2xx (allowed) or an error status and its message."""

    status: int
    message: str = ""


@dataclass(frozen=True, slots=True)
class Verdict:
    passed: bool
    line: str
    skipped: bool = False


def skipped(probe: Probe) -> Verdict:
    """The verdict for a probe whose kind is not served: nothing there to protect yet."""
    return Verdict(True, f"SKIP {probe.title}: the CRD {probe.crd} is not served by this "
                         "cluster (install Kargo or argo-rollouts-manager, which bring it, "
                         "and run again to check it)", skipped=True)


def summary(verdicts: list[Verdict], *, namespace: str) -> str:
    """The last line: how many checks passed, failed and were skipped."""
    ran = [v for v in verdicts if not v.skipped]
    passed = sum(v.passed for v in ran)
    skips = len(verdicts) - len(ran)
    return (f"{passed} of {len(ran)} checks passed"
            + (f", {skips} skipped (CRD not served)" if skips else "")
            + f" (namespace {namespace})")


def _requested_freight() -> list[dict[str, Any]]:
    return [{"origin": {"kind": "Warehouse", "name": "rollgate-selftest"},
             "sources": {"direct": True}}]


PROBES = (
    Probe(
        title="an invalid Stage is denied", crd="stages.kargo.akuity.io",
        body={"apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Stage",
              "metadata": {"name": "rollgate-selftest-invalid"},
              "spec": {"requestedFreight": _requested_freight(),
                       "verification": {"analysisTemplates": [{"name": "Not_A_Name"}],
                                        "args": [{"name": "", "value": "x"}]}}},
        denied_by=STAGE_HOOK,
        paths=("spec.verification.analysisTemplates[0].name",
               "spec.verification.args[0].name")),
    Probe(
        title="an invalid RolloutManager is denied", crd="rolloutmanagers.argoproj.io",
        body={"apiVersion": "argoproj.io/v1alpha1", "kind": "RolloutManager",
              "metadata": {"name": "rollgate-selftest-invalid"},
              "spec": {"plugins": {"metric": [{
                  "name": "no-namespace", "location": "https://plugins.example/metric",
                  "sha256": "dac10cbf57633c9832a17f8c27d2ca34aa97dd3d"}]}}},
        denied_by=ROLLOUT_MANAGER_HOOK,
        paths=("spec.plugins.metric[0].name", "spec.plugins.metric[0].sha256")),
    Probe(
        title="a valid Stage is allowed", crd="stages.kargo.akuity.io",
        body={"apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Stage",
              "metadata": {"name": "rollgate-selftest-valid"},
              "spec": {"requestedFreight": _requested_freight(),
                       "verification": {"analysisTemplates": [{"name": "success-rate"}]}}},
        denied_by=None),
)


def message_of(body: str) -> str:
    """The ``message`` of a Kubernetes Status body, else the body itself."""
    try:
        status = json.loads(body)
    except ValueError:
        return body.strip()
    return str(status.get("message", body)).strip() if isinstance(status, dict) else body


def judge(probe: Probe, answer: Answer, *, namespace: str) -> Verdict:
    """PASS or FAIL for one dry run, with what was seen and what to do."""
    if answer.status == 404 and "could not find the requested resource" in answer.message:
        # Discovery listed the kind a moment ago (else it was skipped): a CRD removed or
        # not yet Established in between.
        return Verdict(False, f"FAIL {probe.title}: the CRD {probe.crd} is not served "
                              "although discovery listed it; run again once it is "
                              "Established")
    if answer.status == 403:
        return Verdict(False, f"FAIL {probe.title}: not allowed to create it in namespace "
                              f"{namespace}: {answer.message} (the chart's selftest Role "
                              "is in selftest.namespace)")
    if probe.denied_by is None:
        if answer.status < 300:
            return Verdict(True, f"PASS {probe.title}")
        return Verdict(False, f"FAIL {probe.title}: refused with {answer.status}: "
                              f"{answer.message}")
    return _judge_denial(probe, answer, namespace=namespace)


def _judge_denial(probe: Probe, answer: Answer, *, namespace: str) -> Verdict:
    if answer.status < 300:
        return Verdict(False, f"FAIL {probe.title}: it was allowed; is the webhook "
                              f"configuration {probe.denied_by} installed, and does it "
                              f"select namespace {namespace} (not excluded)?")
    if f'admission webhook "{probe.denied_by}" denied the request' not in answer.message:
        return Verdict(False, f"FAIL {probe.title}: refused ({answer.status}), but not by "
                              f"{probe.denied_by}: {answer.message}")
    missing = [p for p in probe.paths if p not in answer.message]
    if missing:
        return Verdict(False, f"FAIL {probe.title}: the denial does not name "
                              f"{', '.join(missing)}: {answer.message}")
    return Verdict(True, f"PASS {probe.title} by {probe.denied_by} "
                         f"({', '.join(probe.paths)})")
