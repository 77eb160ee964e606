"""Engine mode's evaluation of the expressions in verification args: what Kargo would
produce, for the subset rollgate follows (docs/verification.md, "Kargo expressions in verification
args"): literals, ``ctx``/``vars`` and member access on them (``.name``, ``["name"]``),
``+`` on two strings, parentheses, and the functions ``quote`` and ``unsafeQuote``.

Anything else raises ``NotEvaluated`` (the run is not built: a verification ``Error``
that names the arg and the expression), and what Kargo itself fails on raises
``EvaluationFailed`` with Kargo's reason. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from schemas.expressions import ast
from schemas.expressions.parser import ExpressionTooDeep, parse
from schemas.expressions.template import go_json, go_quote, go_type_name, result_value, segments

EVALUATED_FUNCTIONS = ("quote", "unsafeQuote")


class NotEvaluated(ValueError):
    """The expression uses something rollgate does not evaluate."""


class EvaluationFailed(ValueError):
    """Kargo would fail on this value too (the message says why)."""


def _member(target: Any, key: Any) -> Any:
    if target is None:
        raise EvaluationFailed(f"cannot fetch {key} from <nil>")
    if isinstance(target, Mapping) and isinstance(key, str):
        return target.get(key)
    raise NotEvaluated("member access on something other than a map")


def _call(name: str, args: list[Any]) -> str:
    if len(args) != 1:
        raise EvaluationFailed(f"wrong number of arguments to call {name}")
    value = args[0]
    if name == "quote" and isinstance(value, str):
        return go_quote(value)
    return f'"{go_json(value)}"'


def _visit(node: ast.Node, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Literal) and node.kind in ("string", "int", "float", "bool",
                                                       "nil"):
        return node.value
    if isinstance(node, ast.Identifier) and node.name in ("ctx", "vars"):
        return env.get(node.name)
    if isinstance(node, ast.Member) and not node.optional:
        return _member(_visit(node.target, env), _visit(node.key, env))
    if isinstance(node, ast.Binary) and node.operator == "+":
        left, right = _visit(node.left, env), _visit(node.right, env)
        if isinstance(left, str) and isinstance(right, str):
            return left + right
        raise NotEvaluated("+ on something other than two strings")
    if (isinstance(node, ast.Call) and isinstance(node.callee, ast.Identifier)
            and node.callee.name in EVALUATED_FUNCTIONS):
        return _call(node.callee.name, [_visit(arg, env) for arg in node.args])
    raise NotEvaluated(f"{type(node).__name__.lower()} is not in the subset rollgate "
                       "evaluates")


def evaluate_expression(expression: str, env: Mapping[str, Any]) -> str:
    """One expression's text in the template (a string as it is, anything else as Go's
    JSON)."""
    try:
        tree = parse(expression)
    except ExpressionTooDeep as err:
        raise NotEvaluated(str(err)) from None
    value = _visit(tree, env)
    if isinstance(value, str):
        return value
    try:
        return go_json(value)
    except ValueError as err:
        raise EvaluationFailed(str(err)) from None


def evaluate_template(value: str, env: Mapping[str, Any]) -> Any:
    """What Kargo's ``EvaluateTemplate`` returns for ``value`` (str or another JSON
    value). Raises ``NotEvaluated``, ``EvaluationFailed``, or the parser's and scanner's
    errors (which the webhook denies)."""
    parts = segments(value)
    if len(parts) == 1 and not parts[0].is_expression:
        return value
    text = "".join(evaluate_expression(p.text, env) if p.is_expression else p.text
                   for p in parts)
    return result_value(text)


def build_environment(*, project: str, stage: str,
                      stage_vars: list[tuple[str, str]]) -> dict[str, Any]:
    """Kargo's environment for verification args: ``ctx`` and, when the Stage sets
    ``spec.vars``, ``vars``, each var evaluated in order with the ones before it."""
    env: dict[str, Any] = {"ctx": {"project": project, "stage": stage}}
    if stage_vars:
        evaluated: dict[str, Any] = {}
        env["vars"] = evaluated
        for name, raw in stage_vars:
            try:
                evaluated[name] = evaluate_template(raw, env)
            except (NotEvaluated, EvaluationFailed, ValueError) as err:
                raise type(err)(f"evaluate variable {name!r}: {err}") from None
    return env


def arg_value(name: str, value: str, env: Mapping[str, Any]) -> str:
    """The string Kargo would put into the run for Stage arg ``name``; raises
    ``EvaluationFailed`` (Kargo fails too) or ``NotEvaluated``."""
    result = evaluate_template(value, env)
    if not isinstance(result, str):
        raise EvaluationFailed(f"evaluated argument {name!r} value is not a string but "
                               f"{go_type_name(result)}")
    return result
