"""The rules users rely on most, stated explicitly (the corpus covers the rest)."""

from __future__ import annotations

from typing import Any

import pytest

import schemas
from schemas import constants
from testkit import objects

SHA1_HINT = "this is the length of a SHA-1 digest; sha256 needs 64 hex characters"
GOOD_SHA = "4b3aafd8f48b3cf1bd4b5ea4e2f0cc1a3f43d24e8b24c4d4a6e2b3b3c8e3a1f0"


def rollout_manager(*, traffic: list[Any] | None = None, metric: list[Any] | None = None):
    return objects.rollout_manager(namespace="argo-rollouts", traffic=traffic, metric=metric)


def stage(**analysis: Any) -> dict[str, Any]:
    return objects.stage(namespace="demo", freight=False, spec={
        "analysis": {"templates": [{"templateName": "success-rate"}], **analysis}})


def error_map(obj: dict[str, Any], **options: Any) -> dict[str, str]:
    return {f.field: f.message for f in schemas.errors(schemas.check(obj, **options))}


def test_sha1_length_digest_is_denied_with_the_hint() -> None:
    rm = rollout_manager(
        traffic=[
            {
                "name": "argoproj-labs/gatewayAPI",
                "location": "https://example.com/gatewayapi",
                "sha256": "dac10cbf57633c9832a17f8c27d2ca34aa97dd3d",
            }
        ]
    )
    assert error_map(rm) == {"spec.plugins.trafficManagement[0].sha256": SHA1_HINT}


def test_sha1_hint_also_applies_after_trimming_and_lowercasing() -> None:
    rm = rollout_manager(
        metric=[
            {
                "name": "a/b",
                "location": "file:///p",
                "sha256": "  DAC10CBF57633C9832A17F8C27D2CA34AA97DD3D ",
            }
        ]
    )
    assert error_map(rm) == {"spec.plugins.metric[0].sha256": SHA1_HINT}


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("http://example.com/plugin", "--allow-http-plugins"),
        ("Http://example.com/plugin", "--allow-http-plugins"),
        ("file://plugins/metric", "not an absolute path"),
        ("file://./metric", "not an absolute path"),
        ("file://host/x", "joins host and path"),
        ("https://user:pass@example.com/plugin", "credentials"),
        ("https://token@example.com/plugin", "credentials"),
        ("https:///plugin", "needs a host"),
        ("s3://bucket/plugin", "https:// or file://"),
        ("https://example.com/a b", "whitespace"),
        ("https://example.com:port/x", "invalid URL"),
    ],
)
def test_bad_locations_are_denied(location: str, expected: str) -> None:
    rm = rollout_manager(metric=[{"name": "a/b", "location": location, "sha256": GOOD_SHA}])
    errors = error_map(rm)
    assert list(errors) == ["spec.plugins.metric[0].location"]
    assert expected in errors["spec.plugins.metric[0].location"]


def test_http_is_allowed_only_with_the_flag() -> None:
    rm = rollout_manager(metric=[{"name": "a/b", "location": "http://example.com/p"}])
    assert error_map(rm, allow_http_plugins=True) == {}
    assert "spec.plugins.metric[0].location" in error_map(rm)


@pytest.mark.parametrize("location", ["https://example.com/p", "HTTPS://example.com/p"])
def test_remote_location_without_sha256_warns(location: str) -> None:
    rm = rollout_manager(metric=[{"name": "a/b", "location": location}])
    findings = schemas.check(rm)
    assert schemas.errors(findings) == []
    assert [f.field for f in schemas.warnings(findings)] == ["spec.plugins.metric[0].sha256"]


def test_plugin_name_without_namespace_is_denied() -> None:
    rm = rollout_manager(traffic=[{"name": "gatewayAPI", "location": "file:///plugins/gw"}])
    errors = error_map(rm)
    assert list(errors) == ["spec.plugins.trafficManagement[0].name"]
    assert "<namespace>/<name>" in errors["spec.plugins.trafficManagement[0].name"]


@pytest.mark.parametrize("name", ["org/.", "org/..", "org/a/b", "org/", "/x", "o rg/x"])
def test_plugin_names_that_would_break_plugin_bin_are_denied(name: str) -> None:
    rm = rollout_manager(metric=[{"name": name, "location": "file:///p"}])
    assert list(error_map(rm)) == ["spec.plugins.metric[0].name"]


def test_duplicate_plugin_names_later_entry_carries_the_error() -> None:
    rm = rollout_manager(
        metric=[
            {"name": "a/x", "location": "file:///1"},
            {"name": "a/x", "location": "file:///2"},
        ]
    )
    assert list(error_map(rm)) == ["spec.plugins.metric[1].name"]


def test_same_name_in_both_lists_is_reported_on_the_metric_entry() -> None:
    rm = rollout_manager(
        traffic=[{"name": "a/x", "location": "file:///1"}],
        metric=[{"name": "a/x", "location": "file:///2"}],
    )
    findings = schemas.errors(schemas.check(rm))
    assert [f.field for f in findings] == ["spec.plugins.metric[0].name"]
    # Ratcheting compares both lists: the conflict involves both.
    assert findings[0].compare_paths == (
        ("spec", "plugins", "trafficManagement"),
        ("spec", "plugins", "metric"),
    )


def test_arg_value_that_yaml_made_an_int_says_quote_it() -> None:
    errors = error_map(stage(args=[{"name": "port", "value": 8080}]))
    assert errors == {
        "spec.analysis.args[0].value": (
            'must be a string; YAML reads 8080 as an integer, so quote it: "8080"'
        )
    }


def test_unknown_field_gets_did_you_mean() -> None:
    obj = stage()
    obj["spec"]["analysis"]["templates"] = [{"templateNme": "success-rate"}]
    assert error_map(obj) == {
        "spec.analysis.templates[0].templateNme": (
            'unknown field "templateNme"; did you mean "templateName"?'
        )
    }


def test_duplicates_are_reported_on_the_later_entry() -> None:
    obj = stage(args=[{"name": "a", "value": "1"}, {"name": "a", "value": "2"}])
    obj["spec"]["analysis"]["templates"] = [
        {"templateName": "x"},
        {"templateName": "y"},
        {"templateName": "x", "clusterScope": False},
    ]
    assert sorted(error_map(obj)) == ["spec.analysis.args[1].name", "spec.analysis.templates[2]"]


def test_every_reserved_label_key_is_denied() -> None:
    labels = {key: "x" for key in constants.RESERVED_LABEL_KEYS} | {"rollgate.dev/other": "x"}
    errors = error_map(stage(analysisRunMetadata={"labels": labels}))
    assert sorted(errors) == sorted(
        f"spec.analysis.analysisRunMetadata.labels[{key}]" for key in labels
    )


def test_label_key_path_uses_kubernetes_brackets() -> None:
    errors = error_map(stage(analysisRunMetadata={"labels": {"rollgate.dev/attempt": "1"}}))
    assert list(errors) == ["spec.analysis.analysisRunMetadata.labels[rollgate.dev/attempt]"]


def test_every_error_at_once() -> None:
    obj = objects.stage(freight=False, spec={
        "analysis": {"templates": [], "args": [{"name": "a"}]},
        "verification": {"analysisTemplates": [{"name": "Bad"}]},
    })
    assert sorted(error_map(obj)) == [
        "spec.analysis.args[0]",
        "spec.analysis.templates",
        "spec.verification",
        "spec.verification.analysisTemplates[0].name",
    ]


def test_check_stage_and_check_rollout_manager_are_the_same_as_check() -> None:
    obj = stage(args=[{"name": "port", "value": 1}])
    assert schemas.check_stage(obj) == schemas.check(obj)
    rm = rollout_manager(metric=[{"name": "x", "location": "ftp://x"}])
    assert schemas.check_rollout_manager(rm) == schemas.check(rm)


def test_lookup_failure_drops_only_cross_object_warnings() -> None:
    def unavailable(kind: str, namespace: str, name: str) -> None:
        raise schemas.LookupUnavailable("timeout")

    obj = stage(analysisRunMetadata={"annotations": {"rollgate.dev/freight": "x"}})
    findings = schemas.check(obj, template_lookup=unavailable)
    assert [f.field for f in findings] == [
        "spec.analysis.analysisRunMetadata.annotations[rollgate.dev/freight]"
    ]


def test_lookup_is_called_with_kind_namespace_name() -> None:
    calls: list[tuple[str, str, str]] = []

    def lookup(kind: str, namespace: str, name: str) -> dict[str, Any]:
        calls.append((kind, namespace, name))
        return {"spec": {}}

    obj = stage()
    obj["spec"]["analysis"]["templates"].append({"templateName": "global", "clusterScope": True})
    assert schemas.check(obj, template_lookup=lookup) == []
    assert calls == [
        ("AnalysisTemplate", "demo", "success-rate"),
        ("ClusterAnalysisTemplate", "", "global"),
    ]


def test_other_exceptions_from_lookups_are_not_swallowed() -> None:
    def broken(kind: str, namespace: str, name: str) -> None:
        raise RuntimeError("bug in the caller")

    with pytest.raises(RuntimeError):
        schemas.check(stage(), template_lookup=broken)


def test_huge_values_give_short_messages() -> None:
    obj = stage(args=[{"name": "a" * 1_000_000, "value": "x"}])
    obj["spec"]["analysis"]["templates"] = [{"templateName": "A" * 1_000_000}]
    obj["spec"]["analysis"]["x" * 100_000] = 1
    findings = schemas.check(obj)
    assert findings
    assert all(len(f.message) < 400 for f in findings)



def _annotation_errors(annotations: dict[str, str]) -> list[str]:
    found = schemas.check(stage(analysisRunMetadata={"annotations": annotations}))
    return [f.field for f in schemas.errors(found)]


def test_annotation_size_counts_utf8_bytes_and_leaves_room_for_rollgate() -> None:
    from schemas.names import ANNOTATIONS_TOTAL_MAX, K8S_ANNOTATIONS_TOTAL_MAX

    assert ANNOTATIONS_TOTAL_MAX < K8S_ANNOTATIONS_TOTAL_MAX
    room = ANNOTATIONS_TOTAL_MAX - len("example.com/a")
    assert _annotation_errors({"example.com/a": "x" * room}) == []
    assert _annotation_errors({"example.com/a": "x" * (room + 1)}) == [
        "spec.analysis.analysisRunMetadata.annotations"]
    # "é" is one character but two bytes: half as many fit.
    assert _annotation_errors({"example.com/a": "é" * (room // 2 + 1)}) == [
        "spec.analysis.analysisRunMetadata.annotations"]
    # 256 KiB - 16 bytes of ASCII still fit in Kubernetes, not with rollgate's own ones
    assert _annotation_errors({"example.com/a": "x" * (K8S_ANNOTATIONS_TOTAL_MAX - 16 - 13)})


@pytest.mark.parametrize("field", ["args", "labels"])
def test_more_than_a_thousand_entries_are_refused_without_checking_each(field) -> None:
    from schemas.limits import MAX_ENTRIES

    if field == "args":
        obj = stage(args=[{"name": "a"} for _ in range(MAX_ENTRIES + 1)])
        path = "spec.analysis.args"
    else:
        obj = stage(analysisRunMetadata={"labels": {f"bad key {i}": "x"
                                                    for i in range(MAX_ENTRIES + 1)}})
        path = "spec.analysis.analysisRunMetadata.labels"
    [finding] = schemas.check(obj)
    assert finding.field == path
    assert f"at most {MAX_ENTRIES}" in finding.message
    # at the limit, every entry is still checked
    if field == "args":
        obj = stage(args=[{"name": "a"} for _ in range(MAX_ENTRIES)])
        assert len(schemas.errors(schemas.check(obj))) == 2 * MAX_ENTRIES - 1


def test_more_than_a_thousand_plugins_are_refused_without_checking_each() -> None:
    from schemas.limits import MAX_ENTRIES

    obj = rollout_manager(metric=[{"name": "x"} for _ in range(MAX_ENTRIES + 1)])
    assert [f.field for f in schemas.check(obj)] == ["spec.plugins.metric"]
