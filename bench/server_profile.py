"""Where one admission request's time goes inside the webhook server, phase by phase.

Each phase of a valid Stage's review (``testkit.reviews``, sent as the API server sends
it: ``Content-Length``, kept-alive connection) is timed on its own, in this process,
as the server runs it (median of ``--iterations`` runs after a warm-up; microseconds):

- ``tls``: the server's side of the TLS records over loopback: reading the request and
  writing a 300-byte answer on an established TLS 1.3 connection;
- ``hand-off``: the event loop gives a complete request to a thread and gets the
  connection back (``ThreadPoolExecutor.submit``, the done callback, the wake-up pipe);
- ``http``: framing (``webhook.server.framing``) and gunicorn's parser reading the request
  head and body from memory;
- ``wsgi``: what the WSGI layer adds around the handler: gunicorn's environ and
  response, Flask's routing, request and response objects (the Flask app's whole call
  minus the handler's own work below);
- ``json-decode``, ``decision`` (``webhook.admission.review``), ``json-encode``,
  ``metrics`` (``webhook.metrics.observe``): the handler's work.

The sum is the server's CPU time per request on one thread; it leaves out what only a
real server has (the kernel's loopback, waking a thread, the GIL), which
``bench.apply_overhead`` measures end to end.

    .venv/bin/python -m bench.server_profile [--iterations 5000]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from pathlib import Path
from typing import Any, cast

from gunicorn.config import Config
from gunicorn.http import wsgi
from gunicorn.http.parser import RequestParser

import certs
from bench.stats import report
from testkit import reviews
from webhook import admission, metrics
from webhook.config import Lookups, WebhookConfig
from webhook.server.app import create_app
from webhook.server.framing import Framer
from webhook.server.tls import harden
from webhook.server.worker import BufferUnreader

BODY = json.dumps(reviews.review(reviews.valid_stage())).encode()
# The head kube-apiserver v1.35 sends a webhook (net/http's, with its User-Agent).
REQUEST = (b"POST /validate/stages?timeout=5s HTTP/1.1\r\nHost: rollgate-webhook.rollgate-"
           b"system.svc:443\r\nUser-Agent: kube-apiserver-admission\r\nContent-Length: %d\r\n"
           b"Accept: application/json, */*\r\nContent-Type: application/json\r\n"
           b"Accept-Encoding: gzip\r\n\r\n" % len(BODY)) + BODY
ANSWER = b"x" * 300
CFG = Config()  # gunicorn's settings, as a worker holds them


def median_us(fn: Callable[[], object], iterations: int) -> float:
    for _ in range(min(500, iterations)):
        fn()
    taken = []
    for _ in range(iterations):
        started = time.perf_counter_ns()
        fn()
        taken.append(time.perf_counter_ns() - started)
    return round(statistics.median(taken) / 1e3, 1)


@contextlib.contextmanager
def tls_pair() -> Iterator[tuple[ssl.SSLSocket, ssl.SSLSocket]]:
    """A server and a client TLS socket over loopback, handshake done."""
    with tempfile.TemporaryDirectory(prefix="rollgate-profile-") as tmp:
        paths = certs.generate(Path(tmp))
        server_ctx = harden(ssl.create_default_context(ssl.Purpose.CLIENT_AUTH))
        server_ctx.load_cert_chain(paths.tls_cert, paths.tls_key)
        client_ctx = ssl.create_default_context(cafile=str(paths.ca_cert))
        with socket.create_server(("127.0.0.1", 0)) as listener:
            client = socket.create_connection(listener.getsockname())
            accepted, _ = listener.accept()
        done: dict[str, ssl.SSLSocket] = {}
        thread = threading.Thread(target=lambda: done.setdefault(
            "server", server_ctx.wrap_socket(accepted, server_side=True)))
        thread.start()
        with client_ctx.wrap_socket(client, server_hostname="127.0.0.1") as tls_client:
            thread.join()
            with done["server"] as tls_server:
                yield tls_server, tls_client


def tls_us(iterations: int) -> float:
    with tls_pair() as (server, client):
        def one() -> int:
            client.sendall(REQUEST)
            started = time.perf_counter_ns()
            got = 0
            while got < len(REQUEST):
                got += len(server.recv(65536))
            server.sendall(ANSWER)
            taken = time.perf_counter_ns() - started
            got = 0
            while got < len(ANSWER):
                got += len(client.recv(65536))
            return taken

        for _ in range(min(500, iterations)):
            one()
        return round(statistics.median(one() for _ in range(iterations)) / 1e3, 1)


def hand_off_us(iterations: int) -> float:
    pool = futures.ThreadPoolExecutor(max_workers=4)
    read_fd, write_fd = os.pipe()
    try:
        def one() -> None:
            done = pool.submit(lambda: None)
            done.add_done_callback(lambda _: os.write(write_fd, b"\0"))
            select.select([read_fd], [], [])
            os.read(read_fd, 1)

        return median_us(one, iterations)
    finally:
        pool.shutdown()
        os.close(read_fd)
        os.close(write_fd)


def _parsed() -> Any:
    parser = RequestParser(CFG, [], ("127.0.0.1", 40000))
    parser.unreader = BufferUnreader()
    parser.unreader.unread(REQUEST)
    return next(parser)


def http_us(iterations: int) -> float:
    def one() -> None:
        Framer(max_body_bytes=8 << 20).feed(REQUEST)
        _parsed().body.read()

    return median_us(one, iterations)


class _Discard:
    def sendall(self, data: bytes) -> None:
        del data


def whole_app_us(iterations: int) -> float:
    """gunicorn's environ and response around the Flask app's call, parsing excluded."""
    app = create_app(WebhookConfig(lookups=Lookups()))
    requests = [_parsed() for _ in range(iterations + min(500, iterations))]

    def one() -> None:
        resp, environ = wsgi.create(requests.pop(), cast(Any, _Discard()),
                                    ("127.0.0.1", 40000), ("127.0.0.1", 8443), CFG)
        answer: Any = app(dict(environ), cast(Any, resp.start_response))
        for chunk in answer:
            resp.write(chunk)
        resp.close()
        answer.close()

    return median_us(one, iterations)


def handler_us(iterations: int) -> dict[str, float]:
    doc = json.loads(BODY)
    outcome = admission.review(doc, action="validate", resource="stages", lookups=Lookups(),
                               allow_http_plugins=False)
    assert outcome.body["response"]["allowed"] is True
    return {
        "json-decode": median_us(lambda: json.loads(BODY), iterations),
        "decision": median_us(lambda: admission.review(
            doc, action="validate", resource="stages", lookups=Lookups(),
            allow_http_plugins=False), iterations),
        "json-encode": median_us(lambda: json.dumps(
            outcome.body, separators=(",", ":"), ensure_ascii=False).encode(), iterations),
        "metrics": median_us(lambda: metrics.observe(
            endpoint="/validate/stages", result="allowed", seconds=0.0), iterations),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=5000)
    args = p.parse_args(argv)
    n = args.iterations
    handler = handler_us(n)
    phases = {"tls": tls_us(n), "hand-off": hand_off_us(n), "http": http_us(n),
              "wsgi": round(whole_app_us(n) - sum(handler.values()), 1), **handler}
    report({"request_bytes": len(REQUEST), "iterations": n, "median_us": phases,
            "sum_us": round(sum(phases.values()), 1)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
