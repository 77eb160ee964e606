"""``rollgate selftest``'s probes and its verdicts on what the API server answers
(webhook.selftest); the dry runs themselves go to a real cluster in tests/node
(``helm test``).

Messages are spelled as users read them, not built from schemas.kinds."""

from __future__ import annotations

import json

import pytest

from schemas import Finding, check_rollout_manager, check_stage, errors, render_path
from schemas.kinds import GROUP_KARGO
from webhook.selftest import (
    PROBES,
    ROLLOUT_MANAGER_HOOK,
    STAGE_HOOK,
    Answer,
    Probe,
    judge,
    message_of,
    skipped,
    summary,
)

INVALID_STAGE, INVALID_RM, VALID_STAGE = PROBES


def denial(hook: str, *paths: str) -> Answer:
    return Answer(status=422, message=(
        f'admission webhook "{hook}" denied the request: '
        + "; ".join(f"{p}: wrong" for p in paths)))


def test_the_probes_are_what_rollgate_itself_denies_and_allows() -> None:
    """The invalid objects fail rollgate's own checks at exactly the paths the test
    expects, and the valid one passes them, so a PASS means the webhook judged."""
    def paths(findings: list[Finding]) -> set[str]:
        return {render_path(f.path) for f in errors(findings)}

    assert set(INVALID_STAGE.paths) <= paths(check_stage(INVALID_STAGE.body))
    assert set(INVALID_RM.paths) <= paths(check_rollout_manager(INVALID_RM.body))
    assert paths(check_stage(VALID_STAGE.body)) == set()


@pytest.mark.parametrize("probe", [INVALID_STAGE, INVALID_RM])
def test_a_denial_by_rollgate_naming_every_path_passes(probe: Probe) -> None:
    assert probe.denied_by is not None
    verdict = judge(probe, denial(probe.denied_by, *probe.paths), namespace="ns")
    assert verdict.passed, verdict.line
    assert verdict.line.startswith(f"PASS {probe.title}")


def test_an_allowed_invalid_object_fails_saying_what_to_check() -> None:
    verdict = judge(INVALID_STAGE, Answer(status=201), namespace="team-a")
    assert not verdict.passed
    assert STAGE_HOOK in verdict.line and "namespace team-a" in verdict.line


def test_a_denial_by_another_webhook_or_without_a_path_fails() -> None:
    other = judge(INVALID_RM, denial(GROUP_KARGO, *INVALID_RM.paths), namespace="ns")
    assert not other.passed and f"not by {ROLLOUT_MANAGER_HOOK}" in other.line
    partial = judge(INVALID_RM, denial(ROLLOUT_MANAGER_HOOK, INVALID_RM.paths[0]),
                    namespace="ns")
    assert not partial.passed and INVALID_RM.paths[1] in partial.line


def test_a_crd_gone_after_discovery_listed_it_fails() -> None:
    verdict = judge(INVALID_RM, Answer(404, "the server could not find the requested "
                                            "resource"), namespace="ns")
    assert not verdict.passed
    assert "the CRD rolloutmanagers.argoproj.io is not served" in verdict.line


def test_a_kind_not_served_is_skipped_and_counted_apart() -> None:
    verdicts = [skipped(INVALID_RM), judge(VALID_STAGE, Answer(201), namespace="ns")]
    assert verdicts[0].passed and verdicts[0].skipped
    assert verdicts[0].line.startswith("SKIP an invalid RolloutManager is denied: the CRD "
                                       "rolloutmanagers.argoproj.io is not served")
    assert summary(verdicts, namespace="ns") == (
        "1 of 1 checks passed, 1 skipped (CRD not served) (namespace ns)")
    failed = [judge(VALID_STAGE, denial(STAGE_HOOK, "spec"), namespace="ns")]
    assert summary(failed, namespace="ns") == "0 of 1 checks passed (namespace ns)"


def test_the_valid_stage_must_be_allowed() -> None:
    assert judge(VALID_STAGE, Answer(201), namespace="ns").passed
    refused = judge(VALID_STAGE, denial(STAGE_HOOK, "spec"), namespace="ns")
    assert not refused.passed and "refused with 422" in refused.line


def test_forbidden_names_the_namespace_and_the_role() -> None:
    verdict = judge(VALID_STAGE, Answer(403, "stages is forbidden"), namespace="team-a")
    assert not verdict.passed and "team-a" in verdict.line and "selftest" in verdict.line


def test_message_of_reads_a_status_body() -> None:
    body = json.dumps({"kind": "Status", "message": "denied: x"})
    assert message_of(body) == "denied: x"
    assert message_of("plain text\n") == "plain text"
