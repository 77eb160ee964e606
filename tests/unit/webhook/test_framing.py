"""webhook.server.framing: where a request ends, decided before a thread sees it. Each case
states what an HTTP/1.1 server must do with the bytes (RFC 9112), as gunicorn does."""

from __future__ import annotations

import pytest

from webhook.server.framing import MAX_HEADER_BYTES, Complete, Framer, Refuse

LIMIT = 1000
HEAD = b"POST /validate/stages HTTP/1.1\r\nHost: x\r\n"


def frame(data: bytes, *, step: int | None = None) -> object:
    """Feed ``data`` whole, or ``step`` bytes at a time; the first decision."""
    framer = Framer(max_body_bytes=LIMIT)
    buf = bytearray()
    for i in range(0, len(data), step or len(data) or 1):
        buf += data[i:i + (step or len(data))]
        progress = framer.feed(buf)
        if progress is not None:
            return progress
    return None


@pytest.mark.parametrize("step", [None, 1, 7])
def test_content_length_request_completes_at_its_end(step):
    request = HEAD + b"Content-Length: 5\r\n\r\nhello"
    assert frame(request + b"GET / HTTP/1.1\r\n", step=step) == Complete(len(request))
    assert frame(request[:-1], step=step) is None


def test_a_request_without_a_body_completes_after_its_headers():
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
    assert frame(request) == Complete(len(request))


@pytest.mark.parametrize("step", [None, 1, 5])
def test_chunked_request_completes_after_the_last_chunk_and_trailers(step):
    body = b"5\r\nhello\r\n3;name=\"v\"\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n"
    request = HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + body
    assert frame(request, step=step) == Complete(len(request))
    assert frame(request[:-1], step=step) is None
    plain_end = HEAD + b"Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    assert frame(plain_end, step=step) == Complete(len(plain_end))


@pytest.mark.parametrize(("body", "why"), [
    (b"zz\r\nhello\r\n0\r\n\r\n", "invalid chunk size"),
    (b"-5\r\nhello\r\n0\r\n\r\n", "invalid chunk size"),
    (b"\r\nhello\r\n0\r\n\r\n", "invalid chunk size"),
    (b"5\r\nhelloXX0\r\n\r\n", "not followed by CRLF"),
    (b"5;=x\r\nhello\r\n0\r\n\r\n", "invalid chunk size"),
    (b"5; a\rb\r\nhello\r\n0\r\n\r\n", "invalid chunk size"),
    (b"5\r\nhello\r\n0\r\nX: 1\nY: 2\r\n\r\n", "bare LF"),
    (b"1" * 9000, "chunk-size line too long"),
])
def test_malformed_chunked_bodies_are_a_400(body, why):
    refusal = frame(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + body)
    assert isinstance(refusal, Refuse) and refusal.status == 400
    assert why in refusal.reason


@pytest.mark.parametrize("headers", [
    b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: gzip\r\n",
    b"Transfer-Encoding: chunked, chunked\r\n",
    b"Content-Length: 5\r\nContent-Length: 6\r\n",
    b"Content-Length: -5\r\n",
    b"Content-Length: 0x10\r\n",
])
def test_ambiguous_framing_is_a_400(headers):
    refusal = frame(HEAD + headers + b"\r\nhello")
    assert isinstance(refusal, Refuse) and refusal.status == 400


def test_a_declared_length_over_the_limit_is_refused_at_once_with_what_to_drain():
    refusal = frame(HEAD + b"Content-Length: %d\r\n\r\nabc" % (LIMIT + 1))
    assert refusal == Refuse(413, f"request body is larger than {LIMIT} bytes",
                             body_left=LIMIT + 1)


def test_a_body_exactly_at_the_limit_is_accepted():
    request = HEAD + b"Content-Length: %d\r\n\r\n" % LIMIT + b"a" * LIMIT
    assert frame(request) == Complete(len(request))


def test_chunked_data_over_the_limit_is_refused_without_a_length_to_drain():
    chunk = b"%x\r\n%s\r\n" % (LIMIT // 2, b"a" * (LIMIT // 2))
    under = HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunk * 2 + b"0\r\n\r\n"
    assert isinstance(frame(under), Complete)
    over = HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunk * 2 + b"1\r\n"
    assert frame(over) == Refuse(413, f"request body is larger than {LIMIT} bytes")


def test_tiny_chunks_cannot_buffer_more_than_twice_the_limit():
    flood = HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + b"1\r\na\r\n" * (LIMIT + 1000)
    refusal = frame(flood)
    assert isinstance(refusal, Refuse) and refusal.status == 413


def test_headers_past_the_cap_are_a_431():
    refusal = frame(HEAD + b"X-Pad: " + b"a" * MAX_HEADER_BYTES)
    assert isinstance(refusal, Refuse) and refusal.status == 431


def test_expect_continue_is_noticed_once_the_headers_are_in():
    framer = Framer(max_body_bytes=LIMIT)
    buf = bytearray(HEAD + b"Content-Length: 5\r\nExpect: 100-Continue\r\n\r\n")
    assert framer.feed(buf) is None
    assert framer.headers_done and framer.expect_continue
