"""webhook.server.http11: a framed request read from memory, an answer's bytes. Each case
states what an HTTP/1.1 server must do with the bytes (RFC 9112, RFC 9110)."""

from __future__ import annotations

import http.client
import io

import pytest

from webhook.server.framing import Complete, Framer, Refuse, dechunk
from webhook.server.http11 import Answer, Request, answer_bytes, exchange, plain, read_request

BODY = b'{"x": 1}'


def request(head: bytes, body: bytes = BODY) -> Request | Refuse:
    """``head`` (request line and fields, no blank line) with ``body``, framed first."""
    wire = head + b"\r\nContent-Length: %d\r\n\r\n" % len(body) + body
    framer = Framer(max_body_bytes=1 << 20)
    assert framer.feed(wire) == Complete(len(wire))
    return read_request(wire, body_start=framer.body_start, chunked=framer.chunked)


def test_a_request_as_the_api_server_sends_it_is_read_whole():
    got = request(b"POST /validate/stages?timeout=5s HTTP/1.1\r\nHost: w\r\n"
                  b"User-Agent: kube-apiserver-admission\r\nAccept: application/json, */*\r\n"
                  b"Content-Type: application/json\r\nAccept-Encoding: gzip\r\nX-Empty:")
    assert got == Request(method="POST", path="/validate/stages", body=BODY, keep_alive=True)


@pytest.mark.parametrize(("connection", "version", "keep"), [
    (b"", b"HTTP/1.1", True),
    (b"\r\nConnection: close", b"HTTP/1.1", False),
    (b"\r\nConnection: keep-alive, Close", b"HTTP/1.1", False),
    (b"\r\nConnection: keep-alive", b"HTTP/1.0", False),
])
def test_the_connection_is_kept_for_http_1_1_unless_the_client_says_close(connection, version,
                                                                          keep):
    got = request(b"POST /validate/stages " + version + b"\r\nHost: w" + connection)
    assert isinstance(got, Request) and got.keep_alive is keep


def test_close_in_any_connection_field_closes():
    got = request(b"POST / HTTP/1.1\r\nConnection: keep-alive\r\nconnection: close")
    assert isinstance(got, Request) and got.keep_alive is False


@pytest.mark.parametrize(("head", "status"), [
    (b"POST  /validate/stages HTTP/1.1", 400),  # two spaces
    (b"post /validate/stages HTTP/1.1", 400),  # methods are upper case
    (b"POST validate/stages HTTP/1.1", 400),  # not origin-form
    (b"POST http://w/validate/stages HTTP/1.1", 400),  # absolute-form: not a proxy
    (b"POST /a b HTTP/1.1", 400),
    (b"POST /validate/stages HTTP/1.x", 400),
    (b"POST /validate/stages HTTP/2.0", 505),
    (b"POST /validate/stages HTTP/1.1\r\nHost : w", 400),  # blank before the colon
    (b"POST /validate/stages HTTP/1.1\r\nX-A: 1\r\n folded", 400),  # obsolete folding
    (b"POST /validate/stages HTTP/1.1\r\nX-A: a\x00b", 400),
    (b"POST /validate/stages HTTP/1.1\r\nX-A: a\nX-B: b", 400),  # bare LF
    (b"POST /validate/stages HTTP/1.1\r\nNoColon", 400),
    (b"POST /validate/stages HTTP/1.1\r\nX-A: a\rb", 400),  # bare CR
    (b"POST /validate/stages HTTP/1.1\r\n: empty name", 400),
    (b"POST /" + b"a" * 8190 + b" HTTP/1.1", 431),
    (b"POST / HTTP/1.1" + b"".join(b"\r\nX-%d: 1" % i for i in range(100)), 431),
])
def test_a_malformed_head_is_refused(head, status):
    got = request(head)
    assert isinstance(got, Refuse) and got.status == status, got


def test_a_chunked_body_is_decoded_and_its_trailers_dropped():
    chunks = b'4;ext="v"\r\n{"x"\r\n4\r\n: 1}\r\n0\r\nX-Trailer: 1\r\n\r\n'
    wire = b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks
    framer = Framer(max_body_bytes=1 << 20)
    assert framer.feed(wire) == Complete(len(wire))
    assert dechunk(chunks) == BODY
    got = read_request(wire, body_start=framer.body_start, chunked=framer.chunked)
    assert isinstance(got, Request) and got.body == BODY


def _parse(wire: bytes) -> http.client.HTTPResponse:
    class Wire:
        def makefile(self, mode: str) -> io.BytesIO:
            return io.BytesIO(wire)

    response = http.client.HTTPResponse(Wire())  # type: ignore[arg-type]
    response.begin()
    return response


def test_an_answer_is_http_1_1_with_its_length_date_and_fields():
    wire = answer_bytes(plain(405, "Method Not Allowed", fields=(("Allow", "POST"),)),
                        close=False)
    response = _parse(wire)
    assert (response.status, response.reason, response.version) == (405, "Method Not Allowed",
                                                                     11)
    assert response.getheader("Allow") == "POST"
    assert response.getheader("Content-Type") == "text/plain; charset=utf-8"
    assert response.getheader("Date", "").endswith(" GMT")
    assert response.getheader("Connection") is None  # HTTP/1.1 keeps it open
    assert response.read() == b"Method Not Allowed\n"


def test_a_closing_answer_says_so_and_a_head_answer_has_no_body():
    answer = Answer(200, b'{"a": 1}', "application/json")
    assert _parse(answer_bytes(answer, close=True)).getheader("Connection") == "close"
    head = answer_bytes(answer, close=False, head_only=True)
    assert head.endswith(b"\r\n\r\n") and b"Content-Length: 8\r\n" in head


class _Echo:
    """An app that answers with what it was asked, and would have to wait for a body."""

    def respond(self, method: str, path: str, body: bytes, *,
                may_wait: bool = True) -> Answer | None:
        if body and not may_wait:
            return None
        return Answer(200, f"{method} {path} {len(body)}".encode())


def test_exchange_asks_the_app_and_keeps_the_connection_unless_stopping():
    wire = b"HEAD /healthz HTTP/1.1\r\nHost: w\r\n\r\n"
    exchanged = exchange(_Echo(), wire, body_start=len(wire), chunked=False)
    assert exchanged is not None
    reply, keep = exchanged
    assert keep is True
    assert reply.startswith(b"HTTP/1.1 200 OK\r\n") and reply.endswith(b"\r\n\r\n")
    assert b"Content-Length: 14\r\n" in reply  # "GET /healthz 0": HEAD is asked as GET
    stopping = exchange(_Echo(), wire, body_start=len(wire), chunked=False, stopping=True)
    assert stopping is not None and stopping[1] is False
    assert b"Connection: close\r\n" in stopping[0]


def test_exchange_refuses_a_malformed_request_and_closes():
    wire = b"POST /x HTTP/3.0\r\nHost: w\r\n\r\n"
    exchanged = exchange(_Echo(), wire, body_start=len(wire), chunked=False)
    assert exchanged is not None
    reply, keep = exchanged
    assert keep is False
    response = _parse(reply)
    assert response.status == 505 and response.getheader("Connection") == "close"


def test_exchange_answers_nothing_when_the_app_would_have_to_wait_and_may_not():
    wire = b"POST /x HTTP/1.1\r\nHost: w\r\nContent-Length: 2\r\n\r\n{}"
    start = wire.index(b"\r\n\r\n") + 4
    assert exchange(_Echo(), wire, body_start=start, chunked=False, may_wait=False) is None
    exchanged = exchange(_Echo(), wire, body_start=start, chunked=False)
    assert exchanged is not None and exchanged[0].endswith(b"POST /x 2")
