"""The one template walk shared by the webhook's warnings and the run builder.

Both sides must reach the same verdict on the same templates: a Stage the webhook lets
through without a word must not crash the builder, and the reverse.
"""

from __future__ import annotations

from typing import Any

import pytest

import schemas
from reconciler.verification.analysis_run import (
    AnalysisBuildError,
    TemplateNotFound,
    build_analysis_run,
)
from schemas import references
from schemas.references import MAX_TEMPLATES
from testkit import objects
from testkit.objects import k8s_object

NS = "shop"
FREIGHT = ["f-a"]


def stage(*refs: str | tuple[str]) -> dict[str, Any]:
    return objects.stage(namespace=NS, uid="u", freight=False,
                         spec={"analysis": objects.analysis(*refs)})


def template(name: str, *, metrics: tuple[str, ...] = (), nested: tuple[str, ...] = (),
             cluster: bool = False) -> dict[str, Any]:
    extra = {"templates": [{"templateName": n} for n in nested]} if nested else {}
    return objects.analysis_template(
        name, namespace=NS, cluster=cluster,
        metrics=[{"name": m, "provider": {"job": {}}} for m in metrics], **extra)


class World:
    def __init__(self, *templates: dict[str, Any]) -> None:
        self.by_key = {
            (t["kind"], t["metadata"].get("namespace", ""), t["metadata"]["name"]): t
            for t in templates
        }
        self.calls: list[tuple[str, str, str]] = []

    def __call__(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls.append((kind, namespace, name))
        return self.by_key.get((kind, namespace, name))


def chain(length: int) -> World:
    """t0 -> t1 -> ... -> t(length-1), each with one metric."""
    return World(*(
        template(f"t{i}", metrics=(f"m{i}",), nested=(f"t{i + 1}",) if i + 1 < length else ())
        for i in range(length)
    ))


def webhook_warnings(st: dict[str, Any], world: World) -> list[str]:
    return [f.message for f in schemas.warnings(schemas.check(st, template_lookup=world))]


def test_a_1200_deep_chain_is_a_build_error_and_a_webhook_warning_not_a_crash() -> None:
    # Before the walks were merged the builder recursed and raised RecursionError (not an
    # AnalysisBuildError, so the controller retried it forever) while the webhook was silent.
    with pytest.raises(AnalysisBuildError, match=f"more than {MAX_TEMPLATES} templates"):
        build_analysis_run(stage("t0"), chain(1200), freight=FREIGHT)
    world = chain(1200)
    warnings = webhook_warnings(stage("t0"), world)
    assert len(warnings) == 1 and f"more than {MAX_TEMPLATES} templates" in warnings[0]
    # The bound also bounds the look-ups a single admission request makes.
    assert len(world.calls) == MAX_TEMPLATES


def test_a_chain_at_the_bound_builds_and_gets_no_warning() -> None:
    run = build_analysis_run(stage("t0"), chain(MAX_TEMPLATES), freight=FREIGHT)
    assert [m["name"] for m in run["spec"]["metrics"]] == [f"m{i}" for i in range(MAX_TEMPLATES)]
    assert webhook_warnings(stage("t0"), chain(MAX_TEMPLATES)) == []


def test_metric_collision_names_templates_in_build_order_on_both_sides() -> None:
    # The builder puts namespaced templates before cluster ones (docs/verification.md,
    # "Engine mode", *The run*), so the namespaced template is the "first" definition for
    # both sides.
    world = World(template("c", metrics=("m",), cluster=True), template("n", metrics=("m",)))
    with pytest.raises(AnalysisBuildError) as err:
        build_analysis_run(stage(("c",), "n"), world, freight=FREIGHT)
    assert str(err.value).index("shop/n") < str(err.value).index("'c'")
    (warning,) = webhook_warnings(stage(("c",), "n"), world)
    assert warning.index('"n"') < warning.index('"c"')


def test_cycle_and_missing_are_reported_by_both_sides() -> None:
    cycle = World(template("a", nested=("b",)), template("b", nested=("a",)))
    with pytest.raises(AnalysisBuildError, match="cycle"):
        build_analysis_run(stage("a"), cycle, freight=FREIGHT)
    assert any('cycle ("a" -> "b" -> "a")' in w for w in webhook_warnings(stage("a"), cycle))
    missing = World(template("a", nested=("gone",)))
    with pytest.raises(TemplateNotFound):
        build_analysis_run(stage("a"), missing, freight=FREIGHT)
    assert any("does not exist" in w for w in webhook_warnings(stage("a"), missing))


def test_builder_stops_looking_up_at_the_first_missing_template() -> None:
    # A missing template is final; a later look-up failing must not hide it.
    class Boom(Exception):
        pass

    def lookup(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if name == "second":
            raise Boom("api down")
        return None

    with pytest.raises(TemplateNotFound):
        build_analysis_run(stage("first", "second"), lookup, freight=FREIGHT)


def test_absent_kind_and_cluster_scope_build_what_the_explicit_defaults_build() -> None:
    # Nothing defaults them into the Stage any more: the builder must read absence as
    # Kargo does (an AnalysisTemplate in the Stage's namespace).
    world = World(template("local", metrics=("l",)), template("shared", metrics=("s",),
                                                              cluster=True))

    def verification(*refs: dict[str, Any]) -> dict[str, Any]:
        return k8s_object("Stage", name="prod", namespace=NS, uid="u",
                          spec={"verification": {"analysisTemplates": list(refs)}})

    def analysis(*refs: dict[str, Any]) -> dict[str, Any]:
        return k8s_object("Stage", name="prod", namespace=NS, uid="u",
                          spec={"analysis": {"templates": list(refs)}})

    shared = {"name": "shared", "kind": "ClusterAnalysisTemplate"}
    runs = [
        build_analysis_run(verification({"name": "local"}, shared), world, freight=FREIGHT),
        build_analysis_run(verification({"name": "local", "kind": "AnalysisTemplate"}, shared),
                           world, freight=FREIGHT),
        build_analysis_run(analysis({"templateName": "local"},
                                    {"templateName": "shared", "clusterScope": True}),
                           world, freight=FREIGHT),
        build_analysis_run(analysis({"templateName": "local", "clusterScope": False},
                                    {"templateName": "shared", "clusterScope": True}),
                           world, freight=FREIGHT),
    ]
    assert [m["name"] for m in runs[0]["spec"]["metrics"]] == ["l", "s"]
    assert all(run == runs[0] for run in runs[1:])
    assert ("AnalysisTemplate", NS, "local") in world.calls
    assert webhook_warnings(verification({"name": "local"}, shared), world) == []


# ------------------------------------------------------------- each template read once


def _with_arg(name: str, arg: str) -> dict[str, Any]:
    """A template declaring ``arg`` without a value (the Stage must set it: a warning)."""
    return objects.analysis_template(name, namespace=NS, args=[{"name": arg}],
                                     metrics=[{"name": "m", "provider": {"job": {}}}])


def test_the_same_template_object_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The webhook's look-ups answer every request with the same cached object."""
    read: list[str] = []
    entries = references._entries

    def counted(template: Any, field: str) -> list[Any]:
        read.append(field)
        return entries(template, field)

    monkeypatch.setattr(references, "_entries", counted)
    world = World(_with_arg("a", "service"))
    first = webhook_warnings(stage("a"), world)
    assert sorted(read) == ["args", "metrics", "templates"]
    assert webhook_warnings(stage("a"), world) == first
    assert len(read) == 3, "the second review read the template again"
    assert any('declares arg "service" without a value' in w for w in first), first


def test_a_template_fetched_anew_is_read_anew() -> None:
    """A refresh brings a new object: its facts, not the old one's (the old object is
    held with its facts, so the new one cannot take its id)."""
    world = World(_with_arg("a", "service"))
    assert any('"service"' in w for w in webhook_warnings(stage("a"), world))
    key = next(iter(world.by_key))
    del world.by_key[key]
    world.by_key[key] = _with_arg("a", "region")
    warnings = webhook_warnings(stage("a"), world)
    assert any('"region"' in w for w in warnings), warnings
    assert not any('"service"' in w for w in warnings), warnings


def test_the_facts_kept_are_bounded() -> None:
    for i in range(references._MAX_FACTS + 10):
        webhook_warnings(stage(f"t{i}"), World(_with_arg(f"t{i}", "service")))
        assert len(references._FACTS) <= references._MAX_FACTS
