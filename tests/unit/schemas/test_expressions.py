"""Kargo expressions in verification args (docs/verification.md, "Kargo expressions in verification
args"): the verdicts of tests/unit/schemas/expressions-corpus.yaml, which
tests/e2e/verification/test_expressions_oracle.py proves against expr-lang itself, and the findings
on a Stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

import schemas
from schemas.expressions import check_value
from schemas.expressions.evaluate import (
    EvaluationFailed,
    NotEvaluated,
    arg_value,
    build_environment,
)
from testkit import objects

CORPUS = yaml.safe_load((Path(__file__).parent / "expressions-corpus.yaml").read_text())
VARS = [(v["name"], v["value"]) for v in CORPUS["vars"]]
ENV = build_environment(project="demo", stage="uat", stage_vars=VARS)


def test_the_corpus_covers_the_cases_the_readme_names() -> None:
    cases = CORPUS["cases"]
    assert len(cases) >= 60
    assert sum(c["deny"] for c in cases) >= 20
    assert sum(isinstance(c.get("engine"), dict) for c in cases) >= 15
    assert len({c["template"] for c in cases}) == len(cases)


@pytest.mark.parametrize("case", CORPUS["cases"], ids=lambda c: c["template"][:40])
def test_corpus_verdict(case: dict[str, Any]) -> None:
    verdict = check_value(case["template"], var_names=frozenset(n for n, _ in VARS))
    assert (verdict.error is not None) == case["deny"], verdict
    if case["deny"]:
        return
    expected = case["engine"]
    try:
        got: Any = {"value": arg_value("a", case["template"], ENV)}
    except NotEvaluated:
        got = "not-evaluated"
    except EvaluationFailed:
        got = "error"
    assert got == expected


def _stage(*values: str, stage_vars: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return objects.stage("uat", namespace="demo", warehouse="w", spec={} if stage_vars is None
                         else {"vars": stage_vars}, verification=objects.verification(
                             "t", args=[{"name": f"a{i}", "value": v}
                                        for i, v in enumerate(values)]))


def test_an_expression_expr_lang_refuses_is_denied_on_the_value() -> None:
    findings = schemas.check(_stage("plain", "${{ ctx.stage }}", "${{ ctx.stage + }}"))
    assert [(f.field, f.warning) for f in findings] == [
        ("spec.verification.args[2].value", False)]
    assert "expr-lang cannot compile ${{ ctx.stage + }}" in findings[0].message
    assert "Kargo fails the verification" in findings[0].message


def test_an_unclosed_opener_is_denied() -> None:
    findings = schemas.check(_stage("${{ ctx.stage"))
    assert [f.field for f in findings] == ["spec.verification.args[0].value"]
    assert "unclosed expression: ${{ at character 1 has no }} after it" in findings[0].message


def test_names_outside_the_environment_warn() -> None:
    findings = schemas.check(_stage("${{ ctx.namespace }}", "${{ vars.port }}", "${{ stage }}",
                                    stage_vars=[{"name": "host", "value": "x"}]))
    assert all(f.warning for f in findings)
    by_field = {f.field: f.message for f in findings}
    assert "ctx.namespace is not set for verification args" in by_field[
        "spec.verification.args[0].value"]
    assert "vars.port is not among the Stage's spec.vars" in by_field[
        "spec.verification.args[1].value"]
    assert "stage is not in the environment Kargo gives verification args" in by_field[
        "spec.verification.args[2].value"]


def test_what_rollgate_cannot_follow_warns() -> None:
    findings = schemas.check(_stage("${{ filter([1], # > 0) }}"))
    assert [(f.field, f.warning) for f in findings] == [("spec.verification.args[0].value", True)]
    assert "rollgate cannot check the builtin filter()" in findings[0].message


def test_vars_are_evaluated_in_order_with_the_ones_before() -> None:
    env = build_environment(project="p", stage="s", stage_vars=[
        ("a", "${{ ctx.stage }}"), ("b", "${{ vars.a + '-x' }}")])
    assert arg_value("x", "${{ vars.b }}", env) == "s-x"


def test_a_result_that_reads_as_a_number_is_kargos_error() -> None:
    with pytest.raises(EvaluationFailed, match="is not a string but float64"):
        arg_value("port", "${{ 8080 }}", ENV)
    assert arg_value("port", "${{ quote(8080) }}", ENV) == "8080"


@pytest.mark.parametrize("expression", [
    "(" * 5000 + "1" + ")" * 5000,
    " + ".join(["1"] * 2000),
    "2 ** " * 3000 + "2",
    "[" * 4000 + "]" * 4000,
    "-" * 6000 + "1",
])
def test_deep_or_long_expressions_are_a_warning_never_a_crash(expression: str) -> None:
    verdict = check_value("${{ " + expression + " }}")
    assert verdict.error is None
    assert any("rollgate cannot check this expression" in w for w in verdict.warnings)
    with pytest.raises(NotEvaluated):
        arg_value("a", "${{ " + expression + " }}", ENV)


def test_a_deep_but_unclosed_value_is_still_denied() -> None:
    assert check_value("${{ " + "(" * 5000).error is not None


def test_more_nodes_than_expr_lang_allows_is_denied_as_expr_lang_does() -> None:
    verdict = check_value("${{ " + " + ".join(["ctx.stage"] * 5000) + " }}")
    assert verdict.error is not None
    assert "exceeds maximum allowed nodes" in verdict.error
