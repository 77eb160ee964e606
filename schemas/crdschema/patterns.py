"""CRD ``pattern`` values (Go RE2, as the API server runs them) as Python patterns.

Two differences matter for the patterns CRDs use: Go's ``\\w``, ``\\d`` and ``\\s`` are
ASCII-only (``re.ASCII``), and Go's ``$`` (without the ``m`` flag) matches only at the
very end of the text where Python's also matches before a final newline (``\\Z``).
"""

from __future__ import annotations

import re
from functools import lru_cache


def _end_anchored(pattern: str) -> str:
    """``pattern`` with each ``$`` outside a character class written as ``\\Z``."""
    out: list[str] = []
    in_class = False
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            out.append(pattern[index:index + 2])
            index += 2
            continue
        if char == "[" and not in_class:
            in_class = True
        elif char == "]" and in_class:
            in_class = False
        out.append("\\Z" if char == "$" and not in_class else char)
        index += 1
    return "".join(out)


@lru_cache(maxsize=512)
def compiled(pattern: str) -> re.Pattern[str] | None:
    """The compiled pattern (searched, as Go's ``MatchString``), or None when Python
    cannot read it (then the pattern is not checked, rather than guessed)."""
    try:
        return re.compile(_end_anchored(pattern), re.ASCII)
    except re.error:
        return None
