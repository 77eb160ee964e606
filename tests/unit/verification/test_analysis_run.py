"""build_analysis_run: the AnalysisRun a Stage's verification creates (docs/verification.md, "Engine
mode", *The run*)."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from reconciler.verification.analysis_run import (
    AnalysisBuildError,
    TemplateNotFound,
    build_analysis_run,
)
from reconciler.verification.naming import freight_collection_id, label_value, run_labels, run_name
from schemas.constants import LABEL_FREIGHT_COLLECTION, LABEL_STAGE
from schemas.kinds import API_VERSION_ARGO, API_VERSION_KARGO
from schemas.names import label_value_problem
from testkit import objects
from testkit.objects import k8s_object

NS = "shop"
FREIGHT = ["f-b", "f-a"]
COLLECTION = hashlib.sha1(b"f-a,f-b").hexdigest()  # Kargo: sorted names joined by ","


def stage(*templates, args=None, metadata=None, name="prod", spelling="analysis"):
    stanza = objects.analysis if spelling == "analysis" else objects.verification
    return objects.stage(name, namespace=NS, uid="uid-1", freight=False, spec={
        spelling: stanza(*templates, args=args, run_metadata=metadata)})


def metric(name, **extra):
    return {"name": name, "provider": {"job": {"spec": {}}}, **extra}


def tmpl(name, *, metrics=(), args=None, cluster=False, nested=None, **spec_extra):
    if args is not None:
        spec_extra["args"] = args
    if nested is not None:
        spec_extra["templates"] = [
            {"templateName": n} if isinstance(n, str) else {"templateName": n[0],
                                                             "clusterScope": True}
            for n in nested]
    return objects.analysis_template(
        name, namespace=NS, cluster=cluster,
        metrics=[metric(m) if isinstance(m, str) else m for m in metrics], **spec_extra)


class Templates:
    def __init__(self, *templates):
        self.by_key = {}
        for t in templates:
            ns = t["metadata"].get("namespace", "")
            self.by_key[(t["kind"], ns, t["metadata"]["name"])] = t
        self.calls = []

    def __call__(self, kind, namespace, name):
        self.calls.append((kind, namespace, name))
        return self.by_key.get((kind, namespace, name))


def build(st, *templates, freight=FREIGHT, attempt=1):
    return build_analysis_run(st, Templates(*templates), freight=freight, attempt=attempt)


def metric_names(run):
    return [m["name"] for m in run["spec"]["metrics"]]


# ------------------------------------------------------------ one and several templates


def test_one_template_gives_its_metrics_and_the_run_identity():
    run = build(stage("rate"), tmpl("rate", metrics=["success"]))
    assert run["apiVersion"] == API_VERSION_ARGO
    assert run["kind"] == "AnalysisRun"
    assert run["metadata"]["name"] == f"prod.{COLLECTION[:7]}.1"
    assert run["metadata"]["namespace"] == NS
    assert run["spec"] == {"metrics": [metric("success")]}


def test_several_templates_concatenate_metrics_in_reference_order():
    run = build(stage("a", "b"), tmpl("b", metrics=["b1"]), tmpl("a", metrics=["a1", "a2"]))
    assert metric_names(run) == ["a1", "a2", "b1"]


def test_verification_spelling_builds_the_same_run():
    templates = (tmpl("a", metrics=["m"], args=[{"name": "x"}]),)
    args = [{"name": "x", "value": "1"}]
    one = build(stage("a", args=args), *templates)
    other = build(stage("a", args=args, spelling="verification"), *templates)
    assert one == other


def test_cluster_template_is_looked_up_without_namespace():
    lookup = Templates(tmpl("global", metrics=["g"], cluster=True))
    run = build_analysis_run(stage(("global",)), lookup, freight=FREIGHT)
    assert lookup.calls == [("ClusterAnalysisTemplate", "", "global")]
    assert metric_names(run) == ["g"]


def test_namespaced_templates_come_before_cluster_templates():
    run = build(stage(("c",), "n"), tmpl("c", metrics=["c1"], cluster=True),
                tmpl("n", metrics=["n1"]))
    assert metric_names(run) == ["n1", "c1"]


def test_same_name_namespaced_and_cluster_are_different_templates():
    run = build(stage("t", ("t",)), tmpl("t", metrics=["ns"]),
                tmpl("t", metrics=["cl"], cluster=True))
    assert metric_names(run) == ["ns", "cl"]


# ------------------------------------------------------------ nested references


def test_nested_template_comes_after_the_template_that_nests_it():
    run = build(stage("parent", "other"),
                tmpl("parent", metrics=["p"], nested=["child"]),
                tmpl("child", metrics=["c"]), tmpl("other", metrics=["o"]))
    assert metric_names(run) == ["p", "c", "o"]


def test_nested_reference_resolves_in_the_stage_namespace():
    lookup = Templates(tmpl("parent", metrics=["p"], nested=["child"]),
                       tmpl("child", metrics=["c"]))
    build_analysis_run(stage("parent"), lookup, freight=FREIGHT)
    assert ("AnalysisTemplate", NS, "child") in lookup.calls


def test_nested_cluster_reference():
    run = build(stage("parent"), tmpl("parent", metrics=["p"], nested=[("shared",)]),
                tmpl("shared", metrics=["s"], cluster=True))
    assert metric_names(run) == ["p", "s"]


def test_diamond_visits_the_shared_template_once():
    lookup = Templates(
        tmpl("top", nested=["left", "right"]), tmpl("left", metrics=["l"], nested=["base"]),
        tmpl("right", metrics=["r"], nested=["base"]), tmpl("base", metrics=["b"]),
    )
    run = build_analysis_run(stage("top"), lookup, freight=FREIGHT)
    assert metric_names(run) == ["l", "b", "r"]
    assert lookup.calls.count(("AnalysisTemplate", NS, "base")) == 1


def test_template_referenced_by_stage_and_nested_is_used_once():
    run = build(stage("a", "b"), tmpl("a", metrics=["a"], nested=["b"]),
                tmpl("b", metrics=["b"]))
    assert metric_names(run) == ["a", "b"]


def test_cycle_is_an_error_naming_the_cycle():
    with pytest.raises(AnalysisBuildError, match="cycle") as err:
        build(stage("a"), tmpl("a", nested=["b"]), tmpl("b", nested=["a"]))
    assert "AnalysisTemplate shop/a -> AnalysisTemplate shop/b -> AnalysisTemplate shop/a" in (
        str(err.value))


def test_self_reference_is_a_cycle():
    with pytest.raises(AnalysisBuildError, match="cycle"):
        build(stage("a"), tmpl("a", metrics=["m"], nested=["a"]))


def test_nested_templates_field_is_not_copied_into_the_run():
    run = build(stage("a"), tmpl("a", metrics=["m"], nested=["b"]), tmpl("b", metrics=["n"]))
    assert "templates" not in run["spec"]


# ------------------------------------------------------------ missing templates


def test_missing_template_raises_template_not_found_naming_it():
    with pytest.raises(TemplateNotFound) as err:
        build(stage("nope"))
    assert isinstance(err.value, AnalysisBuildError)
    assert (err.value.kind, err.value.namespace, err.value.name) == (
        "AnalysisTemplate", NS, "nope")
    assert "spec.analysis.templates of the Stage" in str(err.value)


def test_missing_nested_template_names_the_template_that_references_it():
    with pytest.raises(TemplateNotFound, match=r"referenced by spec\.templates of "
                                              r"AnalysisTemplate shop/a"):
        build(stage("a"), tmpl("a", nested=["gone"]))


def test_lookup_errors_pass_through_unchanged():
    class Boom(Exception):
        pass

    def lookup(kind, namespace, name):
        raise Boom("api down")

    with pytest.raises(Boom):
        build_analysis_run(stage("a"), lookup, freight=FREIGHT)


# ------------------------------------------------------------ duplicates across templates


def test_duplicate_metric_name_names_both_templates():
    with pytest.raises(AnalysisBuildError) as err:
        build(stage("a", ("b",)), tmpl("a", metrics=["rate"]),
              tmpl("b", metrics=["rate"], cluster=True))
    msg = str(err.value)
    assert "'rate'" in msg and "AnalysisTemplate shop/a" in msg
    assert "ClusterAnalysisTemplate 'b'" in msg


def test_duplicate_dry_run_metric_name_is_an_error():
    with pytest.raises(AnalysisBuildError, match="dryRun: metricName 'm'"):
        build(stage("a", "b"), tmpl("a", metrics=["m"], dryRun=[{"metricName": "m"}]),
              tmpl("b", metrics=["n"], dryRun=[{"metricName": "m"}]))


def test_duplicate_measurement_retention_metric_name_is_an_error():
    with pytest.raises(AnalysisBuildError, match="measurementRetention: metricName 'm'"):
        build(stage("a", "b"),
              tmpl("a", metrics=["m"], measurementRetention=[{"metricName": "m", "limit": 5}]),
              tmpl("b", metrics=["n"], measurementRetention=[{"metricName": "m", "limit": 9}]))


def test_dry_run_and_measurement_retention_are_concatenated():
    run = build(stage("a", "b"),
                tmpl("a", metrics=["m"], dryRun=[{"metricName": "m"}],
                     measurementRetention=[{"metricName": "m", "limit": 5}]),
                tmpl("b", metrics=["n"], dryRun=[{"metricName": "n"}]))
    assert run["spec"]["dryRun"] == [{"metricName": "m"}, {"metricName": "n"}]
    assert run["spec"]["measurementRetention"] == [{"metricName": "m", "limit": 5}]


def test_no_dry_run_key_when_no_template_has_one():
    run = build(stage("a"), tmpl("a", metrics=["m"]))
    assert "dryRun" not in run["spec"] and "measurementRetention" not in run["spec"]


# ------------------------------------------------------------ args


def test_template_args_with_defaults_are_used():
    run = build(stage("a"), tmpl("a", metrics=["m"], args=[{"name": "x", "value": "1"}]))
    assert run["spec"]["args"] == [{"name": "x", "value": "1"}]


def test_same_arg_same_default_in_two_templates_merges():
    run = build(stage("a", "b"), tmpl("a", metrics=["m"], args=[{"name": "x", "value": "1"}]),
                tmpl("b", metrics=["n"], args=[{"name": "x", "value": "1"}]))
    assert run["spec"]["args"] == [{"name": "x", "value": "1"}]


def test_conflicting_template_args_are_an_error_naming_both():
    with pytest.raises(AnalysisBuildError, match="conflicting values") as err:
        build(stage("a", "b"), tmpl("a", metrics=["m"], args=[{"name": "x", "value": "1"}]),
              tmpl("b", metrics=["n"], args=[{"name": "x", "value": "2"}]))
    assert "shop/a" in str(err.value) and "shop/b" in str(err.value)


def test_a_declaration_without_default_takes_another_templates_default():
    run = build(stage("a", "b"), tmpl("a", metrics=["m"], args=[{"name": "x"}]),
                tmpl("b", metrics=["n"], args=[{"name": "x", "value": "2"}]))
    assert run["spec"]["args"] == [{"name": "x", "value": "2"}]


def test_stage_value_overrides_template_default():
    run = build(stage("a", args=[{"name": "x", "value": "stage"}]),
                tmpl("a", metrics=["m"], args=[{"name": "x", "value": "tmpl"}]))
    assert run["spec"]["args"] == [{"name": "x", "value": "stage"}]


def test_stage_value_from_replaces_template_value():
    ref = {"secretKeyRef": {"name": "s", "key": "k"}}
    run = build(stage("a", args=[{"name": "x", "valueFrom": ref}]),
                tmpl("a", metrics=["m"], args=[{"name": "x", "value": "tmpl"}]))
    assert run["spec"]["args"] == [{"name": "x", "valueFrom": ref}]


def test_stage_value_replaces_template_value_from():
    tref = {"fieldRef": {"fieldPath": "metadata.labels['x']"}}
    run = build(stage("a", args=[{"name": "x", "value": "v"}]),
                tmpl("a", metrics=["m"], args=[{"name": "x", "valueFrom": tref}]))
    assert run["spec"]["args"] == [{"name": "x", "value": "v"}]


def test_undeclared_stage_args_are_passed_through_after_declared_ones():
    run = build(stage("a", args=[{"name": "extra", "value": "e"}, {"name": "x", "value": "1"}]),
                tmpl("a", metrics=["m"], args=[{"name": "x"}]))
    assert run["spec"]["args"] == [{"name": "x", "value": "1"}, {"name": "extra", "value": "e"}]


def test_unresolved_arg_names_the_arg_and_where_to_set_it():
    with pytest.raises(AnalysisBuildError) as err:
        build(stage("a"), tmpl("a", metrics=["m"], args=[{"name": "service-name"}]))
    msg = str(err.value)
    assert "'service-name'" in msg and "spec.analysis.args" in msg and "shop/a" in msg


def test_unresolved_arg_uses_the_verification_path_for_that_spelling():
    with pytest.raises(AnalysisBuildError, match=r"spec\.verification\.args"):
        build(stage("a", spelling="verification"),
              tmpl("a", metrics=["m"], args=[{"name": "x"}]))


def test_no_args_key_when_nothing_declares_or_sets_args():
    assert "args" not in build(stage("a"), tmpl("a", metrics=["m"]))["spec"]


# ------------------------------------------------------------ other fields


ODD_PROVIDERS = [
    {"plugin": {"acme/future": {
        "query": "rate(x[5m])", "nested": [1, 2.5, None, True, {"é": "ü"}]}}},
    # Keys deliberately out of sorted order, so a reordering copy would show.
    {"zeta": [[[]], [{}], [[1, [2, [3, [4]]]]]], "alpha": {"z": 0, "a": -0.0, "m": [False]},
     "big": 2**70, "tiny": 1e-300, "huge": 1.7976931348623157e308, "neg": -12,
     "empty": "", "unicode": "\u2603 \U0001f680 \x00", "list-provider": [None, "x", 3]},
]


@pytest.mark.parametrize("provider", ODD_PROVIDERS)
def test_unknown_metric_provider_is_preserved_exactly(provider):
    weird = {"name": "m", "provider": provider,
             "successCondition": "result[0] >= 0.95", "someNewField": {"b": [{}], "a": 1}}
    template = tmpl("a", metrics=[weird])
    run = build(stage("a"), template)
    # No sort_keys: the run must keep the template's key order too, byte for byte.
    assert json.dumps(run["spec"]["metrics"][0]) == json.dumps(weird)


def test_other_spec_fields_are_copied_as_they_are():
    run = build(stage("a"), tmpl("a", metrics=["m"], ttlStrategy={"secondsAfterCompletion": 60},
                                 futureField={"x": 1}))
    assert run["spec"]["ttlStrategy"] == {"secondsAfterCompletion": 60}
    assert run["spec"]["futureField"] == {"x": 1}


def test_same_other_field_with_same_value_in_two_templates_is_fine():
    run = build(stage("a", "b"), tmpl("a", metrics=["m"], ttlStrategy={"x": 1}),
                tmpl("b", metrics=["n"], ttlStrategy={"x": 1}))
    assert run["spec"]["ttlStrategy"] == {"x": 1}


def test_same_other_field_with_different_values_is_an_error():
    with pytest.raises(AnalysisBuildError, match=r"spec\.ttlStrategy differs"):
        build(stage("a", "b"), tmpl("a", metrics=["m"], ttlStrategy={"x": 1}),
              tmpl("b", metrics=["n"], ttlStrategy={"x": 2}))


def test_templates_are_not_modified():
    a = tmpl("a", metrics=["m"], args=[{"name": "x", "value": "1"}], dryRun=[{"metricName": "m"}])
    before = copy.deepcopy(a)
    run = build(stage("a", args=[{"name": "x", "value": "2"}]), a)
    run["spec"]["metrics"][0]["name"] = "changed"
    assert a == before


# ------------------------------------------------------------ metadata


def test_labels_annotations_and_owner_reference():
    run = build(stage("a", metadata={"labels": {"team": "shop"},
                                     "annotations": {"note": "hi"}}), tmpl("a", metrics=["m"]),
                attempt=3)
    meta = run["metadata"]
    assert meta["labels"] == {
        "team": "shop",
        LABEL_STAGE: "prod",
        LABEL_FREIGHT_COLLECTION: COLLECTION,
        "rollgate.dev/attempt": "3",
        "app.kubernetes.io/managed-by": "rollgate",
    }
    assert meta["annotations"] == {"note": "hi", "rollgate.dev/freight": "f-a,f-b"}
    assert meta["ownerReferences"] == [{
        "apiVersion": API_VERSION_KARGO, "kind": "Stage", "name": "prod",
        "uid": "uid-1", "controller": True, "blockOwnerDeletion": False,
    }]
    assert meta["name"].endswith(".3")
    assert run_labels("prod", COLLECTION, 3).items() <= meta["labels"].items()


def test_freight_collection_id_ignores_order():
    assert freight_collection_id(["b", "a"]) == freight_collection_id(["a", "b"]) == (
        hashlib.sha1(b"a,b").hexdigest())
    assert freight_collection_id(["one"]) == hashlib.sha1(b"one").hexdigest()


def test_same_inputs_same_run():
    a = build(stage("a"), tmpl("a", metrics=["m"]), freight=["x", "y"])
    b = build(stage("a"), tmpl("a", metrics=["m"]), freight=["y", "x"])
    assert a == b


def test_long_stage_name_is_shortened_with_a_hash_to_253():
    name = "s" * 250
    run = build(stage("a", name=name), tmpl("a", metrics=["m"]), attempt=12)
    run_name_ = run["metadata"]["name"]
    suffix = f".{COLLECTION[:7]}.12"
    assert len(run_name_) == 253
    assert run_name_.endswith("-" + hashlib.sha256(name.encode()).hexdigest()[:10] + suffix)
    assert run_name("s" * 200, COLLECTION, 1) == "s" * 200 + f".{COLLECTION[:7]}.1"


def test_name_at_the_limit_is_not_shortened():
    suffix = f".{COLLECTION[:7]}.1"
    name = "n" * (253 - len(suffix))
    assert run_name(name, COLLECTION, 1) == name + suffix


def test_long_stage_label_value_is_shortened_as_kargo_does_and_full_value_annotated():
    name = "stage-" + "x" * 70
    run = build(stage("a", name=name), tmpl("a", metrics=["m"]))
    label = run["metadata"]["labels"][LABEL_STAGE]
    assert len(label) == 63
    # Kargo's kubernetes.ShortenLabelValue: HashShorten(value, 63, "-", 8).
    assert label == name[:54] + "-" + hashlib.sha256(name.encode()).hexdigest()[:8]
    assert run["metadata"]["annotations"][LABEL_STAGE] == name
    assert label_value(name) == label


def test_short_label_values_get_no_annotation():
    run = build(stage("a"), tmpl("a", metrics=["m"]))
    assert LABEL_STAGE not in run["metadata"]["annotations"]


@pytest.mark.parametrize("tail", ["-", "--", "_", "."])
def test_label_shortening_trims_only_dashes_before_the_hash_as_kargo(tail):
    value = "a" * (54 - len(tail)) + tail + "b" * 20
    short = label_value(value)
    prefix = value[:54].rstrip("-")
    assert short == prefix + "-" + hashlib.sha256(value.encode()).hexdigest()[:8]
    assert label_value_problem(short) is None


def test_name_shortening_still_drops_separators_before_the_hash():
    # A DNS subdomain must not contain ".-", so names (unlike label values) are trimmed.
    stage_name = "a" * 230 + ".-" + "b" * 40
    name = run_name(stage_name, COLLECTION, 1)
    assert ".-" not in name and len(name) <= 253


# ------------------------------------------------------------ invalid input


def test_invalid_stanza_names_the_field():
    st = stage("a", args=[{"name": "port", "value": 8080}])
    with pytest.raises(AnalysisBuildError, match=r"spec\.analysis\.args\[0\]\.value"):
        build(st, tmpl("a", metrics=["m"]))


def test_stage_without_stanza_is_a_build_error():
    st = stage("a")
    st["spec"] = {}
    with pytest.raises(AnalysisBuildError, match=r"no spec\.analysis"):
        build(st)


def test_empty_freight_is_a_build_error():
    with pytest.raises(AnalysisBuildError, match="no freight"):
        build(stage("a"), tmpl("a", metrics=["m"]), freight=[])


def test_run_labels_are_exactly_the_built_runs_labels_even_when_shortened():
    # Adoption compares a run's labels with run_labels: they must never drift apart.
    name = "stage-" + "y" * 80
    run = build(stage("a", name=name), tmpl("a", metrics=["m"]), attempt=7)
    assert run_labels(name, COLLECTION, 7) == run["metadata"]["labels"]


# ------------------------------------------------------------ templates the merge cannot read


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ([], "AnalysisTemplate shop/a: spec must be an object"),
        ({"metrics": "m"}, "AnalysisTemplate shop/a: spec.metrics must be a list"),
        ({"metrics": [{"name": ["m"]}]},
         "AnalysisTemplate shop/a: spec.metrics[0] must be an object with a string name"),
        ({"metrics": [metric("m")], "args": [{"name": 8080}]},
         "AnalysisTemplate shop/a: spec.args[0] must be an object with a string name"),
        ({"metrics": [metric("m")], "dryRun": ["m"]},
         "AnalysisTemplate shop/a: spec.dryRun[0] must be an object with a string metricName"),
    ],
)
def test_a_template_the_merge_cannot_read_is_a_build_error_naming_it(spec, message):
    """A template stored under a looser CRD schema gives a verification Error naming the
    template and field, never an exception the controller would retry for ever."""
    bad = k8s_object("AnalysisTemplate", name="a", namespace=NS, spec=spec)
    with pytest.raises(AnalysisBuildError) as err:
        build(stage("a"), bad)
    assert str(err.value) == message


# ------------------------------------------------ Kargo expressions (engine mode)


def test_engine_mode_evaluates_kargo_expressions_in_args_as_kargo_would():
    st = stage("t", spelling="verification", args=[
        {"name": "host", "value": "${{ ctx.stage }}.${{ ctx.project }}.svc"},
        {"name": "url", "value": "${{ vars.base + '/' + ctx.stage }}"},
        {"name": "port", "value": "${{ quote(8080) }}"},
        {"name": "plain", "value": "a }} b"},
    ])
    st["spec"]["vars"] = [{"name": "base", "value": "https://${{ ctx.project }}.example"}]
    run = build(st, tmpl("t", metrics=["m"]))
    assert {a["name"]: a["value"] for a in run["spec"]["args"]} == {
        "host": "prod.shop.svc", "url": "https://shop.example/prod", "port": "8080",
        "plain": "a }} b"}


def test_an_expression_outside_the_subset_is_an_error_naming_the_arg_and_expression():
    st = stage("t", spelling="verification", args=[
        {"name": "tag", "value": "${{ imageFrom('ghcr.io/x').Tag }}"}])
    with pytest.raises(AnalysisBuildError) as err:
        build(st, tmpl("t", metrics=["m"]))
    message = str(err.value)
    assert "spec.verification.args[0] ('tag')" in message
    assert "${{ imageFrom('ghcr.io/x').Tag }}" in message
    assert "rollgate does not evaluate this expression" in message


def test_a_value_kargo_fails_on_is_an_error_not_a_pass_through():
    st = stage("t", spelling="verification", args=[{"name": "port", "value": "${{ 8080 }}"}])
    with pytest.raises(AnalysisBuildError, match="is not a string but float64"):
        build(st, tmpl("t", metrics=["m"]))
