"""Loopback helpers the kit, the harness, tests and benches share: a free port, and the
JSON answer of a stub HTTP server's handler."""

from __future__ import annotations

import json
import socket
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler
from typing import Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now (the kernel's pick; closed again
    before returning, so a server started next can bind it, and a client that connects
    to it meanwhile is refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def send_json(handler: BaseHTTPRequestHandler, status: int, body: Any, *,
              headers: Mapping[str, str] | None = None) -> None:
    """Answer ``body`` as JSON (with ``headers`` besides) from a stub server's handler."""
    data = json.dumps(body).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)
