"""The part of CEL (``x-kubernetes-validations``) that can be evaluated faithfully
without a CEL implementation: rules built only from ``has(self.field)``, ``true``,
``false``, ``!``, ``&&``, ``||``, ``? :`` and parentheses, on an object.

That is every rule of the pinned Stage and RolloutManager CRDs (the three on a
promotion step). Any other rule is not evaluated (``parse`` returns None) and the
README says so: guessing CEL would be worse than leaving it to the API server.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

Rule = Callable[[Mapping[str, Any]], bool]

_TOKEN = re.compile(
    r"\s*(?:(?P<has>has\(\s*self\.(?P<field>[A-Za-z_][A-Za-z0-9_]*)\s*\))"
    r"|(?P<op>&&|\|\||[!?:()])|(?P<lit>true|false))")


class _Unsupported(Exception):
    """A rule outside the subset."""


def _tokens(rule: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    index = 0
    while index < len(rule.rstrip()):
        match = _TOKEN.match(rule, index)
        if match is None:
            raise _Unsupported(rule)
        if match["has"]:
            out.append(("has", match["field"]))
        elif match["op"]:
            out.append(("op", match["op"]))
        else:
            out.append(("lit", match["lit"]))
        index = match.end()
    return out


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens = tokens
        self.at = 0

    def _peek(self) -> tuple[str, str] | None:
        return self.tokens[self.at] if self.at < len(self.tokens) else None

    def _take(self, op: str) -> bool:
        if self._peek() == ("op", op):
            self.at += 1
            return True
        return False

    def parse(self) -> Rule:
        rule = self.ternary()
        if self._peek() is not None:
            raise _Unsupported("trailing tokens")
        return rule

    def ternary(self) -> Rule:
        condition = self.either()
        if not self._take("?"):
            return condition
        then = self.ternary()
        if not self._take(":"):
            raise _Unsupported("? without :")
        otherwise = self.ternary()
        return lambda obj: then(obj) if condition(obj) else otherwise(obj)

    def either(self) -> Rule:
        rules = [self.both()]
        while self._take("||"):
            rules.append(self.both())
        return rules[0] if len(rules) == 1 else lambda obj: any(r(obj) for r in rules)

    def both(self) -> Rule:
        rules = [self.unary()]
        while self._take("&&"):
            rules.append(self.unary())
        return rules[0] if len(rules) == 1 else lambda obj: all(r(obj) for r in rules)

    def unary(self) -> Rule:
        if self._take("!"):
            inner = self.unary()
            return lambda obj: not inner(obj)
        return self.primary()

    def primary(self) -> Rule:
        if self._take("("):
            inner = self.ternary()
            if not self._take(")"):
                raise _Unsupported("unbalanced (")
            return inner
        token = self._peek()
        if token is None or token[0] == "op":
            raise _Unsupported("expected an operand")
        self.at += 1
        kind, text = token
        if kind == "lit":
            value = text == "true"
            return lambda obj: value
        # has() on an object field: present (the API server has pruned nulls by then).
        return lambda obj: obj.get(text) is not None


@lru_cache(maxsize=256)
def parse(rule: str) -> Rule | None:
    """The rule as a predicate on an object, or None when it is outside the subset."""
    try:
        return _Parser(_tokens(rule)).parse()
    except _Unsupported:
        return None
