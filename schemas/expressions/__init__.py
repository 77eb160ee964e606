"""Kargo expressions (``${{ }}`` / ``${% %}``, expr-lang v1.17.8) in verification args.

``check_value`` is what the webhook and ``python -m schemas validate`` use: an error
where expr-lang (or Kargo's template scan) refuses the value, warnings where rollgate
cannot follow it or it names something outside Kargo's environment for verification
args. ``evaluate`` holds engine mode's evaluation. All pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from schemas.expressions.checker import check
from schemas.expressions.lexer import ExpressionSyntaxError
from schemas.expressions.parser import ExpressionTooDeep, parse
from schemas.expressions.template import DELIMITERS, UnclosedExpression, is_template, segments


@dataclass(frozen=True)
class ValueCheck:
    """``error``: why Kargo cannot compile the value (None: it can); ``warnings``."""

    error: str | None = None
    warnings: tuple[str, ...] = field(default=())


def _show(opener: str, expression: str) -> str:
    """The expression as the user wrote it, with its delimiters (long ones cut)."""
    text = expression.strip()
    text = text if len(text) <= 60 else text[:57] + "..."
    return f"{opener} {text} {dict(DELIMITERS)[opener]}"


def check_value(value: str, *, var_names: frozenset[str] | None = None) -> ValueCheck:
    """The verdict on one arg value. ``var_names``: the Stage's ``spec.vars`` names."""
    if not is_template(value):
        return ValueCheck()
    try:
        parts = segments(value)
    except UnclosedExpression as err:
        return ValueCheck(error=f"{err}: Kargo fails the verification; close it or, for "
                          "literal text, write the opener as ${{ \"${{\" }}")
    warnings: list[str] = []
    expressions = [p for p in parts if p.is_expression]
    for part in expressions:
        try:
            tree = parse(part.text)
        except ExpressionTooDeep as err:
            warnings.append(f"{_show(part.opener, part.text)}: rollgate cannot check this "
                            f"expression ({err}); Kargo decides when it verifies")
            continue
        except ExpressionSyntaxError as err:
            where = "an empty expression" if not part.text.strip() else (
                _show(part.opener, part.text))
            return ValueCheck(error=f"expr-lang cannot compile {where}: {err.message} (at "
                              f"character {part.offset + err.position + 1}); Kargo fails the "
                              "verification with this error")
        report = check(tree, var_names=var_names)
        if report.errors:
            return ValueCheck(error=f"expr-lang cannot compile "
                              f"{_show(part.opener, part.text)}: {report.errors[0]}; Kargo "
                              "fails the verification with this error")
        shown = _show(part.opener, part.text)
        warnings += [f"{shown}: {w}" for w in report.unknown_names]
        warnings += [f"{shown}: rollgate cannot check {w}; Kargo "
                     "decides when it verifies" for w in report.unfollowed]
    return ValueCheck(warnings=tuple(dict.fromkeys(warnings)))
