"""A plugin download server on 127.0.0.1 for the digest pre-flight tests.

Real HTTPS with a CA the test makes (``certs.pki``, the one place that builds
certificates), so the reconciler's TLS verification is exercised as in production: the
client trusts the server only through ``ca_file`` (``--plugins-ca-file``). Used by the
unit tests of ``reconciler.plugins.digests`` and by tests/e2e/plugins/test_rollout_plugins.py
(where the reconciler process downloads from it).

Routes are set per test: ``serve(path, body)``, ``redirect(path, to)``, ``stall(path)``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from certs.pki import build_ca, cert_pem, issue_certificate, key_pem


def sha256(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def elf_stand_in(label: str, *, copies: int = 2048, machine: int = 62) -> bytes:
    """A file the pre-flight takes for a Linux executable (the header of a 64-bit
    little-endian ELF executable for ``machine``, x86-64 by default) followed by
    ``label`` ``copies`` times: what tests serve where no real plugin has to run."""
    header = (b"\x7fELF" + bytes([2, 1, 1, 0]) + bytes(8) + (2).to_bytes(2, "little")
              + machine.to_bytes(2, "little"))
    return header + (label.encode() + b"\n") * copies


class PluginServer:
    """An HTTP(S) server in a thread; ``tls=False`` makes the plain-http one."""

    def __init__(self, directory: Path, *, tls: bool = True, names: tuple[str, ...] = (),
                 host: str = "127.0.0.1", ca: tuple[Path, Path] | None = None) -> None:
        """``names``: more DNS names the certificate is for (reached through a proxy
        that resolves them to 127.0.0.1). ``host``: the address it binds and is named
        by (pods reach the node's bridge address, not the host's loopback). ``ca``: the
        certificate and key of a CA to issue from (one an image trusts); by default a
        new one."""
        self.directory = directory
        self.tls = tls
        self.names = names
        self.host = host
        self._ca = ca
        self.routes: dict[str, tuple[str, Any]] = {}
        self.requests: list[str] = []  # paths asked for, in order
        self.hosts: list[str] = []  # the Host header of each request
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0
        self.ca_file = directory / "plugins-ca.crt"
        if tls:
            self._make_certificates()

    def _make_certificates(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        if self._ca is None:
            ca, ca_key = build_ca(common_name="rollgate test plugins CA",
                                  lifetime=dt.timedelta(days=1))
        else:
            ca = x509.load_pem_x509_certificate(self._ca[0].read_bytes())
            loaded = serialization.load_pem_private_key(self._ca[1].read_bytes(), None)
            assert isinstance(loaded, ec.EllipticCurvePrivateKey), "the CA key is EC"
            ca_key = loaded
        cert, key = issue_certificate(
            ca, ca_key, common_name=self.host,
            sans=[self.host, "127.0.0.1", "localhost", *self.names], server=True,
            lifetime=dt.timedelta(days=1),
        )
        self.ca_file.write_bytes(cert_pem(ca))
        self._cert_file = self.directory / "plugins-server.crt"
        self._key_file = self.directory / "plugins-server.key"
        self._cert_file.write_bytes(cert_pem(cert))
        self._key_file.write_bytes(key_pem(key))

    # -- routes ---------------------------------------------------------------------------
    def serve(self, path: str, body: bytes) -> str:
        """Serve ``body`` at ``path``; returns its URL."""
        self.routes[path] = ("body", body)
        return self.url(path)

    def redirect(self, path: str, to: str, *, code: int = 302) -> str:
        self.routes[path] = ("redirect", (code, to))
        return self.url(path)

    def stall(self, path: str, *, first: bytes = b"x", seconds: float = 30.0) -> str:
        """Send ``first`` and then nothing for ``seconds`` (a server that hangs)."""
        self.routes[path] = ("stall", (first, seconds))
        return self.url(path)

    def url(self, path: str) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.host}:{self.port}{path}"

    # -- life cycle -----------------------------------------------------------------------
    def start(self) -> PluginServer:
        """Start (or restart on the same port, after ``stop``)."""
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                outer.requests.append(self.path)
                outer.hosts.append(self.headers.get("Host", ""))
                kind, value = outer.routes.get(self.path, ("missing", None))
                if kind == "body":
                    self.send_response(200)
                    self.send_header("Content-Type", "application/octet-stream")
                    self.send_header("Content-Length", str(len(value)))
                    self.end_headers()
                    self.wfile.write(value)
                elif kind == "redirect":
                    code, to = value
                    self.send_response(code)
                    self.send_header("Location", to)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif kind == "stall":
                    first, seconds = value
                    self.send_response(200)
                    self.end_headers()  # no Content-Length: the body runs until close
                    self.wfile.write(first)
                    self.wfile.flush()
                    time.sleep(seconds)
                    self.close_connection = True
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        server = ThreadingHTTPServer((self.host, self.port), Handler)
        server.daemon_threads = True
        if self.tls:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(self._cert_file, self._key_file)
            server.socket = context.wrap_socket(server.socket, server_side=True)
        self.port = server.server_address[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True,
                                        name="plugin-server")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; the port then refuses connections (a server that is down)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> PluginServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
