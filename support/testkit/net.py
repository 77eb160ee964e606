"""A free loopback port: the one helper the kit, the harness, tests and benches share."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now (the kernel's pick; closed again
    before returning, so a server started next can bind it, and a client that connects
    to it meanwhile is refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
