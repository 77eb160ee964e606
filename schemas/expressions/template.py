"""Kargo's template rules for verification arg values (``pkg/expressions/json_templates.go``
at v1.11.2), restated so that the checks and engine mode agree with Kargo.

- Only a value that contains ``${{`` or ``${%`` is a template; anything else (``42``,
  ``a }} b``) is returned as it is.
- Expressions are found left to right (an empty one, ``${{}}``, ends the search: the
  rest of the value is kept as it is): the earliest opener, then the first matching
  closer (``}}`` for ``${{``, ``%}`` for ``${%``) after it, even inside a string literal
  of the expression. An opener without its closer is an error.
- Each expression's result is written as it is when it is a string, else as Go's JSON.
- The whole result, after one trailing newline is set aside: surrounding double quotes
  are stripped (and nothing else happens), else text that Go's ``strconv.ParseFloat``,
  ``strconv.ParseBool`` or ``encoding/json`` reads is that value, which is not a string.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

DELIMITERS: tuple[tuple[str, str], ...] = (("${{", "}}"), ("${%", "%}"))


@dataclass(frozen=True, slots=True)
class Segment:
    """A piece of a template: literal ``text``, or an ``expression`` (``opener`` set)."""

    text: str
    opener: str = ""
    offset: int = 0  # where the expression's text starts in the value

    @property
    def is_expression(self) -> bool:
        return bool(self.opener)


class UnclosedExpression(ValueError):
    def __init__(self, opener: str, closer: str, offset: int) -> None:
        super().__init__(f'unclosed expression: {opener} at character {offset + 1} has no '
                         f'{closer} after it')
        self.offset = offset


def is_template(value: str) -> bool:
    # Both openers start with "${": most values have neither, and are told at once.
    return "${" in value and any(opener in value for opener, _ in DELIMITERS)


def segments(value: str) -> list[Segment]:
    """The template cut as Kargo cuts it; raises ``UnclosedExpression``."""
    out: list[Segment] = []
    if not is_template(value):
        return [Segment(value)]
    base = 0
    rest = value
    while True:
        found = [(rest.find(o), o, c) for o, c in DELIMITERS if o in rest]
        if not found:
            out.append(Segment(rest))
            return out
        start, opener, closer = min(found)
        begin = start + len(opener)
        end = rest.find(closer, begin)
        if end < 0:
            raise UnclosedExpression(opener, closer, base + start)
        out.append(Segment(rest[:start]))
        if end == begin:
            # Kargo reads an empty expression (``${{}}``) as "no more expressions" and
            # appends the rest of the value as it is, openers included.
            out.append(Segment(rest[end + len(closer):]))
            return out
        out.append(Segment(rest[begin:end], opener, base + begin))
        base += end + len(closer)
        rest = rest[end + len(closer):]


_DECIMAL = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_HEX = re.compile(r"[+-]?0[xX](?=_?[0-9a-fA-F.])[0-9a-fA-F_]*(?:\.[0-9a-fA-F_]*)?[pP][+-]?[0-9_]+")
_SPECIAL = re.compile(r"[+-]?(?:inf|infinity)|nan", re.IGNORECASE)
_BOOLS = frozenset({"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false",
                    "False"})


def _go_parse_float(text: str) -> float | None:
    if _SPECIAL.fullmatch(text):
        return float(text)
    if _DECIMAL.fullmatch(text):
        number = float(text)
        return None if number in (float("inf"), float("-inf")) else number
    if _HEX.fullmatch(text):
        try:
            return float.fromhex(text.replace("_", ""))
        except (ValueError, OverflowError):
            return None
    return None


def _finite(text: str) -> float:
    number = float(text)
    if number in (float("inf"), float("-inf")):
        raise ValueError("out of range")
    return number


def _refuse_constant(text: str) -> Any:
    raise ValueError(f"{text} is not JSON")


def result_value(result: str) -> Any:
    """What Kargo makes of the evaluated template text (a ``str`` or some other value)."""
    newline = result.endswith("\n")
    if newline:
        result = result[:-1]
    if len(result) > 1 and result.startswith('"') and result.endswith('"'):
        return result[1:-1] + ("\n" if newline else "")
    number = _go_parse_float(result)
    if number is not None:
        return number
    if result in _BOOLS:
        return result in ("1", "t", "T", "TRUE", "true", "True")
    try:
        return json.loads(result, parse_float=_finite, parse_int=_finite,
                          parse_constant=_refuse_constant)
    except ValueError:
        return result + ("\n" if newline else "")


def go_type_name(value: Any) -> str:
    """Go's ``%T`` of what ``encoding/json`` or Kargo's rules produce, for messages."""
    if value is None:
        return "<nil>"
    return {bool: "bool", float: "float64", int: "float64", str: "string",
            list: "[]interface {}", dict: "map[string]interface {}"}.get(type(value), "?")


def _go_float(number: float) -> str:
    magnitude = abs(number)
    if magnitude != 0 and (magnitude < 1e-6 or magnitude >= 1e21):
        text = repr(number)
        mantissa, _, exponent = text.partition("e")
        sign, digits = exponent[0], exponent[1:].lstrip("0") or "0"
        return f"{mantissa}e{sign}{digits.zfill(1)}"
    return format(Decimal(repr(number)).normalize(), "f")


def _go_json_string(text: str) -> str:
    out = json.dumps(text, ensure_ascii=False)
    for ch, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"),
                        ("\u2028", "\\u2028"), ("\u2029", "\\u2029"), ("\x7f", "\x7f")):
        out = out.replace(ch, escaped)
    return out


def go_json(value: Any) -> str:
    """``encoding/json.Marshal`` of a JSON-like value (sorted keys, HTML escaping, Go's
    float format)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(f"json: unsupported value: {value}")
        return _go_float(value)
    if isinstance(value, str):
        return _go_json_string(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{_go_json_string(str(k))}:{go_json(v)}"
                              for k, v in sorted(value.items())) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(go_json(v) for v in value) + "]"
    raise ValueError(f"json: unsupported type {type(value).__name__}")


def go_quote(text: str) -> str:
    """Go's ``fmt.Sprintf("%q", text)`` (``strconv.Quote``)."""
    out = ['"']
    named = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
             "\v": "\\v", '"': '\\"', "\\": "\\\\"}
    for ch in text:
        code = ord(ch)
        if ch in named:
            out.append(named[ch])
        elif ch.isprintable() or ch == " ":
            out.append(ch)
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\x{code:02x}")
        elif code < 0x10000:
            out.append(f"\\u{code:04x}")
        else:
            out.append(f"\\U{code:08x}")
    out.append('"')
    return "".join(out)
