"""``python -m webhook`` (gunicorn, TLS) on a free loopback port, certificates from
``certs.generate``: the real server as the HTTP tests and the hostile-client suite
start it, reached over HTTPS as the API server would reach it."""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import certs
from certs.generate import CertPaths
from testkit.net import free_port
from testkit.paths import REPO_ROOT

START_TIMEOUT = 30.0  # seconds to answer /readyz: a start-up wait, not a speed assertion


class ServerNotStarted(RuntimeError):
    """The server exited, or did not answer /readyz in time; its log is in the message."""


@dataclass
class WebhookServer:
    """A running ``python -m webhook``: its port, the CA its certificate chains to, the
    log it writes and its process (a test may signal it)."""

    port: int
    ca_file: Path
    log: Path
    proc: subprocess.Popen[bytes]

    def context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def connect(self, context: ssl.SSLContext | None = None, *,
                timeout: float = 10.0) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=timeout,
                                           context=context or self.context())

    def served_cert(self) -> bytes:
        """The DER certificate a verified handshake gets now."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as raw, \
                self.context().wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            cert = tls.getpeercert(binary_form=True)
            assert cert is not None  # a verified handshake: the server sent one
            return cert

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    def ready(self) -> bool:
        """Whether /readyz answers 200 now."""
        try:
            conn = self.connect()
            try:
                conn.request("GET", "/readyz")
                return conn.getresponse().status == 200
            finally:
                conn.close()
        except OSError:
            return False


def _wait_ready(server: WebhookServer) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not server.ready():
        if server.proc.poll() is not None or time.monotonic() > deadline:
            raise ServerNotStarted(f"webhook did not start:\n{server.log_text()}")
        time.sleep(0.1)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@contextlib.contextmanager
def serve(directory: Path, *, workers: int, threads: int, args: Sequence[str] = (),
          env: Mapping[str, str] | None = None, repo: Path = REPO_ROOT,
          ) -> Iterator[tuple[WebhookServer, CertPaths]]:
    """Start the server with fresh certificates in ``directory/certs`` and its log in
    ``directory/webhook.log``, ``--workers``/``--threads`` and ``args`` on its command
    line, ``env`` added to the environment, run from ``repo`` (a benchmark's baseline
    runs another checkout); yield it once /readyz answers, with its certificate paths;
    SIGTERM it after."""
    paths = certs.generate(directory / "certs")
    port = free_port()
    log = directory / "webhook.log"
    # A multiprocess metrics directory of the test run's own must not leak into it.
    child_env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    child_env.update(env or {})
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "webhook", "--bind", f"127.0.0.1:{port}",
             "--tls-cert-file", str(paths.tls_cert), "--tls-key-file", str(paths.tls_key),
             "--workers", str(workers), "--threads", str(threads), *args],
            cwd=repo, stdout=out, stderr=subprocess.STDOUT, env=child_env,
        )
    server = WebhookServer(port, paths.ca_cert, log, proc)
    try:
        _wait_ready(server)
        yield server, paths
    finally:
        _stop(proc)
