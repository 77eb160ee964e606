"""The tokens of an expr-lang (v1.17.8) expression, as its ``parser/lexer`` cuts them.

Faithful to the lexer's state machine where it decides accept/reject: which runes
start which token, number syntax (hex/octal/binary prefixes, ``_``, a ``..`` right
after digits), string escapes (``\\x``, ``\\u{...}``, octal, the quote itself), raw
backtick strings with doubled backticks, ``//`` and ``/* */`` comments, ``not in``
style operators, and ``#`` pointers. Positions count runes, as expr-lang's do.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Literal

Kind = Literal["identifier", "number", "string", "bytes", "operator", "bracket", "eof"]

WORD_OPERATORS = frozenset(
    {"in", "or", "and", "matches", "contains", "startsWith", "endsWith", "let", "if", "else"}
)
NEGATABLE = frozenset({"in", "matches", "contains", "startsWith", "endsWith"})
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
                   "v": "\v", "\\": "\\"}


class ExpressionSyntaxError(ValueError):
    """What expr-lang's lexer or parser would refuse; ``position`` is a rune offset."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.message = message
        self.position = position


@dataclass(frozen=True, slots=True)
class Token:
    kind: Kind
    value: str
    position: int

    def is_(self, kind: Kind, *values: str) -> bool:
        return self.kind == kind and (not values or self.value in values)

    def __str__(self) -> str:
        if self.kind == "eof":
            return "EOF"
        return f'{self.kind.capitalize()}("{self.value}")'


def is_alphabetic(ch: str) -> bool:
    """Go's ``unicode.IsLetter`` plus ``_`` and ``$`` (parser/utils)."""
    return ch in "_$" or unicodedata.category(ch).startswith("L")


def is_alphanumeric(ch: str) -> bool:
    return is_alphabetic(ch) or unicodedata.category(ch) == "Nd"


def _is_space(ch: str) -> bool:
    # Go's unicode.IsSpace: the Latin-1 spaces and the Unicode White_Space property.
    return ch in "\t\n\v\f\r \x85\xa0" or (ord(ch) > 0xFF and ch.isspace())


class _Lexer:
    def __init__(self, source: str) -> None:
        self.src = source
        self.pos = 0
        self.start = 0
        self.tokens: list[Token] = []

    def peek(self, offset: int = 0) -> str:
        i = self.pos + offset
        return self.src[i] if i < len(self.src) else ""

    def next(self) -> str:
        ch = self.peek()
        self.pos += 1  # past the end counts too, as the Go lexer's eof rune does
        return ch

    def accept(self, valid: str) -> bool:
        ch = self.peek()
        if ch and ch in valid:
            self.pos += 1
            return True
        return False

    def accept_run(self, valid: str) -> None:
        while self.accept(valid):
            pass

    def emit(self, kind: Kind, value: str | None = None) -> None:
        word = self.src[self.start:self.pos]
        self.tokens.append(Token(kind, word if value is None else value, self.start))
        self.start = self.pos

    def fail(self, message: str) -> ExpressionSyntaxError:
        return ExpressionSyntaxError(message, max(min(self.pos, len(self.src)) - 1, 0))

    def run(self) -> list[Token]:
        while True:
            if self.pos >= len(self.src):
                self.tokens.append(Token("eof", "", len(self.src)))
                return self.tokens
            self._root(self.next())

    def _root(self, ch: str) -> None:
        if _is_space(ch):
            self.start = self.pos
        elif ch in "'\"":
            self.emit("string", self._string(ch))
        elif ch == "`":
            self.emit("string", self._raw_string())
        elif ch in "bB" and self.peek() in ("'", '"') and self.peek():
            self.emit("bytes", self._string(self.next()))
        elif "0" <= ch <= "9":
            self.pos -= 1
            self._number()
        elif ch == "?":
            self.accept(".?")
            self.emit("operator")
        elif ch == "/":
            self._slash()
        elif ch == "#":
            self._pointer()
        elif ch in "|:":
            self.accept(ch)
            self.emit("operator")
        elif ch in "([{)]}":
            self.emit("bracket")
        elif ch in ",;%+-^":
            self.emit("operator")
        elif ch in "&!=*<>":
            self.accept("&=*")
            self.emit("operator")
        elif ch == ".":
            if self.accept("0123456789"):
                self.pos = self.start
                self._number()
            else:
                self.accept(".")
                self.emit("operator")
        elif is_alphanumeric(ch):
            self._identifier()
        else:
            raise self.fail(f"unrecognized character: U+{ord(ch):04X} {ch!r}")

    def _number(self) -> None:
        digits = "0123456789_"
        if self.accept("0"):
            if self.accept("xX"):
                digits = "0123456789abcdefABCDEF_"
            elif self.accept("oO"):
                digits = "01234567_"
            elif self.accept("bB"):
                digits = "01_"
        self.accept_run(digits)
        end = self.pos
        if self.accept("."):
            if self.peek() == ".":
                self.pos = end
                self.emit("number")
                return
            self.accept_run(digits)
        if self.accept("eE"):
            self.accept("+-")
            self.accept_run(digits)
        if self.peek() and is_alphanumeric(self.peek()):
            self.next()
            raise self.fail(f"bad number syntax: {self.src[self.start:self.pos]!r}")
        self.emit("number")

    def _identifier(self) -> None:
        while self.peek() and is_alphanumeric(self.peek()):
            self.pos += 1
        word = self.src[self.start:self.pos]
        if word == "not":
            self._not()
        elif word in WORD_OPERATORS:
            self.emit("operator")
        else:
            self.emit("identifier")

    def _not(self) -> None:
        self.emit("operator")
        self.accept_run(" ")
        self.start = self.pos
        end = self.pos
        while self.peek() and is_alphanumeric(self.peek()):
            self.pos += 1
        if self.src[self.start:self.pos] in NEGATABLE:
            self.emit("operator")
        else:
            self.pos = end

    def _slash(self) -> None:
        if self.accept("/"):
            while self.pos < len(self.src) and self.next() != "\n":
                pass
            self.start = self.pos
        elif self.accept("*"):
            while True:
                if self.pos >= len(self.src):
                    self.pos += 1
                    raise self.fail("unclosed comment")
                if self.next() == "*" and self.accept("/"):
                    break
            self.start = self.pos
        else:
            self.emit("operator")

    def _pointer(self) -> None:
        self.accept("#")
        self.emit("operator")
        while self.peek() and is_alphanumeric(self.peek()):
            self.pos += 1
        if self.pos > self.start:
            self.emit("identifier")

    def _digits(self, count: int, base: int) -> str:
        text = self.src[self.pos:self.pos + count]
        valid = "01234567" if base == 8 else "0123456789abcdefABCDEF"
        if len(text) < count or any(c not in valid for c in text):
            bad = next((i for i, c in enumerate(text) if c not in valid), len(text))
            self.pos += bad + 1
            raise self.fail("invalid char escape")
        self.pos += count
        return text

    def _escape(self, quote: str) -> str:
        ch = self.next()
        if ch in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[ch]
        if ch == quote and ch:
            return ch
        if ch and ch in "01234567":
            self.pos -= 1
            code = int(self._digits(3, 8), 8)
            if code > 255:
                raise self.fail("invalid char escape")
            return chr(code)
        if ch == "x":
            return chr(int(self._digits(2, 16), 16))
        if ch == "u" and self.peek() == "{":
            return self._braced_unicode()
        if ch in ("u", "U"):
            return _rune(int(self._digits(4 if ch == "u" else 8, 16), 16), self)
        raise self.fail("invalid char escape")

    def _braced_unicode(self) -> str:
        self.pos += 1
        start = self.pos
        while self.peek() and self.peek() != "}":
            if self.peek() not in "0123456789abcdefABCDEF" or self.pos - start >= 6:
                raise self.fail("invalid char escape")
            self.pos += 1
        if self.peek() != "}" or self.pos == start:
            raise self.fail("invalid char escape")
        self.pos += 1
        return _rune(int(self.src[start:self.pos - 1], 16), self)

    def _string(self, quote: str) -> str:
        out: list[str] = []
        while True:
            ch = self.next()
            if ch == quote:
                return "".join(out)
            if ch in ("\n", ""):
                raise self.fail("literal not terminated")
            out.append(self._escape(quote) if ch == "\\" else ch)

    def _raw_string(self) -> str:
        out: list[str] = []
        while True:
            ch = self.next()
            if ch == "`" and self.peek() == "`":
                self.pos += 1
                out.append("`")
                continue
            if ch == "`":
                return "".join(out)
            if ch == "":
                raise self.fail("literal not terminated")
            out.append(ch)


def _rune(code: int, lexer: _Lexer) -> str:
    # Go's strconv.UnquoteChar refuses surrogates and code points past U+10FFFF.
    if code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        raise lexer.fail("invalid char escape")
    return chr(code)


def tokenize(source: str) -> list[Token]:
    """All tokens of ``source``, ending with an ``eof`` token; raises
    ``ExpressionSyntaxError`` where expr-lang's lexer does."""
    return _Lexer(source).run()
