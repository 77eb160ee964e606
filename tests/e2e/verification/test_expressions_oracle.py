"""rollgate's verdicts on Kargo expressions against expr-lang v1.17.8 itself (docs/verification.md,
"Kargo expressions in verification args").

hack/exprcheck (built by hack/k8s/build.sh from github.com/expr-lang/expr at the version
Kargo v1.11.2's go.mod requires, with Kargo's function signatures, template scan and
result rules) says for every value of tests/unit/schemas/expressions-corpus.yaml whether
Kargo can compile it and what it evaluates to; rollgate's deny verdict must agree for
every case, and engine mode's value wherever it evaluates one.
"""

from __future__ import annotations

import json
import random
import subprocess
from typing import Any

import pytest
import yaml

from harness.upstream import trees
from schemas.expressions import check_value
from schemas.expressions.evaluate import (
    EvaluationFailed,
    NotEvaluated,
    arg_value,
    build_environment,
)
from testkit.paths import REPO_ROOT

CORPUS = REPO_ROOT / "tests/unit/schemas/expressions-corpus.yaml"
# Too big to keep in the corpus file: expr-lang's node limit, and nesting that rollgate
# does not follow (a warning, never a denial: expr-lang compiles them).
GENERATED = [
    "${{ " + " + ".join(["ctx.stage"] * 5000) + " }}",
    "${{ " + " + ".join(["1"] * 2000) + " }}",
    "${{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",
    "${{ " + "[" * 4000 + "]" * 4000 + " }}",
    "${{ " + "-" * 6000 + "1 }}",
    "${{ " + "(" * 5000,
]


def _oracle(cases: list[dict[str, Any]], stage_vars: list[dict[str, str]]) -> list[dict[str, Any]]:
    try:
        binary = trees.exprcheck_binary()
    except trees.UpstreamMissing as err:
        pytest.fail(str(err), pytrace=False)
    lines = "".join(json.dumps({"template": c["template"], "project": "demo", "stage": "uat",
                                "vars": stage_vars}) + "\n" for c in cases)
    out = subprocess.run([str(binary)], input=lines, capture_output=True, text=True,
                         check=True, timeout=120)
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_rollgate_agrees_with_expr_lang_on_every_corpus_case() -> None:
    corpus = yaml.safe_load(CORPUS.read_text())
    cases, stage_vars = corpus["cases"], corpus["vars"]
    answers = _oracle(cases, stage_vars)
    assert len(answers) == len(cases) >= 60
    env = build_environment(project="demo", stage="uat",
                            stage_vars=[(v["name"], v["value"]) for v in stage_vars])
    names = frozenset(v["name"] for v in stage_vars)
    disagreements: list[tuple[str, str | None, Any]] = []
    compared = 0
    for case, answer in zip(cases, answers, strict=True):
        denied = check_value(case["template"], var_names=names).error is not None
        if denied == answer["compiles"]:
            disagreements.append((case["template"], "deny" if denied else "allow",
                                  answer.get("error", "")))
            continue
        if denied or not answer["evaluated"]:
            continue
        try:
            ours: str | None = arg_value("a", case["template"], env)
        except NotEvaluated:
            continue
        except EvaluationFailed:
            ours = None
        compared += 1
        theirs = answer["value"] if answer["isString"] and not answer.get("error") else None
        if ours != theirs:
            disagreements.append((case["template"], ours, theirs))
    assert disagreements == []
    assert compared >= 15
    # The corpus's own record is what expr-lang says.
    assert [c["deny"] for c in cases] == [not a["compiles"] for a in answers]


def test_rollgate_agrees_with_expr_lang_on_huge_and_deep_values() -> None:
    answers = _oracle([{"template": t} for t in GENERATED], [])
    ours = [check_value(t).error is None for t in GENERATED]
    assert ours == [a["compiles"] for a in answers]
    assert ours == [False, True, True, True, True, False]


# Token soup for the differential run below: operators, brackets, literals of every kind,
# Kargo's functions and expr-lang's builtins, used and misused.
ATOMS = ["ctx", "vars", ".", "stage", "(", ")", "[", "]", "{", "}", "'a'", '"b"', "`c`", "1",
         "0x1f", "1.5e3", "+", "-", "*", "/", "%", "**", "==", "!=", "<", "&&", "||", "!",
         "not", "in", "?", ":", "??", "|", ",", ";", "let", "x", "=", "if", "else", "#",
         "quote", "upper", "filter", "imageFrom", "nil", "true", "?.", "..", "'\\u{1F600}'",
         "é", "日", "b'x'", "matches", "'['", "$env", "len", "trim", "configMap",
         "warehouse", "semverDiff"]


def test_rollgate_agrees_with_expr_lang_on_random_token_sequences() -> None:
    rng = random.Random(20)
    templates = ["${{ " + " ".join(rng.choice(ATOMS) for _ in range(rng.randint(1, 8)))
                 + " }}" for _ in range(4000)]
    answers = _oracle([{"template": t} for t in templates], [])
    disagreements = [(t, a.get("error", "").split("\n")[0]) for t, a in zip(
        templates, answers, strict=True) if (check_value(t).error is None) != a["compiles"]]
    assert disagreements == []
    assert sum(a["compiles"] for a in answers) >= 100  # not only syntax errors
