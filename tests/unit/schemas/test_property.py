"""Hostile input: any JSON value anywhere gives findings (or none), never an exception."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schemas
from testkit import objects

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
        stage = objects.stage("s", namespace="demo", freight=False, spec={
            spelling: stanza, "analysis" if spelling == "verification" else "x": other})
        # The old object is a bare kind and random JSON: by hand, not testkit.objects.
        _every_entry_point(stage, {"kind": "Stage", "spec": {spelling: old}})


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(plugins=json_values, spec=json_values)
def test_random_json_in_the_plugins_block_never_raises(plugins: Any, spec: Any) -> None:
    rm = objects.rollout_manager("r", namespace="n", spec={"plugins": plugins})
    # A bare kind with a random spec: by hand, not testkit.objects.
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
    stage = objects.stage("s", namespace="demo", freight=False, spec={"analysis": {
        "templates": [{"templateName": "a"}, {"templateName": "b", "clusterScope": True}],
        "args": [{"name": "x", "value": "1"}],
    }})
    answers = {"a": template, "b": {"spec": {"templates": template, "args": args}}}

    def lookup(kind: str, namespace: str, name: str) -> Any:
        return answers.get(name, template)

    for finding in schemas.check(stage, template_lookup=lookup):
        assert finding.warning


_names = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)
# Mostly valid spec.analysis stanzas (so that the rewrite itself is exercised), with text
# values that YAML has to quote, break or escape.
valid_analysis = st.fixed_dictionaries(
    {"templates": st.lists(st.fixed_dictionaries(
        {"templateName": _names}, optional={"clusterScope": st.none() | st.booleans()}),
        min_size=1, max_size=3)},
    optional={
        "args": st.none() | st.lists(st.fixed_dictionaries(
            {"name": _names, "value": st.text(max_size=12)}), max_size=3),
        "analysisRunMetadata": st.none() | st.fixed_dictionaries({}, optional={
            "labels": st.dictionaries(_names, _names, max_size=2),
            "annotations": st.dictionaries(_names, st.text(max_size=12), max_size=2)}),
    },
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(stanza=valid_analysis | json_values, flow=st.booleans())
def test_migrate_never_raises_and_what_it_writes_validates(stanza: Any, flow: bool) -> None:
    # Any spec.analysis, written as YAML either way: refused with findings, or rewritten
    # into a file whose Stage has the same stanza as spec.verification and nothing else
    # changed.
    import yaml

    from schemas.cli.manifests import Source, Unreadable, parse
    from schemas.cli.migrate import migrate_source

    stage = objects.stage("s", freight=False, spec={"requestedFreight": [], "analysis": stanza})
    text = yaml.safe_dump(stage, default_flow_style=flow, allow_unicode=True)
    try:
        documents = parse(text)
    except Unreadable:  # text PyYAML itself cannot read back: not migrate's concern
        return
    outcome = migrate_source(Source("s.yaml", text, documents))
    for _, finding in outcome.refused:
        assert finding.path[:2] == ("spec", "analysis") and finding.message
    if outcome.refused or not outcome.migrated:
        assert outcome.text == text
        return
    [written] = [d.data for d in parse(outcome.text)]
    assert isinstance(written, dict)
    assert "analysis" not in written["spec"]
    assert schemas.errors(schemas.check(written)) == []
    before = schemas.normalize_analysis(documents[0].data)
    after = schemas.normalize_analysis(written)
    if before is None:  # spec.analysis: null, removed
        assert after is None
    else:
        assert after is not None
        assert {**after, "spelling": "analysis"} == before
    assert written["metadata"] == stage["metadata"]
    assert written["spec"]["requestedFreight"] == []
