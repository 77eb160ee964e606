"""Where one HTTP/1.1 request ends in a byte stream, decided before any thread sees it.

The webhook's worker (:mod:`webhook.server.worker`) reads requests in its event loop and hands
a request to a thread only once all of it has arrived, so a client that trickles bytes
costs a file descriptor and a buffer, never a thread. This module is the pure part of
that: :class:`Framer` is fed the bytes received so far and says "need more", "complete
at offset N" or "refuse with status S". It reads only what framing needs (the end of
the header block, Content-Length, Transfer-Encoding, Expect) and checks a chunked body
as strictly as RFC 9112 (and gunicorn's parser, which the webhook served through
before) does, so a malformed chunked body is a 400 here and :func:`dechunk` only ever
decodes a body that passed. Reading the request line and the fields is
:mod:`webhook.server.http11`'s, which refuses what this module lets through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

# The longest chunk-size line, and trailer section (32 field lines), as gunicorn's.
MAX_CHUNK_LINE = 8190
MAX_TRAILER_BYTES = 8190 * 32
# A header block larger than this is refused (431) before it is parsed; the parser's own
# limits (webhook.server.http11: lines of 8190 bytes, 100 fields) apply to the rest.
MAX_HEADER_BYTES = 64 * 1024

# RFC 9112 section 7.1.1 chunk extensions.
_TOKEN = rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+"
_QUOTED = rb'"(?:[\t !#-\[\]-~\x80-\xff]|\\[\t -~\x80-\xff])*"'
_CHUNK_EXT = re.compile(
    rb"(?:[ \t]*;[ \t]*" + _TOKEN + rb"(?:[ \t]*=[ \t]*(?:" + _TOKEN + rb"|" + _QUOTED + rb"))?)*")
_HEX = frozenset(b"0123456789abcdefABCDEF")
# The only fields framing needs, found in one pass over the header block (a field name
# with blanks before its colon is not matched: webhook.server.http11 refuses it anyway).
_FRAMING_FIELDS = re.compile(rb"\r\n(content-length|transfer-encoding|expect):([^\r\n]*)",
                             re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Complete:
    """The request is ``buf[:end]``; what follows is the start of the next one."""

    end: int


@dataclass(frozen=True, slots=True)
class Refuse:
    """Answer ``status`` with ``reason`` and close. ``drain`` says how much of what the
    client may still send is read and dropped first, so it can read the answer (a
    close with unread data would reset the connection): ``body_left`` bytes of a body
    whose length is known, or ``None`` for "until the client closes" (bounded by the
    caller's caps)."""

    status: int
    reason: str
    body_left: int | None = None


Progress = Complete | Refuse | None  # None: need more bytes


class Framer:
    """Frames one request. Call :meth:`feed` with the whole buffer received so far
    (it only grows); the framer remembers how far it has looked."""

    __slots__ = (
        "_body_start",
        "_chunk_state",
        "_data",
        "_length",
        "_limit",
        "_max_wire",
        "_mode",
        "_pos",
        "expect_continue",
    )

    def __init__(self, *, max_body_bytes: int) -> None:
        self._limit = max_body_bytes
        # Chunk framing may add 5+ bytes per data byte (1-byte chunks); bound the wire size.
        self._max_wire = 2 * max_body_bytes + MAX_HEADER_BYTES
        self._body_start = -1
        self._mode: Literal["length", "chunked"] = "length"
        self._length = 0
        self._pos = 0
        self._chunk_state: Literal["size", "trailers"] = "size"
        self._data = 0
        self.expect_continue = False

    @property
    def headers_done(self) -> bool:
        return self._body_start >= 0

    @property
    def body_start(self) -> int:
        """Where the body starts (after the blank line), once the headers are done."""
        return self._body_start

    @property
    def chunked(self) -> bool:
        """The body is chunked (:func:`dechunk` decodes it), not of a declared length."""
        return self._mode == "chunked"

    def feed(self, buf: bytes | bytearray) -> Progress:
        if self._body_start < 0:
            # Resume where the last look stopped: a client trickling its headers one
            # byte at a time must not make each byte cost a scan of all of them.
            end = buf.find(b"\r\n\r\n", self._pos)
            if end < 0:
                if len(buf) > MAX_HEADER_BYTES:
                    return Refuse(431, "request header fields too large")
                self._pos = max(0, len(buf) - 3)
                return None
            if end > MAX_HEADER_BYTES:
                return Refuse(431, "request header fields too large")
            refused = self._read_head(bytes(buf[:end]))
            if refused is not None:
                return refused
            self._body_start = self._pos = end + 4
        if self._mode == "length":
            end = self._body_start + self._length
            return Complete(end) if len(buf) >= end else None
        return self._scan_chunks(buf)

    def body_received(self, buf: bytes | bytearray) -> int:
        """Bytes of the body (as sent on the wire) already in ``buf``."""
        return max(0, len(buf) - self._body_start) if self._body_start >= 0 else 0

    def _read_head(self, head: bytes) -> Refuse | None:
        lengths: list[bytes] = []
        codings: list[bytes] = []
        for name, value in _FRAMING_FIELDS.findall(head):
            name, value = name.lower(), value.strip(b" \t").lower()
            if name == b"content-length":
                lengths.append(value)
            elif name == b"transfer-encoding":
                codings += [c.strip(b" \t") for c in value.split(b",")]
            elif value == b"100-continue":
                self.expect_continue = True
        if codings:
            # Framing by anything but a final "chunked" is unknowable for a request, and
            # both headers at once is the classic request-smuggling shape: RFC 9112
            # section 6.3 refuses both.
            if lengths or codings[-1] != b"chunked" or codings.count(b"chunked") != 1:
                return Refuse(400, "unsupported Transfer-Encoding")
            self._mode = "chunked"
            return None
        if len(lengths) > 1:
            return Refuse(400, "more than one Content-Length")
        if lengths:
            if not lengths[0].isdigit():
                return Refuse(400, "invalid Content-Length")
            self._length = int(lengths[0])
            if self._length > self._limit:
                return Refuse(413, f"request body is larger than {self._limit} bytes",
                              body_left=self._length)
        return None

    def _scan_chunks(self, buf: bytes | bytearray) -> Progress:
        if len(buf) > self._max_wire:
            return Refuse(413, f"request body is larger than {self._limit} bytes")
        pos = self._pos
        while True:
            if self._chunk_state == "trailers":
                if len(buf) - pos < 2:
                    break
                if buf[pos:pos + 2] == b"\r\n":
                    return Complete(pos + 2)
                end = buf.find(b"\r\n\r\n", pos)
                section = buf[pos:end + 2 if end >= 0 else len(buf)]
                if section.count(b"\n") != section.count(b"\r\n"):
                    return Refuse(400, "malformed chunked body: bare LF in trailers")
                if end < 0:
                    if len(section) > MAX_TRAILER_BYTES:
                        return Refuse(400, "malformed chunked body: trailers too large")
                    break
                if end - pos > MAX_TRAILER_BYTES:
                    return Refuse(400, "malformed chunked body: trailers too large")
                return Complete(end + 4)
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if len(buf) - pos > MAX_CHUNK_LINE:
                    return Refuse(400, "malformed chunked body: chunk-size line too long")
                break
            if eol - pos > MAX_CHUNK_LINE:
                return Refuse(400, "malformed chunked body: chunk-size line too long")
            size = _chunk_size(bytes(buf[pos:eol]))
            if size is None:
                return Refuse(400, "malformed chunked body: invalid chunk size")
            if size == 0:
                pos = eol + 2
                self._chunk_state = "trailers"
                continue
            if self._data + size > self._limit:
                return Refuse(413, f"request body is larger than {self._limit} bytes")
            data_end = eol + 2 + size
            if len(buf) < data_end + 2:
                break
            if buf[data_end:data_end + 2] != b"\r\n":
                return Refuse(400, "malformed chunked body: chunk not followed by CRLF")
            self._data += size
            pos = data_end + 2
        self._pos = pos
        return None


def _chunk_size(line: bytes) -> int | None:
    """The size of a chunk-size line, None when it is not one (RFC 9112 section 7.1)."""
    size, semicolon, ext = line.partition(b";")
    if semicolon:
        if b"\r" in ext or not _CHUNK_EXT.fullmatch(b";" + ext):
            return None
        size = size.rstrip(b" \t")
    if not size or any(c not in _HEX for c in size):
        return None
    return int(size, 16)


def dechunk(body: bytes) -> bytes:
    """The data of a chunked body that :class:`Framer` completed (the chunks from the
    body's start to the end it found; trailers are dropped, as nothing reads them)."""
    parts: list[bytes] = []
    pos = 0
    while True:
        eol = body.index(b"\r\n", pos)
        size = int(body[pos:eol].partition(b";")[0].rstrip(b" \t"), 16)
        if size == 0:
            return b"".join(parts)
        parts.append(body[eol + 2:eol + 2 + size])
        pos = eol + 4 + size
