"""Where one admission request's time goes inside the webhook server, phase by phase.

Each phase of a valid Stage's review (``testkit.reviews``, sent as the API server sends
it: ``Content-Length``, kept-alive connection) is timed on its own, in this process,
as the server runs it (median of ``--iterations`` runs after a warm-up; microseconds):

- ``tls``: the server's side of the TLS records over loopback: reading the request and
  writing a 300-byte answer on an established TLS 1.3 connection;
- ``framing``: the event loop finding where the request ends (``webhook.server.framing``);
- ``hand-off``: the loop gives a complete request to a thread and gets the connection
  back, as ``webhook.server.worker`` does (a queue each way, a wake-up pipe);
- ``http``: reading the request line and fields and writing the answer's head
  (``webhook.server.http11``);
- ``app``: the app's whole answer (``App.respond``: routing, JSON, decision), and
  apart, what it is made of: ``json-decode``, ``decision`` (``webhook.admission.review``,
  no look-ups), ``json-encode``; and ``metrics`` (``webhook.metrics.observe`` and
  ``flush``: recorded once the answer is written, ``App.after_answers``, so not part
  of what the API server waits for; timed here with prometheus-client's in-process
  values, which cost less than the files ``python -m webhook`` writes them to);
- ``app-cached-lookups``: the app's whole answer as a cluster's webhook gives it: the
  Stage's two templates looked up through ``webhook.lookups.ClusterLookups``, answered
  from its cache (as every request of ``bench.apply_overhead``'s timed creates is), so
  the cross-object warnings run too. The checks run every time, as for a stanza the
  webhook has not seen (docs/components.md "Verdicts kept"); ``bench.review_parts``
  compares that with a stanza it has, call by call.

``--gap-ms`` idles that long before each timed call, as the webhook idles between the API
server's calls (its caches go cold: on this project's machine every phase takes several
times as long after 2 ms of idling; each phase is then timed cold on its own, so their
sum is more than a request that runs them back to back costs). The sum of ``tls``,
``framing``, ``hand-off``, ``http`` and ``app`` is the server's CPU time per request;
it leaves out what only a real server has (the kernel's loopback, the threads' wake-up
latency), which ``bench.apply_overhead`` measures end to end.

``--evict-mib N`` also writes N MiB before each timed call: on a cluster the API server,
etcd and the client run between two of the webhook's calls and take the CPU caches, which
idling alone does not (docs/benchmarks.md "Inside the webhook server").

    .venv/bin/python -m bench.server_profile [--iterations 5000] [--gap-ms 0]
                                             [--evict-mib 0]
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import os
import queue
import select
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from kubernetes import client as k8s

import certs
import schemas
from bench.stats import report
from schemas.lookups import TemplateLookup
from schemas.verdicts import Check
from testkit import objects, reviews
from testkit.net import send_json
from webhook import admission, metrics
from webhook.config import Lookups, WebhookConfig
from webhook.lookups import ClusterLookups
from webhook.server.app import create_app, encode_json
from webhook.server.framing import Framer
from webhook.server.http11 import Answer, answer_bytes, read_request
from webhook.server.tls import harden

STAGE_NAMESPACE = "guestbook"
BODY = json.dumps(reviews.review(reviews.valid_stage(namespace=STAGE_NAMESPACE))).encode()


def request_bytes(body: bytes) -> bytes:
    """``body`` as kube-apiserver v1.35 sends it to a webhook (net/http's head, with its
    User-Agent)."""
    return (b"POST /validate/stages?timeout=5s HTTP/1.1\r\nHost: rollgate-webhook.rollgate-"
            b"system.svc:443\r\nUser-Agent: kube-apiserver-admission\r\nContent-Length: %d\r\n"
            b"Accept: application/json, */*\r\nContent-Type: application/json\r\n"
            b"Accept-Encoding: gzip\r\n\r\n" % len(body)) + body


REQUEST = request_bytes(BODY)
ANSWER = b"x" * 300


class Timer:
    """Times calls, idling ``gap`` seconds and writing ``evict_bytes`` before each (see
    the module docstring)."""

    def __init__(self, *, iterations: int, gap: float, evict_bytes: int = 0) -> None:
        self.iterations = iterations
        self.gap = gap
        self._evict_from = bytes(evict_bytes)
        self._evict_to = bytearray(evict_bytes)

    def median_us(self, fn: Callable[[], object]) -> float:
        return self.median_of(lambda: timed_ns(fn))

    def median_of(self, timed: Callable[[], int]) -> float:
        """The median of ``timed`` (which returns nanoseconds it measured itself)."""
        for _ in range(min(200, self.iterations)):
            timed()
        taken = [self.cold(timed) for _ in range(self.iterations)]
        return round(statistics.median(taken) / 1e3, 1)

    def cold(self, timed: Callable[[], int]) -> int:
        """One call of ``timed`` after the idling and the writing."""
        if self.gap:
            time.sleep(self.gap)
        if self._evict_to:
            self._evict_to[:] = self._evict_from
        return timed()


def timed_ns(fn: Callable[[], object]) -> int:
    started = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - started


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


def tls_us(timer: Timer) -> float:
    with tls_pair() as (server, client):
        def one() -> int:
            client.sendall(REQUEST)
            select.select([server], [], [])
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

        return timer.median_of(one)


def hand_off_us(timer: Timer) -> float:
    """A request to a thread through a queue, the connection back through another and a
    wake-up pipe the loop's select sees (webhook.server.worker's way)."""
    work: queue.SimpleQueue[object] = queue.SimpleQueue()
    back: queue.SimpleQueue[object] = queue.SimpleQueue()
    read_fd, write_fd = os.pipe()

    def answer() -> None:
        while (item := work.get()) is not None:
            back.put(item)
            os.write(write_fd, b"\0")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    try:
        def one() -> None:
            work.put(1)
            select.select([read_fd], [], [])
            os.read(read_fd, 1)
            back.get_nowait()

        return timer.median_us(one)
    finally:
        work.put(None)
        thread.join()
        os.close(read_fd)
        os.close(write_fd)


def server_us(timer: Timer) -> dict[str, float]:
    framer = Framer(max_body_bytes=8 << 20)
    framer.feed(REQUEST)
    start = framer.body_start
    head_only = Answer(200, b"", "application/json")

    def http() -> None:
        read_request(REQUEST, body_start=start, chunked=False)
        answer_bytes(head_only, close=False)

    return {"framing": timer.median_us(lambda: Framer(max_body_bytes=8 << 20).feed(REQUEST)),
            "http": timer.median_us(http)}


class _Templates(http.server.BaseHTTPRequestHandler):
    """An API server holding the two templates the bench's Stage names: every GET is
    answered with the template of that name."""

    def do_GET(self) -> None:
        cluster = "/clusteranalysistemplates/" in self.path
        name = self.path.rsplit("/", 1)[1]
        send_json(self, 200, objects.analysis_template(
            name, namespace=None if cluster else STAGE_NAMESPACE, cluster=cluster,
            args=[{"name": "service-name"}, {"name": "api-token"}],
            metrics=[{"name": name, "provider": {"web": {"url": "http://metrics.example/q"}}}]))

    def log_message(self, *args: object) -> None:
        pass


def cached_lookups() -> Lookups:
    """The look-ups a cluster's webhook makes (``webhook.lookups.ClusterLookups``), with
    the Stage's templates fetched once over HTTP, then answered from the cache only."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Templates)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        config = k8s.Configuration()
        config.host = f"http://127.0.0.1:{server.server_address[1]}"
        cluster = ClusterLookups(k8s.ApiClient(config), ttl=1e9)
        for ref in json.loads(BODY)["request"]["object"]["spec"]["analysis"]["templates"]:
            scope = ref["clusterScope"] is True
            kind = "ClusterAnalysisTemplate" if scope else "AnalysisTemplate"
            found = cluster.template(kind, STAGE_NAMESPACE, ref["templateName"])
            assert found is not None, f"{kind} {ref['templateName']} was not fetched"
    finally:
        server.shutdown()
        server.server_close()
    return cluster.as_lookups(cached_only=True)


def check_every_time(_verdicts: schemas.Verdicts, part: dict[str, Any], *,
                     lookup: TemplateLookup | None, check: Check) -> list[schemas.Finding]:
    """``schemas.Verdicts.findings`` keeping nothing: the checks run every time."""
    return check(part, lookup)


Stub = tuple[ModuleType | type, str, Callable[..., Any]]  # (owner, attribute, stand-in)

# No verdict kept: the checks run every time, as for a stanza the webhook has not seen.
CHECKS_RUN: Stub = (schemas.Verdicts, "findings", check_every_time)


@contextlib.contextmanager
def stubbed(stubs: list[Stub]) -> Iterator[None]:
    """Each attribute replaced by its stand-in, and put back."""
    saved = [(owner, name, getattr(owner, name)) for owner, name, _ in stubs]
    for owner, name, stub in stubs:
        setattr(owner, name, stub)
    try:
        yield
    finally:
        for owner, name, real in saved:
            setattr(owner, name, real)


def _recorded_metrics() -> None:
    """One request's metrics: queued by the app, recorded after its answer is written."""
    metrics.observe(endpoint="/validate/stages", result="allowed", seconds=0.0)
    metrics.flush()


def handler_us(timer: Timer) -> dict[str, float]:
    doc = json.loads(BODY)
    outcome = admission.review(doc, action="validate", resource="stages", lookups=Lookups(),
                               allow_http_plugins=False)
    assert outcome.body["response"]["allowed"] is True
    app = create_app(WebhookConfig(lookups=Lookups()))
    looked_up = create_app(WebhookConfig(lookups=cached_lookups()))
    answer = looked_up.respond("POST", "/validate/stages", BODY, may_wait=False)
    assert answer is not None and json.loads(answer.body)["response"] == outcome.body[
        "response"], "the cached look-ups must answer, and add no warning"

    def cached() -> object:
        return looked_up.respond("POST", "/validate/stages", BODY, may_wait=False)

    with stubbed([CHECKS_RUN]):
        app_us = timer.median_us(lambda: app.respond("POST", "/validate/stages", BODY))
        checked = timer.median_us(cached)
    return {
        "app": app_us,
        "app-cached-lookups": checked,
        "json-decode": timer.median_us(lambda: json.loads(BODY)),
        "decision": timer.median_us(lambda: admission.review(
            doc, action="validate", resource="stages", lookups=Lookups(),
            allow_http_plugins=False)),
        "json-encode": timer.median_us(lambda: encode_json(outcome.body)),
        "metrics": timer.median_us(_recorded_metrics),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=5000)
    p.add_argument("--gap-ms", type=float, default=0.0,
                   help="idle this long before each timed call (default 0)")
    p.add_argument("--evict-mib", type=int, default=0,
                   help="write this many MiB before each timed call (default 0)")
    args = p.parse_args(argv)
    timer = Timer(iterations=args.iterations, gap=args.gap_ms / 1e3,
                  evict_bytes=args.evict_mib << 20)
    handler = handler_us(timer)
    phases = {"tls": tls_us(timer), **server_us(timer), "hand-off": hand_off_us(timer),
              "app": handler.pop("app")}
    report({"request_bytes": len(REQUEST), "iterations": args.iterations,
            "gap_ms": args.gap_ms, "evict_mib": args.evict_mib, "median_us": phases,
            "sum_us": round(sum(phases.values()), 1), "app_parts_median_us": handler})
    return 0


if __name__ == "__main__":
    sys.exit(main())
