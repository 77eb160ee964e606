"""HTTP/1.1 for the webhook: one framed request read from memory, one answer's bytes.

The worker (:mod:`webhook.server.worker`) frames each request in its event loop
(:mod:`webhook.server.framing`) and hands a thread the bytes of a complete request;
:func:`exchange` turns them into the answer's bytes: it reads the request line and the
fields (RFC 9112, as strictly as the gunicorn parser the webhook was served through
before), asks the app (:mod:`webhook.server.app`) and writes the answer. Pure: no
socket, no clock but the ``Date`` field, so the tests' in-process client
(``testkit.webhook_client``) runs the very same code.
"""

from __future__ import annotations

import email.utils
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Protocol

from webhook.server.framing import Refuse, dechunk

# gunicorn's defaults, which the webhook used before: the request line and each field
# line (limit_request_line, limit_request_field_size), and the number of fields.
MAX_LINE = 8190
MAX_FIELDS = 100
PLAIN = "text/plain; charset=utf-8"

_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
# The head, checked in one pass: the request line (a method, an origin-form target of
# visible ASCII, RFC 9112 section 3.2.1; "HTTP/" and a version), then field lines: a
# token, a colon, and a value of visible characters, blanks and obs-text, never a CTL
# (RFC 9110 section 5.5; CR and LF would let a field smuggle another). So a blank
# before the colon (RFC 9112 section 5.1), obsolete line folding (a line starting with a
# blank, section 5.2) and a bare CR or LF all fail it.
_HEAD = re.compile(rb"([A-Z]+) (/[!-~]*) HTTP/(\d)\.(\d)(?:\r\n" + _TOKEN
                   + rb":[^\x00-\x08\x0a-\x1f\x7f]*)*")
_VERSION = re.compile(rb"[^\r\n]* HTTP/(\d)\.\d(?:\r\n|$)")
_CONNECTION = re.compile(rb"\r\nconnection:([^\r]*)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Request:
    """One request as the app sees it (the fields are checked, but the app reads none)."""

    method: str
    path: str
    body: bytes
    keep_alive: bool


@dataclass(frozen=True, slots=True)
class Answer:
    """What the app answers: the status, the body and its type, and extra fields."""

    status: int
    body: bytes
    content_type: str = PLAIN
    fields: Sequence[tuple[str, str]] = ()


class App(Protocol):
    """What :func:`exchange` serves: ``webhook.server.app.App``. With ``may_wait`` False
    it answers None where the answer would have to wait (a look-up the cache cannot
    answer): the caller asks again where waiting is allowed."""

    def respond(self, method: str, path: str, body: bytes, *,
                may_wait: bool = True) -> Answer | None: ...


def plain(status: int, text: str, *, fields: Sequence[tuple[str, str]] = ()) -> Answer:
    return Answer(status, (text + "\n").encode(), PLAIN, fields)


def read_request(data: bytes, *, body_start: int, chunked: bool) -> Request | Refuse:
    """The request in ``data`` (one framed request: its head ends at ``body_start``)."""
    head = data[:body_start - 4]
    if head.count(b"\r\n") > MAX_FIELDS:
        return Refuse(431, "too many header fields")
    # No line is longer than the whole head: most heads need no split.
    if len(head) > MAX_LINE and max(map(len, head.split(b"\r\n"))) > MAX_LINE:
        return Refuse(431, "request line or header field too long")
    match = _HEAD.fullmatch(head)
    if match is None:
        version = _VERSION.match(head)
        if version is not None and version.group(1) != b"1":
            return Refuse(505, "HTTP version not supported: HTTP/1.1 only")
        return Refuse(400, "invalid request line or header field")
    if match.group(3) != b"1":
        return Refuse(505, "HTTP version not supported: HTTP/1.1 only")
    connection = _CONNECTION.findall(head)
    body = data[body_start:]
    return Request(
        method=match.group(1).decode("ascii"),
        path=match.group(2).partition(b"?")[0].decode("ascii"),
        body=dechunk(body) if chunked else body,
        # HTTP/1.0 always closes (rollgate's clients all speak 1.1).
        keep_alive=match.group(4) != b"0" and not (connection and _says_close(connection)),
    )


def _says_close(connection: list[bytes]) -> bool:
    """Whether the Connection fields' options include ``close``."""
    return b"close" in {t.strip() for t in b",".join(connection).lower().split(b",")}


# The reason phrases by code: HTTPStatus(code) goes through the enum machinery, several
# Python calls an answer would pay for, most when the CPU caches are cold.
_PHRASES = {status.value: status.phrase for status in HTTPStatus}

_formatted_date = (0, "")


def _date() -> str:
    """The ``Date`` field (RFC 9110 section 6.6.1), formatted once a second (threads
    that race here only format it twice)."""
    global _formatted_date
    second = int(time.time())
    if _formatted_date[0] != second:
        _formatted_date = (second, email.utils.formatdate(second, usegmt=True))
    return _formatted_date[1]


def answer_bytes(answer: Answer, *, close: bool, head_only: bool = False) -> bytes:
    """The answer on the wire; ``close`` adds ``Connection: close`` (the server closes
    after it), ``head_only`` leaves the body out (a HEAD request)."""
    head = (f"HTTP/1.1 {answer.status} {_PHRASES[answer.status]}\r\nDate: {_date()}\r\n"
            f"Content-Type: {answer.content_type}\r\n"
            f"Content-Length: {len(answer.body)}\r\n")
    if answer.fields:
        head += "".join(f"{name}: {value}\r\n" for name, value in answer.fields)
    if close:
        head += "Connection: close\r\n"
    wire = (head + "\r\n").encode("latin-1")
    return wire if head_only else wire + answer.body


def refusal_bytes(refusal: Refuse) -> bytes:
    """A refusal decided before the app is asked; the connection closes after it."""
    return answer_bytes(plain(refusal.status, refusal.reason), close=True)


def exchange(app: App, data: bytes, *, body_start: int, chunked: bool,
             stopping: bool = False, may_wait: bool = True) -> tuple[bytes, bool] | None:
    """The answer to one framed request, and whether the connection stays open for the
    next (not when the client or the refusal says close, nor when ``stopping``); None
    when the app would have to wait and ``may_wait`` is False."""
    request = read_request(data, body_start=body_start, chunked=chunked)
    if isinstance(request, Refuse):
        return refusal_bytes(request), False
    head_only = request.method == "HEAD"
    answer = app.respond("GET" if head_only else request.method, request.path, request.body,
                         may_wait=may_wait)
    if answer is None:
        return None
    keep = request.keep_alive and not stopping
    return answer_bytes(answer, close=not keep, head_only=head_only), keep
