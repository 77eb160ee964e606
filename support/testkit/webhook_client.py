"""An in-process HTTP/1.1 client of the webhook app: a request's bytes go through the
server's own framing (``webhook.server.framing``), request parsing and answer writing
(``webhook.server.http11``), as a worker's thread runs them, and the answer's bytes
through the standard library's HTTP response parser; only the sockets are left out.

    client = Client(webhook.create_app(config))
    reply = client.post("/validate/stages", json=review)
    reply.status_code, reply.get_json()
"""

from __future__ import annotations

import http.client
import io
import json as jsonlib
from dataclasses import dataclass
from email.message import Message
from typing import Any

from webhook.server.app import App
from webhook.server.framing import Complete, Framer, Refuse
from webhook.server.http11 import exchange, refusal_bytes


@dataclass(frozen=True)
class Reply:
    """One answer as the client read it."""

    status_code: int
    headers: Message
    data: bytes

    @property
    def mimetype(self) -> str:
        """The content type without its parameters (``text/plain``)."""
        return (self.headers.get("Content-Type") or "").split(";")[0].strip()

    def get_data(self, *, as_text: bool = False) -> Any:
        return self.data.decode() if as_text else self.data

    def get_json(self) -> Any:
        return jsonlib.loads(self.data)


class _Wire:
    """What ``http.client.HTTPResponse`` reads an answer from."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def makefile(self, mode: str) -> io.BytesIO:
        return io.BytesIO(self._data)


class Client:
    """See the module docstring."""

    def __init__(self, app: App) -> None:
        self.app = app

    def post(self, path: str, *, json: Any = None, data: bytes | str = b"",
             content_type: str = "application/json", chunked: bool = False) -> Reply:
        """POST ``json`` (serialized) or ``data``; ``chunked`` sends the body in chunks
        instead of with a Content-Length."""
        body = jsonlib.dumps(json).encode() if json is not None else (
            data.encode() if isinstance(data, str) else data)
        return self.request("POST", path, body, content_type=content_type, chunked=chunked)

    def get(self, path: str) -> Reply:
        return self.request("GET", path, b"")

    def request(self, method: str, path: str, body: bytes, *,
                content_type: str = "application/json", chunked: bool = False) -> Reply:
        head = f"{method} {path} HTTP/1.1\r\nHost: webhook\r\nContent-Type: {content_type}\r\n"
        if chunked:
            pieces = [body[i:i + 65536] for i in range(0, len(body), 65536)]
            framed = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"
            wire = (head + "Transfer-Encoding: chunked\r\n\r\n").encode() + framed
        else:
            wire = (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body
        framer = Framer(max_body_bytes=self.app.config.max_body_bytes)
        progress = framer.feed(wire)
        if isinstance(progress, Refuse):
            answer = refusal_bytes(progress)
        elif isinstance(progress, Complete):
            exchanged = exchange(self.app, wire[:progress.end], body_start=framer.body_start,
                                 chunked=framer.chunked)
            assert exchanged is not None  # it may wait: there is always an answer
            answer = exchanged[0]
            self.app.after_answers()  # the answer is "written", as a worker calls it then
        else:
            raise AssertionError(f"the server would wait for more of this request: {wire[:200]!r}")
        response = http.client.HTTPResponse(_Wire(answer))  # type: ignore[arg-type]
        response.begin()
        return Reply(response.status, response.msg, response.read())
