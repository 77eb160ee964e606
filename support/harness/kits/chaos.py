"""The real webhook server under hostile and broken clients: a running
``python -m webhook`` (gunicorn, TLS, the Deployment's 2 workers x 4 threads) and the
tools the attacks share: raw TLS sockets, a raw response reader, and a prober that
keeps sending a normal review while an attack runs and records how long each took.

The attacks are bounded versions of real ones (seconds, tens to a few hundred
sockets), against a server started with a short request deadline and a small
connection cap so the suite stays fast and within a few hundred file descriptors.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import ssl
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from testkit import reviews
from testkit.webhook_server import WebhookServer
from testkit.webhook_server import serve as serve_webhook

REQUEST_TIMEOUT = 2.0  # the server's --request-timeout in this suite
MAX_CONNECTIONS = 32  # the server's --max-connections (per worker) in this suite
WORKERS, THREADS = 2, 4  # as manifests/webhook/deployment.yaml runs it
LIVENESS_SECONDS = 10.0  # "answered at all": the only timing the suite asserts

NORMAL_REVIEW = json.dumps(reviews.review(reviews.valid_stage(), uid="probe")).encode()


@dataclass
class Server(WebhookServer):
    """The running server with the raw connections and the normal review the attacks use."""

    def tcp(self, timeout: float = LIVENESS_SECONDS) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), timeout=timeout)

    def tls(self, timeout: float = LIVENESS_SECONDS) -> ssl.SSLSocket:
        """A connection with the TLS handshake done, nothing sent yet."""
        return self.context().wrap_socket(self.tcp(timeout), server_hostname="127.0.0.1")

    def https(self) -> http.client.HTTPSConnection:
        return self.connect(timeout=LIVENESS_SECONDS)

    def review(self, conn: http.client.HTTPSConnection | None = None) -> float:
        """Send the normal review (a valid Stage to /validate/stages) on a new
        connection, or on ``conn``; assert it is allowed; return the seconds it took."""
        own = conn is None
        conn = conn or self.https()
        started = time.perf_counter()
        try:
            conn.request("POST", "/validate/stages", body=NORMAL_REVIEW,
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            body = resp.read()
        finally:
            if own:
                conn.close()
        took = time.perf_counter() - started
        assert resp.status == 200, body
        answer = json.loads(body)
        assert answer["kind"] == "AdmissionReview" and answer["response"]["allowed"] is True
        return took


@contextlib.contextmanager
def serve(tmp_path: Path, *, workers: int = WORKERS) -> Iterator[Server]:
    """The server as the suite attacks it: short request deadline, small connection cap,
    debug logs (what the tests read back)."""
    args = ("--request-timeout", str(REQUEST_TIMEOUT), "--max-connections",
            str(MAX_CONNECTIONS), "--log-level", "debug")
    with serve_webhook(tmp_path, workers=workers, threads=THREADS, args=args) as (running, _):
        server = Server(running.port, running.ca_file, running.log, running.proc)
        server.review()  # the normal review is allowed before any attack starts
        yield server


@dataclass
class Probes:
    """Latencies of the normal review sent while one attack ran."""

    attack: str
    seconds: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def line(self) -> str:
        if not self.seconds:
            return f"{self.attack:<34} no answer ({'; '.join(self.failures[:2])})"
        s = sorted(self.seconds)
        return (f"{self.attack:<34} {len(s):>4} answered  median {statistics.median(s) * 1e3:7.1f}"
                f" ms  max {s[-1] * 1e3:7.1f} ms"
                + (f"  ({len(self.failures)} failed)" if self.failures else ""))


RESULTS: dict[str, Probes] = {}  # per attack, printed at the end of the session (conftest)


@contextlib.contextmanager
def probing(server: Server, attack: str, *, every: float = 0.1) -> Iterator[Probes]:
    """Send the normal review over and over, each on a new connection, while the
    ``with`` body runs the attack; then assert every one was answered. Results of the
    same attack (parametrized cases) are pooled."""
    probes = RESULTS.setdefault(attack, Probes(attack))
    answered = len(probes.seconds)
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                probes.seconds.append(server.review())
            except Exception as exc:  # reported by the assertion below
                probes.failures.append(f"{type(exc).__name__}: {exc}")
            stop.wait(every)

    thread = threading.Thread(target=run, name=f"probe {attack}", daemon=True)
    thread.start()
    try:
        yield probes
    finally:
        stop.set()
        thread.join(LIVENESS_SECONDS + 5)
    assert not probes.failures, f"normal reviews failed during {attack}: {probes.failures[:3]}"
    assert len(probes.seconds) > answered, f"no normal review was answered during {attack}"


def until_probed(probes: Probes, count: int = 5) -> Iterator[int]:
    """Repeat a quick attack until ``count`` more normal reviews were answered during
    it (at most 200 rounds)."""
    target = len(probes.seconds) + count
    for round_ in range(200):
        if len(probes.seconds) >= target and round_:
            return
        yield round_


def read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP response from a raw socket: status, headers (lower-case names), body."""
    resp = http.client.HTTPResponse(sock)
    resp.begin()
    body = resp.read()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body


def closed_by_server(sock: socket.socket, timeout: float = LIVENESS_SECONDS) -> bool:
    """Whether the server closes ``sock`` within ``timeout`` (what it sent first, such
    as a 408, is read and dropped)."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65536):
                return True
    except (ConnectionError, ssl.SSLError):
        return True
    except TimeoutError:
        return False
    return False


def client_hello() -> bytes:
    """The first flight of a real TLS client, to be sent without ever finishing."""
    context = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with contextlib.suppress(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()
