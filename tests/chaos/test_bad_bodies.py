"""Broken and oversized request bodies get a plain 4xx that the client can read, with
``Connection: close`` and the connection closed where the client can see it; never a
500 or a stack trace (before: malformed chunked bodies answered 500 and logged a
traceback; the 413 said keep-alive and was lost to a client that sent its whole body
first)."""

from __future__ import annotations

import contextlib
import threading

import pytest

from harness.kits.chaos import NORMAL_REVIEW, closed_by_server, probing, read_response, until_probed

LIMIT = 8 * 1024 * 1024
HEAD = b"POST /validate/stages HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\n"
CHUNKED = HEAD + b"Transfer-Encoding: chunked\r\n\r\n"
FIRST = b"%x\r\n%s\r\n" % (len(NORMAL_REVIEW), NORMAL_REVIEW)

BROKEN_CHUNKED = {
    "bad chunk size": CHUNKED + b"zz\r\n" + NORMAL_REVIEW + b"\r\n0\r\n\r\n",
    "negative chunk size": CHUNKED + b"-1\r\nx\r\n0\r\n\r\n",
    "chunk without CRLF": CHUNKED + FIRST[:-2] + b"XX0\r\n\r\n",
    "bad chunk extension": CHUNKED + b"%x;=\r\n%s\r\n0\r\n\r\n" % (len(NORMAL_REVIEW),
                                                                  NORMAL_REVIEW),
    "bare LF in trailers": CHUNKED + FIRST + b"0\r\nX-Trailer: 1\nX-Other: 2\r\n\r\n",
    "chunk-size line too long": CHUNKED + b"0" * 9000,
    "both lengths": HEAD + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                    + FIRST + b"0\r\n\r\n",
    "gzip only": HEAD + b"Transfer-Encoding: gzip\r\n\r\nabc",
    "two lengths": HEAD + b"Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
}


def _assert_plain_close(status_headers_body, expected: int) -> None:
    status, headers, body = status_headers_body
    assert status == expected, (status, body)
    assert headers["connection"] == "close"
    assert headers["content-type"].startswith("text/plain")
    assert body.strip()


@pytest.mark.parametrize("request_bytes", BROKEN_CHUNKED.values(), ids=BROKEN_CHUNKED.keys())
def test_broken_framing_is_a_400_that_closes(webhook, request_bytes):
    with probing(webhook, "broken chunked bodies") as probes:
        for _ in until_probed(probes):
            with webhook.tls() as sock:
                sock.sendall(request_bytes)
                _assert_plain_close(read_response(sock), 400)
                assert closed_by_server(sock)


def test_truncated_chunked_bodies_are_cut_or_dropped(webhook):
    with probing(webhook, "truncated chunked bodies"):
        # The client stops sending mid-body and waits: a 408 at the deadline.
        with webhook.tls() as stalled:
            stalled.sendall(CHUNKED + FIRST[:50])
            _assert_plain_close(read_response(stalled), 408)
            assert closed_by_server(stalled)
        # The client goes away mid-body: nothing to answer, the server just closes.
        for _ in range(5):
            gone = webhook.tls()
            gone.sendall(CHUNKED + FIRST + b"0\r\n")  # the last chunk, no final CRLF
            gone.close()


def _oversized_request() -> bytes:
    body = b'{"x": "' + b"a" * LIMIT + b'"}'
    return HEAD + b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_oversized_body_sent_whole_first_gets_a_readable_413(webhook):
    request = _oversized_request()
    with probing(webhook, "oversized bodies, sent whole first") as probes:
        for _ in until_probed(probes):
            with webhook.tls() as sock:
                sock.sendall(request)  # all of it before reading anything
                _assert_plain_close(read_response(sock), 413)
                # A client that reuses the connection anyway finds it closed: its next
                # request gets no answer on it, and it can tell.
                with contextlib.suppress(OSError):
                    sock.sendall(HEAD + b"Content-Length: %d\r\n\r\n" % len(NORMAL_REVIEW)
                                 + NORMAL_REVIEW)
                assert closed_by_server(sock)


def test_oversized_body_then_reuse_with_http_client(webhook):
    """http.client honours ``Connection: close``: it reopens for the next request on
    the same connection object, so that request is answered, not lost."""
    conn = webhook.https()
    body = b'{"x": "' + b"a" * LIMIT + b'"}'
    try:
        with probing(webhook, "oversized body, then reuse") as probes:
            for _ in until_probed(probes):
                conn.request("POST", "/validate/stages", body=body,
                             headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                assert resp.status == 413 and resp.getheader("Connection") == "close"
                assert b"larger than" in resp.read()
                assert webhook.review(conn) >= 0  # same object, next request: answered
    finally:
        conn.close()


def _send_chunked_then_read(webhook, chunk: bytes, count: int) -> None:
    with webhook.tls() as sock:
        sock.sendall(CHUNKED)

        def send_all() -> None:
            with contextlib.suppress(OSError):
                for _ in range(count):
                    sock.sendall(chunk)
                sock.sendall(b"0\r\n\r\n")

        sender = threading.Thread(target=send_all, daemon=True)
        sender.start()
        sender.join(10)  # all of it sent (or cut) before reading
        _assert_plain_close(read_response(sock), 413)
        assert closed_by_server(sock)


def test_oversized_chunked_body_gets_a_413(webhook):
    piece = b"a" * (1024 * 1024)
    chunk = b"%x\r\n%s\r\n" % (len(piece), piece)
    with probing(webhook, "oversized chunked bodies") as probes:
        for _ in until_probed(probes):
            _send_chunked_then_read(webhook, chunk, 10)  # 10 MiB of chunks, then the end


def test_expect_continue_gets_413_before_the_body_or_100_then_the_answer(webhook):
    with webhook.tls() as sock:
        sock.sendall(HEAD + b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % (LIMIT + 1))
        _assert_plain_close(read_response(sock), 413)  # no body was sent at all
    with webhook.tls() as sock:
        sock.sendall(HEAD + b"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n"
                     % len(NORMAL_REVIEW))
        assert sock.recv(100) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(NORMAL_REVIEW)
        status, headers, body = read_response(sock)
        assert status == 200 and b'"allowed":true' in body
        assert headers.get("connection") != "close"  # HTTP/1.1: kept alive unless said


def test_many_large_uploads_at_once_are_refused_biggest_first(webhook):
    """12 uploads of 6 MiB (of 8 MiB announced) at once, then a stall: more than a
    worker may hold in memory (32 MiB). The largest are refused with a 503 as the
    budget runs out, the rest get a 408 at the deadline; reviews are answered all along."""
    part = b"a" * (6 * 1024 * 1024)
    head = HEAD + b"Content-Length: %d\r\n\r\n" % LIMIT
    socks = []
    statuses: list[int | None] = []

    def upload() -> None:
        sock = webhook.tls()
        socks.append(sock)
        with contextlib.suppress(OSError):
            sock.sendall(head + part)

    with probing(webhook, "12 large uploads at once"):
        uploaders = [threading.Thread(target=upload, daemon=True) for _ in range(12)]
        for t in uploaders:
            t.start()
        for t in uploaders:
            t.join(10)
        for sock in socks:
            try:
                statuses.append(read_response(sock)[0])
            except OSError:
                statuses.append(None)
            assert closed_by_server(sock)
            sock.close()
    assert 503 in statuses, statuses
    assert set(statuses) <= {503, 408, None}, statuses
