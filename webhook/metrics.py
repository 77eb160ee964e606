"""Prometheus metrics: requests and latency by endpoint and result.

gunicorn runs several worker processes, each with its own counters. When
``PROMETHEUS_MULTIPROC_DIR`` is set (``python -m webhook`` sets it to a fresh temp
dir before any worker starts) prometheus-client keeps the values in files there and
``/metrics`` aggregates every worker, so a scrape that lands on any worker sees the
whole server. Without it (tests, in-process use) the ordinary registry is used.
"""

from __future__ import annotations

import functools
import os
from collections import deque

from cryptography import x509
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

REQUESTS = Counter(
    "rollgate_webhook_requests_total",
    "Admission requests by endpoint and result "
    "(allowed, patched, denied, skipped, bad_request, error).",
    ["endpoint", "result"],
)
LATENCY = Histogram(
    "rollgate_webhook_request_duration_seconds",
    "Time to answer an admission request, by endpoint and result.",
    ["endpoint", "result"],
    # The API server's webhook timeout is seconds; the interesting range is sub-ms
    # to tens of ms, plus the look-up timeout tail.
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
)

LOOKUPS = Counter(
    "rollgate_webhook_lookups_total",
    "Cross-object look-ups by kind and result (hit = cache, found, not_found, error, "
    "skipped = the request's look-up budget was spent; refreshed, refresh_failed = a "
    "cached template fetched again in the background); "
    "errors mean the look-up warnings were skipped.",
    ["kind", "result"],
)


@functools.cache
def _certificate_not_after() -> Gauge:
    # Built on first use, not at import: in multiprocess mode creating a gauge writes 0
    # into the worker's file, and a worker between importing the app and reading its
    # certificate would then pull the live minimum to 0 (and fire the expiry alerts).
    return Gauge(
        "rollgate_webhook_certificate_not_after_timestamp_seconds",
        "notAfter of the serving certificate, in Unix seconds: the earliest among the "
        "live workers (each loads the mounted Secret's certificate again when it changes).",
        multiprocess_mode="livemin",
    )


@functools.cache
def _certificate_not_before() -> Gauge:
    # With notAfter it places the renewal point (two thirds of the lifetime, as
    # `rollgate certs renew` and cert-manager renew), which the renewal-overdue alert
    # needs; the earliest too, so both come from the oldest certificate still served.
    return Gauge(
        "rollgate_webhook_certificate_not_before_timestamp_seconds",
        "notBefore of the serving certificate, in Unix seconds: the earliest among the "
        "live workers (with notAfter: when it is due for renewal).",
        multiprocess_mode="livemin",
    )


def collectors() -> tuple[Counter | Histogram | Gauge, ...]:
    """Every collector the webhook exports, for the generated metrics reference
    (docs/metrics.md). It builds the certificate gauges, so no worker calls it."""
    return REQUESTS, LATENCY, LOOKUPS, _certificate_not_after(), _certificate_not_before()


def record_certificate(certfile: str) -> None:
    """Set the notAfter and notBefore gauges from the first certificate in
    ``certfile``; a file that cannot be read or parsed leaves them as they were (TLS
    reports that one)."""
    try:
        with open(certfile, "rb") as handle:
            cert = x509.load_pem_x509_certificate(handle.read())
    except (OSError, ValueError):
        return
    _certificate_not_after().set(cert.not_valid_after_utc.timestamp())
    _certificate_not_before().set(cert.not_valid_before_utc.timestamp())


@functools.cache
def _series(endpoint: str, result: str) -> tuple[Counter, Histogram]:
    # labels() takes a lock and builds a key on every call; the endpoints are the app's
    # routes and the results a fixed set, so there are a few dozen pairs at most.
    return REQUESTS.labels(endpoint, result), LATENCY.labels(endpoint, result)


@functools.cache
def _lookup_series(kind: str, result: str) -> Counter:
    # As _series: the kinds are the three that are looked up (webhook.lookups), the
    # results a fixed set.
    return LOOKUPS.labels(kind, result)


# The recordings observe() and count_lookup() were asked for, until flush() makes them:
# the server records a request's metrics once its answer is written
# (webhook.server.worker calls App.after_answers). Under `python -m webhook`
# (PROMETHEUS_MULTIPROC_DIR set) every increment takes a lock and writes a memory-mapped
# file, some 18 us a request once the CPU caches are taken (docs/benchmarks.md "Inside
# the webhook server"), which the API server would otherwise wait for. Queued as label
# values: finding the series is flush()'s work too, off that wait.
_requests: deque[tuple[str, str, float]] = deque()  # (endpoint, result, seconds)
_lookups: deque[tuple[str, str]] = deque()  # (kind, result)
# A bound on what waits, for a caller that never flushes (the app timed in-process by
# bench.server_profile): past it the queue is recorded at once. The server flushes after
# every turn of its loop, so it never comes near.
_MAX_PENDING = 10_000


def count_lookup(*, kind: str, result: str) -> None:
    _lookups.append((kind, result))
    if len(_lookups) > _MAX_PENDING:
        flush()


def observe(*, endpoint: str, result: str, seconds: float) -> None:
    _requests.append((endpoint, result, seconds))
    if len(_requests) > _MAX_PENDING:
        flush()


def flush() -> None:
    """Make the recordings :func:`observe` and :func:`count_lookup` queued. Any thread
    may call it: each is taken once (taken, then made: a scrape in between sees it at
    the next scrape)."""
    while _requests:
        try:
            endpoint, result, seconds = _requests.popleft()
        except IndexError:  # another thread took the last one
            break
        requests, latency = _series(endpoint, result)
        requests.inc()
        latency.observe(seconds)
    while _lookups:
        try:
            kind, result = _lookups.popleft()
        except IndexError:
            break
        _lookup_series(kind, result).inc()


def exposition() -> tuple[bytes, str]:
    """The text exposition and its content type, across workers when multiprocess
    (this worker's queued metrics recorded first)."""
    flush()
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
