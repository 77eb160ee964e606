"""The gunicorn internals webhook.server.worker relies on (GTHREAD_INTERNALS and the
tuples after it) exist in the installed gunicorn: a gunicorn that renamed one fails here,
not the webhook at start, and not silently, with an override gunicorn no longer calls.
`make test-minimums` runs this against the declared minimum, `make test` against the
version in requirements.lock."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from typing import Any, cast

import gunicorn
import pytest
from gunicorn import http
from gunicorn.config import Config
from gunicorn.http.unreader import Unreader
from gunicorn.workers.gthread import TConn, ThreadWorker

from webhook.server import worker as webhook_worker
from webhook.server.worker import (
    GTHREAD_INTERNALS,
    PARSER_INTERNALS,
    REQUEST_INTERNALS,
    TCONN_INTERNALS,
    UNREADER_INTERNALS,
    WebhookWorker,
)

ADDR = ("127.0.0.1", 40000)


def missing(obj: object, names: tuple[str, ...]) -> list[str]:
    return [name for name in names if not hasattr(obj, name)]


def explain(kind: str, names: list[str]) -> str:
    return (f"gunicorn {gunicorn.__version__} has no {kind} {', '.join(names)}, which "
            f"webhook/server/worker.py relies on; adapt the worker to this gunicorn (and "
            f"pyproject.toml's bound) or keep the gunicorn it was written for")


@pytest.fixture
def thread_worker() -> Iterator[ThreadWorker]:
    # Built as the arbiter builds it, before init_process (which forks nothing here but
    # would start the thread pool): the attributes set in __init__ are there.
    worker = ThreadWorker(0, os.getpid(), [], cast(Any, None), 30, Config(), cast(Any, None))
    try:
        yield worker
    finally:
        worker.tmp.close()


def test_gthread_thread_worker_has_every_internal_the_worker_uses(thread_worker):
    gone = missing(thread_worker, GTHREAD_INTERNALS)
    assert not gone, explain("ThreadWorker attribute", gone)


def test_every_thread_worker_method_the_worker_overrides_is_named():
    # A new override of a gthread method belongs in GTHREAD_INTERNALS too.
    overridden = {name for name in vars(WebhookWorker)
                  if not name.startswith("__") and hasattr(ThreadWorker, name)}
    assert overridden <= set(GTHREAD_INTERNALS), sorted(overridden - set(GTHREAD_INTERNALS))


def test_gthread_connection_has_every_internal_the_worker_uses():
    a, b = socket.socketpair()
    with a, b:
        conn = TConn(Config(), a, ADDR, ADDR)
        gone = missing(conn, TCONN_INTERNALS)
        assert not gone, explain("TConn attribute", gone)
        # The worker's own connection class is built the same way.
        assert not missing(webhook_worker.Conn(Config(), b, ADDR, ADDR), TCONN_INTERNALS)


def test_the_http_parser_unreader_and_request_have_every_internal_the_worker_uses():
    gone = missing(Unreader(), UNREADER_INTERNALS)
    assert not gone, explain("Unreader attribute", gone)
    parser = http.get_parser(Config(), [b"POST /validate/stages HTTP/1.1\r\nHost: x\r\n"
                                        b"Expect: 100-continue\r\nContent-Length: 0\r\n\r\n"],
                             ADDR)
    gone = missing(parser, PARSER_INTERNALS)
    assert not gone, explain("parser attribute", gone)
    request = next(parser)
    gone = missing(request, REQUEST_INTERNALS)
    assert not gone, explain("Request attribute", gone)
