"""normalize_analysis / normalize_plugins: one shape whatever the spelling."""

from __future__ import annotations

import schemas
from schemas.normalize import PluginsSpec
from testkit import objects

ARGS = [{"name": "service", "value": "svc"}, {"name": "empty", "value": ""}]
METADATA = {"labels": {"team": "a"}, "annotations": {"example.com/x": "y"}}
EXPECTED_ARGS = ARGS


def test_both_spellings_normalize_to_the_same_shape() -> None:
    analysis = objects.stage(freight=False, spec={"analysis": {
        "templates": [
            {"templateName": "a"},  # no clusterScope: namespaced
            {"templateName": "b", "clusterScope": True},
            {"templateName": "c", "clusterScope": False},
        ],
        "args": ARGS,
        "analysisRunMetadata": METADATA,
    }})
    verification = objects.stage(freight=False, verification={
        "analysisTemplates": [
            {"name": "a"},  # no kind: an AnalysisTemplate, as in Kargo
            {"name": "b", "kind": "ClusterAnalysisTemplate"},
            {"name": "c", "kind": "AnalysisTemplate"},
        ],
        "args": ARGS,
        "analysisRunMetadata": METADATA,
    })
    one = schemas.normalize_analysis(analysis)
    two = schemas.normalize_analysis(verification)
    assert one is not None and two is not None
    assert one["spelling"] == "analysis"
    assert two["spelling"] == "verification"
    for spec in (one, two):
        assert spec["templates"] == [
            {"name": "a", "clusterScope": False},
            {"name": "b", "clusterScope": True},
            {"name": "c", "clusterScope": False},
        ]
        assert spec["args"] == EXPECTED_ARGS
        assert spec["analysisRunMetadata"] == METADATA


def test_analysis_value_from_is_kept() -> None:
    # Only spec.analysis has valueFrom (Kargo's spec.verification args are strings).
    spec = schemas.normalize_analysis({"spec": {"analysis": {
        "templates": [{"templateName": "a"}],
        "args": [
            {"name": "token", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
            {"name": "explicit-null", "value": None,
             "valueFrom": {"secretKeyRef": {"name": "s", "key": "j"}}},
        ],
    }}})
    assert spec is not None
    assert spec["args"] == [
        {"name": "token", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        {"name": "explicit-null", "valueFrom": {"secretKeyRef": {"name": "s", "key": "j"}}},
    ]


def test_no_stanza_is_none() -> None:
    assert schemas.normalize_analysis(objects.stage(freight=False)) is None
    assert schemas.normalize_analysis(objects.stage(freight=False, spec={"analysis": None})) is None
    # A bare kind, no spec: malformed on purpose, so not built with testkit.objects.
    assert schemas.normalize_analysis({"kind": "Stage"}) is None


def test_absent_optional_parts_are_empty() -> None:
    spec = schemas.normalize_analysis(
        {"spec": {"analysis": {"templates": [{"templateName": "a"}], "args": None}}}
    )
    assert spec == {
        "spelling": "analysis",
        "templates": [{"name": "a", "clusterScope": False}],
        "args": [],
        "analysisRunMetadata": {"labels": {}, "annotations": {}},
    }


def test_normalized_metadata_is_a_copy() -> None:
    labels = {"team": "a"}
    stage = {"spec": {"analysis": {"templates": [], "analysisRunMetadata": {"labels": labels}}}}
    spec = schemas.normalize_analysis(stage)
    assert spec is not None
    spec["analysisRunMetadata"]["labels"]["x"] = "y"
    assert labels == {"team": "a"}


def test_normalize_plugins() -> None:
    rm = objects.rollout_manager(
        traffic=[{"name": "a/x", "location": "https://e.com/x", "sha256": " AB" + "0" * 62}],
        metric=[
            {"name": "a/y", "location": "file:///y", "sha256": "  "},
            {"name": "a/z", "location": "file:///z", "sha256": None},
        ])
    assert schemas.normalize_plugins(rm) == {
        "trafficManagement": [
            {"name": "a/x", "location": "https://e.com/x", "sha256": "ab" + "0" * 62}
        ],
        "metric": [
            {"name": "a/y", "location": "file:///y"},
            {"name": "a/z", "location": "file:///z"},
        ],
    }


def test_normalize_plugins_null_and_absent_lists() -> None:
    empty: PluginsSpec = {"trafficManagement": [], "metric": []}
    assert schemas.normalize_plugins({"spec": {}}) == empty
    assert schemas.normalize_plugins({"spec": {"plugins": None}}) == empty
    assert schemas.normalize_plugins({"spec": {"plugins": {"metric": None}}}) == empty
