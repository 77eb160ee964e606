"""A Pratt parser with expr-lang v1.17.8's grammar (``parser/parser.go``).

It decides what expr-lang's parser refuses, so the webhook denies exactly those
expressions: operator precedence and associativity (``parser/operator``), ``not in``
and friends, chained comparisons, ``??`` that may not be mixed with other operators
without parentheses, the pipe ``|``, ternaries and ``if {} else {}``, ``let``,
sequences with ``;``, predicates (``#``, ``.field``) inside the closure builtins,
member and optional chains, slices, array and map literals (trailing commas), and the
10,000-node limit.
"""

from __future__ import annotations

from schemas.expressions import ast
from schemas.expressions.lexer import ExpressionSyntaxError, Token, is_alphabetic, tokenize
from schemas.expressions.lexer import is_alphanumeric as _alnum

UNARY = {"not": 50, "!": 50, "-": 90, "+": 90}
BINARY: dict[str, tuple[int, bool]] = {  # precedence, right-associative
    "|": (0, False), "or": (10, False), "||": (10, False), "and": (15, False),
    "&&": (15, False), "==": (20, False), "!=": (20, False), "<": (20, False),
    ">": (20, False), ">=": (20, False), "<=": (20, False), "in": (20, False),
    "matches": (20, False), "contains": (20, False), "startsWith": (20, False),
    "endsWith": (20, False), "..": (25, False), "+": (30, False), "-": (30, False),
    "*": (60, False), "/": (60, False), "%": (60, False), "**": (100, True),
    "^": (100, True), "??": (500, False),
}
COMPARISONS = frozenset({"<", ">", ">=", "<="})
NEGATABLE = frozenset({"contains", "matches", "startsWith", "endsWith", "in"})
# (arguments, predicate argument indexes, optional trailing arguments)
PREDICATE_BUILTINS: dict[str, tuple[str, ...]] = {
    **{name: ("expr", "predicate") for name in (
        "all", "none", "any", "one", "filter", "map", "find", "findIndex", "findLast",
        "findLastIndex", "groupBy")},
    "count": ("expr", "predicate?"), "sum": ("expr", "predicate?"),
    "sortBy": ("expr", "predicate", "expr?"), "reduce": ("expr", "predicate", "expr?"),
}
BUILTINS = frozenset({
    "len", "type", "abs", "ceil", "floor", "round", "int", "float", "string", "trim",
    "trimPrefix", "trimSuffix", "upper", "lower", "split", "splitAfter", "replace",
    "repeat", "join", "indexOf", "lastIndexOf", "hasPrefix", "hasSuffix", "max", "min",
    "mean", "median", "toJSON", "fromJSON", "toBase64", "fromBase64", "now", "duration",
    "date", "timezone", "first", "last", "get", "take", "keys", "values", "toPairs",
    "fromPairs", "reverse", "uniq", "concat", "flatten", "sort", "bitnot", "bitand",
    "bitor", "bitxor", "bitnand", "bitshl", "bitshr", "bitushr",
})
MAX_NODES = 10_000
MAX_INT = 2**63 - 1
# Deeper than this, rollgate stops following (expr-lang, in Go, goes on): the parser, the
# checker and the evaluator recurse, and a hostile value must not exhaust Python's stack.
MAX_DEPTH = 64


class ExpressionTooDeep(ValueError):
    """Nested deeper than rollgate follows; not a verdict about the expression."""


def _valid_identifier(word: str) -> bool:
    return bool(word) and is_alphabetic(word[0]) and all(_alnum(c) for c in word[1:])


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.index = 0
        self.depth = 0
        self.nodes = 0
        self.depth_now = 0

    @property
    def current(self) -> Token:
        return self.tokens[self.index]

    def next(self) -> None:
        if self.tokens[self.index].kind == "eof":
            raise ExpressionSyntaxError("unexpected end of expression", self.current.position)
        self.index += 1

    def fail(self, message: str, token: Token | None = None) -> ExpressionSyntaxError:
        return ExpressionSyntaxError(message, (token or self.current).position)

    def unexpected(self) -> ExpressionSyntaxError:
        return self.fail(f"unexpected token {self.current}")

    def expect(self, kind: str, *values: str) -> None:
        if not self.current.is_(kind, *values):  # type: ignore[arg-type]
            raise self.unexpected()
        self.next()

    def node(self, node: ast.Node) -> ast.Node:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise self.fail("compilation failed: expression exceeds maximum allowed nodes")
        return node

    def sequence(self) -> ast.Node:
        nodes = [self.expression(0)]
        while self.current.is_("operator", ";"):
            self.next()
            if self.current.kind == "eof":
                break
            nodes.append(self.expression(0))
        if len(nodes) == 1:
            return nodes[0]
        return self.node(ast.Sequence(tuple(nodes), position=nodes[0].position))

    def expression(self, precedence: int) -> ast.Node:
        self.depth_now += 1
        if self.depth_now > MAX_DEPTH:
            raise ExpressionTooDeep(f"nested deeper than {MAX_DEPTH} levels")
        try:
            return self._expression(precedence)
        finally:
            self.depth_now -= 1

    def _expression(self, precedence: int) -> ast.Node:
        if precedence == 0 and self.current.is_("operator", "let"):
            return self.let()
        if precedence == 0 and self.current.is_("operator", "if"):
            return self.conditional_if()
        left = self.primary()
        previous = ""
        op = self.current
        while op.kind == "operator":
            negate = op.value == "not"
            if negate:
                self.next()
                if self.current.value not in NEGATABLE:
                    raise self.unexpected()
                if BINARY[self.current.value][0] < precedence:
                    self.index -= 1  # `not` is current again, for the caller
                    break
                op = self.current
            entry = BINARY.get(op.value)
            if entry is None or entry[0] < precedence:
                break
            self.next()
            if op.value == "|":
                name = self.current
                self.expect("identifier")
                left = self.call(name, [left])
            else:
                if previous == "??" and op.value != "??":
                    raise self.fail(
                        f"Operator ({op.value}) and coalesce expressions (??) cannot be "
                        "mixed. Wrap either by parentheses.", op)
                if op.value in COMPARISONS:
                    left = self.comparison(left, op, entry[0])
                else:
                    right = self.expression(entry[0] if entry[1] else entry[0] + 1)
                    left = self.node(ast.Binary(op.value, left, right, position=op.position))
                    if negate:
                        left = self.node(ast.Unary("not", left, position=op.position))
            previous = op.value
            op = self.current
        if precedence == 0:
            left = self.ternary(left)
        return left

    def comparison(self, left: ast.Node, op: Token, precedence: int) -> ast.Node:
        root: ast.Node | None = None
        while True:
            right = self.expression(precedence + 1)
            cmp = self.node(ast.Binary(op.value, left, right, position=op.position))
            root = cmp if root is None else self.node(
                ast.Binary("&&", root, cmp, position=op.position))
            left, op = right, self.current
            if not (op.kind == "operator" and op.value in COMPARISONS):
                return root
            self.next()

    def let(self) -> ast.Node:
        self.expect("operator", "let")
        name = self.current
        self.expect("identifier")
        self.expect("operator", "=")
        value = self.expression(0)
        self.expect("operator", ";")
        body = self.sequence()
        return self.node(ast.Let(name.value, value, body, position=name.position))

    def conditional_if(self) -> ast.Node:
        start = self.current.position
        self.next()
        condition = self.expression(0)
        self.expect("bracket", "{")
        then = self.sequence()
        self.expect("bracket", "}")
        self.expect("operator", "else")
        if self.current.is_("operator", "if"):
            otherwise = self.conditional_if()
        else:
            self.expect("bracket", "{")
            otherwise = self.sequence()
            self.expect("bracket", "}")
        return ast.Conditional(condition, then, otherwise, position=start)

    def ternary(self, node: ast.Node) -> ast.Node:
        while self.current.is_("operator", "?"):
            self.next()
            if not self.current.is_("operator", ":"):
                then = self.expression(0)
                self.expect("operator", ":")
                otherwise = self.expression(0)
            else:
                self.next()
                then, otherwise = node, self.expression(0)
            node = self.node(ast.Conditional(node, then, otherwise, position=node.position))
        return node

    def primary(self) -> ast.Node:
        token = self.current
        if token.kind == "operator" and token.value in UNARY:
            self.next()
            operand = self.expression(UNARY[token.value])
            return self.postfix(self.node(ast.Unary(token.value, operand,
                                                    position=token.position)))
        if token.is_("bracket", "("):
            self.next()
            inner = self.sequence()
            self.expect("bracket", ")")
            return self.postfix(inner)
        if self.depth > 0 and token.is_("operator", "#", "."):
            name = ""
            if token.value == "#":
                self.next()
                if self.current.kind == "identifier":
                    name = self.current.value
                    self.next()
            return self.postfix(self.node(ast.Pointer(name, position=token.position)))
        if token.is_("operator", "::"):
            self.next()
            function = self.current
            self.expect("identifier")
            return self.postfix(self.call(function, [], overridable=False))
        return self.secondary()

    def secondary(self) -> ast.Node:
        token = self.current
        node: ast.Node
        if token.kind == "identifier":
            self.next()
            if token.value in ("true", "false"):
                return self.node(ast.Literal("bool", token.value == "true",
                                             position=token.position))
            if token.value == "nil":
                return self.node(ast.Literal("nil", None, position=token.position))
            if self.current.is_("bracket", "("):
                node = self.call(token, [])
            else:
                node = self.node(ast.Identifier(token.value, position=token.position))
        elif token.kind == "number":
            self.next()
            return self.node(_number(token))
        elif token.kind in ("string", "bytes"):
            self.next()
            node = self.node(ast.Literal(token.kind, token.value, position=token.position))
        elif token.is_("bracket", "["):
            node = self.array(token)
        elif token.is_("bracket", "{"):
            node = self.map(token)
        else:
            raise self.unexpected()
        return self.postfix(node)

    def call(self, token: Token, args: list[ast.Node], *,
             overridable: bool = True) -> ast.Node:
        del overridable  # Kargo overrides no builtin
        spec = PREDICATE_BUILTINS.get(token.value)
        if spec is not None:
            self.expect("bracket", "(")
            rest = spec[len(args):]
            for i, kind in enumerate(rest):
                if kind.endswith("?"):
                    if self.current.is_("bracket", ")"):
                        break
                elif self.current.is_("bracket", ")"):
                    raise self.fail(f"expected at least {len(rest)} arguments")
                if i > 0:
                    self.expect("operator", ",")
                args.append(self.predicate() if kind.startswith("predicate")
                            else self.expression(0))
            if self.current.is_("operator", ","):
                self.next()
            self.expect("bracket", ")")
            return self.node(ast.Builtin(token.value, tuple(args), position=token.position))
        if token.value in BUILTINS:
            return self.node(ast.Builtin(token.value, tuple(self.arguments(args)),
                                         position=token.position))
        callee = self.node(ast.Identifier(token.value, position=token.position))
        return self.node(ast.Call(callee, tuple(self.arguments(args)),
                                  position=token.position))

    def arguments(self, args: list[ast.Node]) -> list[ast.Node]:
        offset = len(args)
        self.expect("bracket", "(")
        while not self.current.is_("bracket", ")"):
            if len(args) > offset:
                self.expect("operator", ",")
            if self.current.is_("bracket", ")"):
                break
            args.append(self.expression(0))
        self.expect("bracket", ")")
        return args

    def predicate(self) -> ast.Node:
        start = self.current
        braces = start.is_("bracket", "{")
        if braces:
            self.next()
        self.depth += 1
        if braces:
            body = self.sequence()
        else:
            body = self.expression(0)
            if self.current.is_("operator", ";"):
                raise self.fail("wrap predicate with brackets { and }")
        self.depth -= 1
        if braces:
            self.expect("bracket", "}")
        return self.node(ast.Predicate(body, position=start.position))

    def array(self, token: Token) -> ast.Node:
        items: list[ast.Node] = []
        self.expect("bracket", "[")
        while not self.current.is_("bracket", "]"):
            if items:
                self.expect("operator", ",")
                if self.current.is_("bracket", "]"):
                    break
            items.append(self.expression(0))
        self.expect("bracket", "]")
        return self.node(ast.ArrayLiteral(tuple(items), position=token.position))

    def map(self, token: Token) -> ast.Node:
        self.expect("bracket", "{")
        pairs: list[tuple[ast.Node, ast.Node]] = []
        while not self.current.is_("bracket", "}"):
            if pairs:
                self.expect("operator", ",")
                if self.current.is_("bracket", "}"):
                    break
                if self.current.is_("operator", ","):
                    raise self.unexpected()
            key: ast.Node
            if self.current.kind in ("number", "string", "identifier"):
                key = self.node(ast.Literal("string", self.current.value,
                                            position=self.current.position))
                self.next()
            elif self.current.is_("bracket", "("):
                key = self.expression(0)
            else:
                raise self.fail("a map key must be a quoted string, a number, a identifier, "
                                f"or an expression enclosed in parentheses (unexpected "
                                f"token {self.current})")
            self.expect("operator", ":")
            pairs.append((key, self.expression(0)))
        self.expect("bracket", "}")
        return self.node(ast.MapLiteral(tuple(pairs), position=token.position))

    def postfix(self, node: ast.Node) -> ast.Node:
        token = self.current
        while token.kind in ("operator", "bracket"):
            optional = token.value == "?."
            if optional and self.tokens[self.index + 1].is_("bracket", "["):
                self.next()
                token = self.current
            if token.value in (".", "?."):
                self.next()
                prop = self.current
                self.next()
                if prop.kind != "identifier" and not (
                        prop.kind == "operator" and _valid_identifier(prop.value)):
                    raise self.fail("expected name")
                key = self.node(ast.Literal("string", prop.value, position=prop.position))
                node = self.node(ast.Member(node, key, optional, position=prop.position))
                if self.current.is_("bracket", "("):
                    node = self.node(ast.Call(node, tuple(self.arguments([])),
                                              position=prop.position))
            elif token.value == "[":
                node = self.index_or_slice(node, token, optional)
            else:
                break
            token = self.current
        return node

    def index_or_slice(self, node: ast.Node, token: Token, optional: bool) -> ast.Node:
        self.next()
        start: ast.Node | None = None
        stop: ast.Node | None = None
        if self.current.is_("operator", ":"):
            self.next()
            if not self.current.is_("bracket", "]"):
                stop = self.expression(0)
            self.expect("bracket", "]")
            return self.node(ast.Slice(node, None, stop, position=token.position))
        start = self.expression(0)
        if self.current.is_("operator", ":"):
            self.next()
            if not self.current.is_("bracket", "]"):
                stop = self.expression(0)
            self.expect("bracket", "]")
            return self.node(ast.Slice(node, start, stop, position=token.position))
        self.expect("bracket", "]")
        return self.node(ast.Member(node, start, optional, position=token.position))


def _number(token: Token) -> ast.Node:
    text = token.value.replace("_", "")
    lower = text.lower()
    try:
        if lower.startswith(("0x", "0b", "0o")):
            value = int(lower[2:], {"x": 16, "b": 2, "o": 8}[lower[1]])
        elif "." in lower or "e" in lower:
            number = float(text)
            if number == float("inf"):
                raise ExpressionSyntaxError("float literal is too large", token.position)
            return ast.Literal("float", number, position=token.position)
        else:
            value = int(text, 10)
    except ValueError:
        raise ExpressionSyntaxError(f"invalid number literal {token.value!r}",
                                    token.position) from None
    if value > MAX_INT:
        raise ExpressionSyntaxError(f"invalid integer literal {token.value!r}: out of range",
                                    token.position)
    return ast.Literal("int", value, position=token.position)


def tree_depth(node: ast.Node) -> int:
    """The depth of ``node``'s tree, without recursion (a chain ``a + a + ...`` is as deep
    as it is long although the parser builds it in a loop)."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        current, depth = stack.pop()
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in ast.children(current))
    return deepest


def parse(source: str) -> ast.Node:
    """The AST of one expression; raises ``ExpressionSyntaxError`` where expr-lang's
    parser does (its message, at a rune offset), ``ExpressionTooDeep`` past what rollgate
    follows."""
    parser = _Parser(tokenize(source))
    node = parser.sequence()
    if parser.current.kind != "eof":
        raise parser.unexpected()
    if tree_depth(node) > 4 * MAX_DEPTH:
        raise ExpressionTooDeep(f"nested deeper than {4 * MAX_DEPTH} levels")
    return node
