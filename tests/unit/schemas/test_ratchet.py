"""Validation ratcheting: an error in a value the UPDATE did not change is a warning."""

from __future__ import annotations

import copy
from typing import Any

import schemas
from schemas.ratchet import RATCHET_NOTE
from testkit import objects


def rm(*entries: dict[str, Any]) -> dict[str, Any]:
    return objects.rollout_manager("rm", namespace="argo-rollouts", metric=list(entries))


def ratcheted(obj: dict[str, Any], old: dict[str, Any] | None) -> list[schemas.Finding]:
    return schemas.ratchet(schemas.check(obj), obj=obj, old_obj=old)


def test_unchanged_invalid_value_becomes_a_warning_saying_why() -> None:
    old = rm({"name": "gatewayAPI", "location": "file:///p"})
    new = copy.deepcopy(old)
    new["metadata"]["labels"] = {"edited": "yes"}
    findings = ratcheted(new, old)
    assert schemas.errors(findings) == []
    [warning] = schemas.warnings(findings)
    assert warning.field == "spec.plugins.metric[0].name"
    assert RATCHET_NOTE in warning.message
    assert "allowed because the value is unchanged" in warning.message


def test_changed_invalid_value_still_denies() -> None:
    old = rm({"name": "gatewayAPI", "location": "file:///p"})
    new = rm({"name": "gatewayAPI2", "location": "file:///p"})
    assert [f.field for f in schemas.errors(ratcheted(new, old))] == ["spec.plugins.metric[0].name"]


def test_create_has_nothing_to_ratchet() -> None:
    new = rm({"name": "gatewayAPI", "location": "file:///p"})
    assert len(schemas.errors(ratcheted(new, None))) == 1


def test_missing_field_compares_nearest_parent() -> None:
    old = rm({"name": "a/b"})  # location missing
    same = copy.deepcopy(old)
    assert schemas.errors(ratcheted(same, old)) == []
    changed = rm({"name": "a/c"})  # the entry (nearest parent) changed
    assert [f.field for f in schemas.errors(ratcheted(changed, old))] == [
        "spec.plugins.metric[0].location"
    ]


def test_duplicate_compares_the_whole_list() -> None:
    entry = {"name": "a/x", "location": "file:///1"}
    old = rm(entry, dict(entry))
    unchanged = copy.deepcopy(old)
    assert schemas.errors(ratcheted(unchanged, old)) == []
    # Adding an entry changes the list, so the duplicate is denied again.
    grown = rm(entry, dict(entry), {"name": "a/y", "location": "file:///2"})
    assert [f.field for f in schemas.errors(ratcheted(grown, old))] == [
        "spec.plugins.metric[1].name"
    ]


def test_both_spellings_compare_both_stanzas() -> None:
    old = objects.stage(freight=False, spec={
        "analysis": {"templates": [{"templateName": "a"}]},
        "verification": {"analysisTemplates": [{"name": "a"}]},
    })
    assert schemas.errors(ratcheted(copy.deepcopy(old), old)) == []
    new = copy.deepcopy(old)
    new["spec"]["analysis"]["templates"].append({"templateName": "b"})
    assert [f.field for f in schemas.errors(ratcheted(new, old))] == ["spec.verification"]


def test_defaulting_by_the_mutating_webhook_is_not_a_change() -> None:
    # The stored object predates the webhook: a padded, upper-case, too-short digest.
    old = rm({"name": "a/b", "location": "file:///p", "sha256": " ABC "})
    new = rm({"name": "a/b", "location": "file:///p", "sha256": "abc"})  # after mutation
    assert schemas.errors(ratcheted(new, old)) == []


def test_warnings_stay_warnings_and_order_is_kept() -> None:
    old = rm(
        {"name": "bad", "location": "https://example.com/p"},
        {"name": "a/b", "location": "https://example.com/q"},
    )
    new = copy.deepcopy(old)
    new["spec"]["plugins"]["metric"][1]["location"] = "ftp://x"
    findings = schemas.check(new)
    result = schemas.ratchet(findings, obj=new, old_obj=old)
    assert [f.field for f in result] == [f.field for f in findings]
    by_field = {(f.field, f.warning) for f in result}
    assert ("spec.plugins.metric[0].name", True) in by_field  # ratcheted
    assert ("spec.plugins.metric[1].location", False) in by_field  # changed: still an error
    assert ("spec.plugins.metric[0].sha256", True) in by_field  # was a warning already


def test_ratchet_with_label_key_paths() -> None:
    old = objects.stage(freight=False, spec={"analysis": {
        "templates": [{"templateName": "a"}],
        "analysisRunMetadata": {"labels": {"rollgate.dev/attempt": "1"}},
    }})
    assert schemas.errors(ratcheted(copy.deepcopy(old), old)) == []
    new = copy.deepcopy(old)
    new["spec"]["analysis"]["analysisRunMetadata"]["labels"]["rollgate.dev/attempt"] = "2"
    assert len(schemas.errors(ratcheted(new, old))) == 1


def _stage_arg(value: object) -> dict[str, Any]:
    return objects.stage("s", namespace="ns", freight=False, spec={
        "analysis": {"templates": [{"templateName": "t"}],
                     "args": [{"name": "port", "value": value}]}})


def test_a_change_of_json_type_is_a_change() -> None:
    # In Python 1 == True == 1.0; in the object the user sees, they differ.
    for old_value, new_value in ((1, True), (1, 1.0), (0, False)):
        errors = schemas.errors(ratcheted(_stage_arg(new_value), _stage_arg(old_value)))
        assert [f.field for f in errors] == ["spec.analysis.args[0].value"], (old_value, new_value)
    # the same value stays ratcheted
    assert schemas.errors(ratcheted(_stage_arg(True), _stage_arg(True))) == []


def test_key_order_is_not_a_change() -> None:
    old = rm({"name": "gatewayAPI", "location": "file:///p"})
    new = rm({"location": "file:///p", "name": "gatewayAPI"})
    assert schemas.errors(ratcheted(new, old)) == []


def _duplicate_refs(first: dict[str, Any]) -> dict[str, Any]:
    return objects.stage("s", namespace="ns", freight=False,
                         verification={"analysisTemplates": [first, {"name": "a"}]})


def test_kind_written_by_an_earlier_release_is_not_a_change() -> None:
    # Earlier releases defaulted `kind: AnalysisTemplate` into stored Stages; the same
    # manifest without it says the same, so the duplicate it carries stays ratcheted.
    stored = _duplicate_refs({"name": "a", "kind": "AnalysisTemplate"})
    applied = _duplicate_refs({"name": "a"})
    findings = ratcheted(applied, stored)
    assert schemas.errors(findings) == []
    assert [f.field for f in schemas.warnings(findings)] == [
        "spec.verification.analysisTemplates[1]"
    ]
    # A real change of the list still denies.
    changed = _duplicate_refs({"name": "a", "kind": "ClusterAnalysisTemplate"})
    changed["spec"]["verification"]["analysisTemplates"].append({"name": "a"})
    assert [f.field for f in schemas.errors(ratcheted(changed, stored))] == [
        "spec.verification.analysisTemplates[2]"
    ]


def test_cluster_scope_false_is_not_a_change_but_zero_is() -> None:
    def stage(first: dict[str, Any]) -> dict[str, Any]:
        return objects.stage(freight=False, spec={"analysis": {
            "templates": [first, {"templateName": "a"}]}})

    stored = stage({"templateName": "a", "clusterScope": False})
    assert schemas.errors(ratcheted(stage({"templateName": "a"}), stored)) == []
    # 0 is not false in JSON: a change (and an error of its own).
    assert schemas.errors(ratcheted(stage({"templateName": "a", "clusterScope": 0}), stored))
    assert stored["spec"]["analysis"]["templates"][0] == {
        "templateName": "a", "clusterScope": False}  # the input is not modified
