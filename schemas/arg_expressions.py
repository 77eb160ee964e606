"""Findings about the Kargo expressions in Stage verification arg values
(docs/verification.md, "Kargo expressions in verification args").

Kargo evaluates every non-empty arg value as a template when it starts a verification;
an expression expr-lang cannot compile fails that verification, so it is denied here,
on the arg's ``value``. What rollgate cannot follow, and names outside the environment
Kargo gives verification args (``ctx.project``, ``ctx.stage``, ``vars``, its functions),
are warnings: Kargo accepts them and decides at verification time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from schemas.expressions import check_value
from schemas.expressions.template import is_template
from schemas.findings import Finding, Path


def stage_var_names(spec: dict[str, Any]) -> frozenset[str]:
    """The names of the Stage's ``spec.vars`` (Kargo puts them under ``vars``)."""
    entries = spec.get("vars")
    if not isinstance(entries, list) or not entries:
        return frozenset()
    names = (entry.get("name") for entry in entries if isinstance(entry, dict))
    return frozenset(name for name in names if isinstance(name, str) and name)


def arg_expression_findings(list_path: Path, args: object, *,
                            var_names: frozenset[str]) -> Iterator[Finding]:
    if not isinstance(args, list):
        return
    for index, arg in enumerate(args):
        value = arg.get("value") if isinstance(arg, dict) else None
        # Most values hold no expression: told here, without building a verdict.
        if not isinstance(value, str) or not is_template(value):
            continue
        verdict = check_value(value, var_names=var_names)
        path = (*list_path, index, "value")
        if verdict.error:
            yield Finding(path=path, message=verdict.error)
        for warning in verdict.warnings:
            yield Finding(path=path, message=warning, warning=True)
