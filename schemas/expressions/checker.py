"""What expr-lang's checker (v1.17.8, compiled as Kargo compiles verification args: no
``expr.Env``, so every name is of unknown type, and Kargo's functions with their
declared signatures) refuses, plus what rollgate cannot follow and the names Kargo does
not provide.

Types are tracked only as far as a verdict needs them: literals, the results of
operators on them, Kargo's functions (their Go result types and struct fields) and a
table of expr-lang builtins. Everything else is ``unknown``, which expr-lang accepts
with any operator that some operand type could satisfy (its ``MaybeCompatible``), so a
refusal is reported only when expr-lang's own rule refuses it too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from schemas.expressions import ast
from schemas.expressions.parser import BUILTINS, PREDICATE_BUILTINS

UNKNOWN, NIL, FUNC = "unknown", "nil", "func"
NUMBERS = frozenset({"int", "float"})
SCALARS = frozenset({"int", "float", "string", "bool", "bytes", NIL})

# Kargo's verification functions (pkg/expressions/function and EvaluateTemplate): the
# overloads' parameter types and the result type.
S, ORIGIN, ANY = "string", "struct:FreightOrigin", "any"
KARGO_FUNCTIONS: dict[str, tuple[tuple[tuple[str, ...], str], ...]] = {
    "configMap": (((S,), "map:string"),),
    "sharedConfigMap": (((S,), "map:string"),),
    "secret": (((S,), "map:string"),),
    "sharedSecret": (((S,), "map:string"),),
    "freightMetadata": (((S,), "map:unknown"),),
    "stageMetadata": (((S,), "map:unknown"),),
    "warehouse": (((S,), ORIGIN),),
    "commitFrom": (((S, ORIGIN), "struct:GitCommit"), ((S,), "struct:GitCommit")),
    "imageFrom": (((S, ORIGIN), "struct:Image"), ((S,), "struct:Image")),
    "chartFrom": (((S, S, ORIGIN), "struct:Chart"), ((S, S), "struct:Chart"),
                  ((S, ORIGIN), "struct:Chart"), ((S,), "struct:Chart")),
    "artifactFrom": (((S, ORIGIN), "struct:ArtifactReference"),
                     ((S,), "struct:ArtifactReference")),
    "semverDiff": (((S, S), S),),
    "semverParse": (((S,), "Version"),),
    "quote": (((ANY,), S),),
    "unsafeQuote": (((ANY,), S),),
    "asYAML": (((ANY,), S),),
    "asJSON": (((ANY,), S),),
}
STRUCT_FIELDS: dict[str, dict[str, str]] = {
    "FreightOrigin": {"Kind": S, "Name": S},
    "GitCommit": {k: S for k in ("RepoURL", "ID", "Branch", "Tag", "Message", "Author",
                                 "Committer")},
    "Image": {"RepoURL": S, "Tag": S, "Digest": S, "Annotations": "map:string"},
    "Chart": {"RepoURL": S, "Name": S, "Version": S},
    "ArtifactReference": {"ArtifactType": S, "SubscriptionName": S, "Version": S,
                          "Metadata": "map:unknown"},
}
# expr-lang builtins rollgate checks: (parameter types, result); "str|arr|map" means any of.
BUILTIN_SIGNATURES: dict[str, tuple[tuple[str, ...], str]] = {
    "len": (("str|arr|map",), "int"),
    "upper": ((S,), S), "lower": ((S,), S), "trim": ((S, "string?"), S),
    "trimPrefix": ((S, S), S), "trimSuffix": ((S, S), S),
    "hasPrefix": ((S, S), "bool"), "hasSuffix": ((S, S), "bool"),
    "repeat": ((S, "int"), S), "indexOf": ((S, S), "int"), "lastIndexOf": ((S, S), "int"),
    "replace": ((S, S, S), S), "toBase64": ((S,), S), "fromBase64": ((S,), S),
    "string": ((ANY,), S), "toJSON": ((ANY,), S), "type": ((ANY,), S),
}
_SHARED_REGEXP_ERRORS = ("unterminated character set", "missing ), unterminated subpattern",
                         "unbalanced parenthesis", "nothing to repeat", "multiple repeat")
ENVIRONMENT_ROOTS = frozenset({"ctx", "vars", "$env"})
CTX_KEYS = frozenset({"project", "stage"})


@dataclass
class Report:
    """``errors``: what expr-lang refuses (the webhook denies); ``unfollowed``: parts rollgate
    cannot check (warnings); ``unknown_names``: names outside Kargo's environment
    (warnings)."""

    errors: list[str] = field(default_factory=list)
    unfollowed: list[str] = field(default_factory=list)
    unknown_names: list[str] = field(default_factory=list)


def _accepts(kind: str, want: str) -> bool:
    if kind == UNKNOWN or want == ANY:
        return kind != NIL or want == ANY
    if want == "str|arr|map":
        return kind == S or kind == "array" or kind.startswith("map:")
    return kind == want


def _maybe(left: str, right: str, *checks: frozenset[str]) -> bool:
    """expr-lang's ``MaybeCompatible``: some check that each side passes or is unknown."""
    return any((left == UNKNOWN or left in c) and (right == UNKNOWN or right in c)
               for c in checks)


_NUM, _STR, _INT, _BOOL = NUMBERS, frozenset({S}), frozenset({"int"}), frozenset({"bool"})


def _comparable(left: str, right: str) -> bool:
    if UNKNOWN in (left, right) or NIL in (left, right):
        return True
    return left == right or (left in NUMBERS and right in NUMBERS)


def _numeric(left: str, right: str) -> str:
    return "float" if "float" in (left, right) else "int"


def _plus(left: str, right: str) -> str | None:
    if left == S and right == S:
        return S
    if left in NUMBERS and right in NUMBERS:
        return _numeric(left, right)
    return UNKNOWN if _maybe(left, right, _NUM, _STR) else None


def _arithmetic(left: str, right: str) -> str | None:
    if left in NUMBERS and right in NUMBERS:
        return _numeric(left, right)
    return UNKNOWN if _maybe(left, right, _NUM) else None


def _membership(left: str, right: str) -> str | None:
    if right == UNKNOWN or right == "array":
        return "bool"
    if right.startswith("map:") or right.startswith("struct:"):
        return "bool" if left in (UNKNOWN, S) else None
    return "bool" if left == UNKNOWN and right == S else None


def _when(result: str, *checks: frozenset[str]) -> Callable[[str, str], str | None]:
    return lambda left, right: result if _maybe(left, right, *checks) else None


_BINARY_RULES: dict[str, Callable[[str, str], str | None]] = {
    "==": lambda left, right: "bool" if _comparable(left, right) else None,
    **{op: _when("bool", _BOOL) for op in ("or", "||", "and", "&&")},
    **{op: _when("bool", _NUM, _STR) for op in ("<", ">", "<=", ">=")},
    "+": _plus, "-": _arithmetic, "*": _arithmetic,
    **{op: _when("float", _NUM) for op in ("/", "**", "^")},
    "%": _when("int", _INT), "..": _when("array", _INT),
    **{op: _when("bool", _STR) for op in ("matches", "contains", "startsWith", "endsWith")},
    "in": _membership,
}
_BINARY_RULES["!="] = _BINARY_RULES["=="]


def _coalesce(left: str, right: str) -> str:
    if left == NIL or right == NIL:
        return right if left == NIL else left
    return left if left == right else UNKNOWN


def _binary_type(op: str, left: str, right: str) -> str | None:
    """The result type, or None where expr-lang refuses the operands (its checker's
    ``binaryNode``); ``??`` accepts anything."""
    rule = _BINARY_RULES.get(op)
    return _coalesce(left, right) if rule is None else rule(left, right)


class _Checker:
    def __init__(self, var_names: frozenset[str] | None) -> None:
        self.report = Report()
        self.var_names = var_names
        self.bound: list[tuple[str, str]] = []

    def error(self, message: str) -> str:
        self.report.errors.append(message)
        return UNKNOWN

    def unfollowed(self, what: str) -> str:
        if what not in self.report.unfollowed:
            self.report.unfollowed.append(what)
        return UNKNOWN

    def name(self, message: str) -> None:
        if message not in self.report.unknown_names:
            self.report.unknown_names.append(message)

    def visit(self, node: ast.Node) -> str:
        handler = getattr(self, f"visit_{type(node).__name__}", None)
        if handler is not None:
            result: str = handler(node)
            return result
        for child in ast.children(node):  # Pointer, Predicate
            self.visit(child)
        return UNKNOWN

    def visit_Literal(self, node: ast.Literal) -> str:
        return "float" if node.kind == "float" else node.kind

    def visit_Identifier(self, node: ast.Identifier) -> str:
        return self.identifier(node.name)

    def visit_Unary(self, node: ast.Unary) -> str:
        return self.unary(node)

    def visit_Binary(self, node: ast.Binary) -> str:
        left, right = self.visit(node.left), self.visit(node.right)
        if node.operator == "matches" and isinstance(node.right, ast.Literal):
            self.regexp(node.right.value)
        result = _binary_type(node.operator, left, right)
        if result is None:
            return self.error(f"invalid operation: {node.operator} (mismatched types "
                              f"{left} and {right})")
        return result

    def visit_Member(self, node: ast.Member) -> str:
        return self.member(node)

    def visit_Call(self, node: ast.Call) -> str:
        return self.call(node)

    def visit_Builtin(self, node: ast.Builtin) -> str:
        return self.builtin(node)

    def visit_Conditional(self, node: ast.Conditional) -> str:
        condition = self.visit(node.condition)
        if condition not in ("bool", UNKNOWN):
            self.error(f"non-bool expression (type {condition}) used as condition")
        then, otherwise = self.visit(node.then), self.visit(node.otherwise)
        return then if then == otherwise else UNKNOWN

    def visit_Let(self, node: ast.Let) -> str:
        self.bound.append((node.name, self.visit(node.value)))
        try:
            return self.visit(node.body)
        finally:
            self.bound.pop()

    def visit_Sequence(self, node: ast.Sequence) -> str:
        return [self.visit(item) for item in node.items][-1]

    def visit_ArrayLiteral(self, node: ast.ArrayLiteral) -> str:
        for item in node.items:
            self.visit(item)
        return "array"

    def visit_MapLiteral(self, node: ast.MapLiteral) -> str:
        for key, value in node.pairs:
            self.visit(key)
            self.visit(value)
        return "map:unknown"

    def visit_Slice(self, node: ast.Slice) -> str:
        target = self.visit(node.target)
        for part in (node.start, node.stop):
            if part is not None:
                self.visit(part)
        return target if target in (S, "array") else self.unfollowed("a slice")

    def bound_type(self, name: str) -> str | None:
        for bound, kind in reversed(self.bound):
            if bound == name:
                return kind
        return None

    def identifier(self, name: str) -> str:
        kind = self.bound_type(name)
        if kind is not None:
            return kind
        if name in KARGO_FUNCTIONS or name in BUILTINS or name in PREDICATE_BUILTINS:
            return f"{FUNC}:{name}"  # a function used as a value: expr-lang's func type
        if name not in ENVIRONMENT_ROOTS:
            self.name(f"{name} is not in the environment Kargo gives verification args "
                      "(ctx, vars and its functions): it evaluates to nil")
        elif name == "vars" and self.var_names is not None and not self.var_names:
            self.name("vars: the Stage sets no spec.vars, so vars is nil")
        return UNKNOWN

    def regexp(self, pattern: object) -> None:
        """expr-lang compiles a literal ``matches`` pattern with Go's regexp. Python's
        ``re`` differs from RE2, so only the errors both share are reported."""
        if not isinstance(pattern, str):
            return
        try:
            re.compile(pattern)
        except re.error as err:
            if any(err.msg.startswith(m) for m in _SHARED_REGEXP_ERRORS):
                self.error(f"error parsing regexp: {err.msg}")
            else:
                self.unfollowed("this regular expression")

    def unary(self, node: ast.Unary) -> str:
        operand = self.visit(node.operand)
        want = _BOOL if node.operator in ("!", "not") else _NUM
        if operand != UNKNOWN and operand not in want:
            return self.error(f"invalid operation: {node.operator} (mismatched type {operand})")
        return "bool" if node.operator in ("!", "not") else operand

    def member(self, node: ast.Member) -> str:
        target = self.visit(node.target)
        key_kind = self.visit(node.key)
        key = node.key.value if isinstance(node.key, ast.Literal) else None
        self.environment_member(node.target, key)
        if target in ("int", "float", "bool", "bytes", S) or target.startswith(FUNC):
            return self.error(f"type {target} has no field {key}" if key_kind == S
                              else f"type {target}[{key_kind}] is undefined")
        if target.startswith("struct:"):
            fields = STRUCT_FIELDS[target[7:]]
            if not isinstance(key, str):
                return self.unfollowed(f"an index into a {target[7:]}")
            if key not in fields:
                return self.error(f"type {target[7:]} has no field {key}")
            return fields[key]
        if target.startswith("map:"):
            return target[4:]
        if target == "Version":
            return self.unfollowed("a member of semverParse()'s result")
        return UNKNOWN

    def environment_member(self, target: ast.Node, key: object) -> None:
        if not isinstance(target, ast.Identifier) or self.bound_type(target.name):
            return
        if target.name == "ctx" and isinstance(key, str) and key not in CTX_KEYS:
            self.name(f"ctx.{key} is not set for verification args (ctx has project and "
                      "stage): it evaluates to nil")
        if (target.name == "vars" and isinstance(key, str) and self.var_names
                and key not in self.var_names):
            self.name(f"vars.{key} is not among the Stage's spec.vars: it evaluates to nil")

    def call(self, node: ast.Call) -> str:
        args = [self.visit(arg) for arg in node.args]
        if not isinstance(node.callee, ast.Identifier):
            self.visit(node.callee)
            return self.unfollowed("a method call")
        name = node.callee.name
        overloads = KARGO_FUNCTIONS.get(name)
        if overloads is None:
            if self.bound_type(name) is None:
                self.name(f"{name}() is not a function Kargo gives verification args: "
                          "the verification fails with \"cannot call nil\"")
            return UNKNOWN
        for params, result in overloads:
            if len(params) == len(args) and all(map(_accepts, args, params)):
                return result
        if len(overloads) == 1:
            params = overloads[0][0]
            if len(args) != len(params):
                many = "too many" if len(args) > len(params) else "not enough"
                return self.error(f"{many} arguments to call {name}")
            bad = next(a for a, p in zip(args, params, strict=True) if not _accepts(a, p))
            return self.error(f"cannot use {bad} as argument to call {name}")
        return self.error(f"no overload of {name} takes ({', '.join(args)})")

    def builtin(self, node: ast.Builtin) -> str:
        args = [self.visit(arg) for arg in node.args]
        signature = BUILTIN_SIGNATURES.get(node.name)
        if signature is None:
            return self.unfollowed(f"the builtin {node.name}()")
        params, result = signature
        required = sum(not p.endswith("?") for p in params)
        if not required <= len(args) <= len(params):
            return self.error(f"invalid number of arguments to {node.name} (expected "
                              f"{len(params)}, got {len(args)})")
        for arg, param in zip(args, params[:len(args)], strict=True):
            if not _accepts(arg, param.rstrip("?")):
                return self.error(f"invalid argument for {node.name} (type {arg})")
        return result


def check(node: ast.Node, *, var_names: frozenset[str] | None = None) -> Report:
    """The checker's verdict on one parsed expression. ``var_names``: the Stage's
    ``spec.vars`` names (None: not known, no warning about vars)."""
    checker = _Checker(var_names)
    checker.visit(node)
    return checker.report


def walk(node: ast.Node) -> Iterator[ast.Node]:
    yield node
    for child in ast.children(node):
        yield from walk(child)
