"""Hostile input: any JSON value anywhere gives findings (or none), never an exception."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schemas

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.sampled_from(["", "a/b", "https://x/y", "file:///p", "rollgate.dev/attempt", "A" * 300]),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(
        st.sampled_from(
            [
                "templates",
                "analysisTemplates",
                "templateName",
                "clusterScope",
                "name",
                "kind",
                "args",
                "value",
                "valueFrom",
                "secretKeyRef",
                "key",
                "analysisRunMetadata",
                "labels",
                "annotations",
                "trafficManagement",
                "metric",
                "location",
                "sha256",
                # Near misses exercise the did-you-mean and "misspelt required" paths.
                "nme",
                "templateNme",
                "url",
                "sha",
                "secretRef",
                "arguments",
            ]
        )
        | st.text(max_size=10),
        children,
        max_size=5,
    ),
    max_leaves=30,
)


def _template_lookup(kind: str, namespace: str, name: str) -> Any:
    # Garbage templates too: the cross-object walk must survive them.
    return {"spec": {"templates": [{"templateName": name}], "metrics": name, "args": [name]}}


def _every_entry_point(obj: Any, old: Any) -> None:
    findings = schemas.check(
        obj, template_lookup=_template_lookup, rollout_managers=lambda namespace: [obj]
    )
    for finding in findings:
        assert isinstance(finding.field, str)
        assert finding.message
    schemas.ratchet(findings, obj=obj, old_obj=old)
    schemas.default_patch(obj)
    schemas.normalize_plugins(obj)
    schemas.normalize_analysis(obj)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(stanza=json_values, other=json_values, old=json_values)
def test_random_json_in_the_stage_stanza_never_raises(stanza: Any, other: Any, old: Any) -> None:
    for spelling in ("analysis", "verification"):
        stage = {
            "kind": "Stage",
            "metadata": {"name": "s", "namespace": "demo"},
            "spec": {spelling: stanza, "analysis" if spelling == "verification" else "x": other},
        }
        _every_entry_point(stage, {"kind": "Stage", "spec": {spelling: old}})


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(plugins=json_values, spec=json_values)
def test_random_json_in_the_plugins_block_never_raises(plugins: Any, spec: Any) -> None:
    rm = {
        "kind": "RolloutManager",
        "metadata": {"name": "r", "namespace": "n"},
        "spec": {"plugins": plugins},
    }
    _every_entry_point(rm, {"kind": "RolloutManager", "spec": spec})
    _every_entry_point({"kind": "RolloutManager", "spec": spec}, rm)


@settings(max_examples=200, deadline=None)
@given(obj=json_values)
def test_random_json_as_the_whole_object_never_raises(obj: Any) -> None:
    for kind in ("Stage", "RolloutManager"):
        if isinstance(obj, dict):
            obj = {**obj, "kind": kind}
        _every_entry_point(obj, obj)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(template=json_values, args=json_values)
def test_random_templates_from_the_lookup_never_raise(template: Any, args: Any) -> None:
    # A valid stanza reaches the cross-object walk, which then meets arbitrary JSON.
    stage = {
        "kind": "Stage",
        "metadata": {"name": "s", "namespace": "demo"},
        "spec": {
            "analysis": {
                "templates": [{"templateName": "a"}, {"templateName": "b", "clusterScope": True}],
                "args": [{"name": "x", "value": "1"}],
            }
        },
    }
    answers = {"a": template, "b": {"spec": {"templates": template, "args": args}}}

    def lookup(kind: str, namespace: str, name: str) -> Any:
        return answers.get(name, template)

    for finding in schemas.check(stage, template_lookup=lookup):
        assert finding.warning
