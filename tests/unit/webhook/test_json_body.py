"""The webhook reads a request body as ``json.loads`` would (webhook.server.app.decode_json):
the same value, or the same kind of error, whatever the body."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.server.app import decode_json


def _outcome(read: Any, raw: bytes) -> tuple[str, str]:
    """What reading ``raw`` gives: the value as canonical JSON text (NaN compared as
    text too), or the exception's type."""
    try:
        value = read(raw)
    except (ValueError, RecursionError) as exc:
        return "raised", type(exc).__name__
    return "value", json.dumps(value, sort_keys=True)


BODIES = {
    "object": b'{"a": 1, "b": [true, null, "x"]}',
    "trailing JSON whitespace": b'{"a": 1} \t\r\n',
    "trailing form feed": b'{"a": 1}\x0c',
    "trailing vertical tab": b'{"a": 1}\x0b',
    "trailing no-break space": '{"a": 1}\u00a0'.encode(),
    "extra data": b'{"a": 1} {"b": 2}',
    "leading blank": b' {"a": 1}',
    "an array": b"[1, 2]",
    "UTF-8 BOM": b'\xef\xbb\xbf{"a": 1}',
    "UTF-16-LE": '{"a": "\u00e8"}'.encode("utf-16-le"),
    "UTF-16-BE": '{"a": 1}'.encode("utf-16-be"),
    "UTF-16 with BOM": '{"a": 1}'.encode("utf-16"),
    "UTF-32-LE": '{"a": 1}'.encode("utf-32-le"),
    "lone surrogate, escaped": b'{"a": "\\ud800"}',
    "lone surrogate, raw": b'{"a": "\xed\xa0\x80"}',
    "invalid UTF-8": b'{"a": "\xff"}',
    "NaN and Infinity": b'{"a": NaN, "b": -Infinity}',
    "integer beyond 64 bits": b'{"a": 123456789012345678901234567890}',
    "unterminated": b'{"a": ',
    "empty": b"",
    "deeply nested": b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
}


@pytest.mark.parametrize("raw", list(BODIES.values()), ids=list(BODIES))
def test_a_body_reads_as_json_loads_reads_it(raw: bytes) -> None:
    assert _outcome(decode_json, raw) == _outcome(json.loads, raw)


def test_what_the_api_server_sends_is_read_without_json_loads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path is taken for a UTF-8 object, and left for the rest."""
    calls: list[bytes] = []
    loads = json.loads

    def counted(raw: bytes) -> Any:
        calls.append(raw)
        return loads(raw)

    monkeypatch.setattr(json, "loads", counted)
    decode_json(BODIES["object"])
    decode_json(BODIES["trailing JSON whitespace"])
    assert calls == []
    decode_json(BODIES["UTF-16-LE"])
    with pytest.raises(ValueError, match="Extra data"):
        decode_json(BODIES["trailing form feed"])
    assert calls == [BODIES["UTF-16-LE"], BODIES["trailing form feed"]]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(value=st.dictionaries(st.text(max_size=8), _JSON, max_size=4),
       ensure_ascii=st.booleans(), indent=st.sampled_from([None, 0, 2]),
       after=st.sampled_from(["", " ", "\n", "\x0c", " x"]),
       encoding=st.sampled_from(["utf-8", "utf-16-le", "utf-16-be", "utf-32"]))
def test_any_object_reads_as_json_loads_reads_it(value: dict[str, Any], ensure_ascii: bool,
                                                 indent: int | None, after: str,
                                                 encoding: str) -> None:
    text = json.dumps(value, ensure_ascii=ensure_ascii, indent=indent) + after
    try:
        raw = text.encode(encoding, "surrogatepass")
    except UnicodeEncodeError:
        raw = text.encode("utf-8", "surrogatepass")
    assert _outcome(decode_json, raw) == _outcome(json.loads, raw)
