"""What webhook.server.worker uses of gunicorn (WORKER_INTERFACE: the interface gunicorn
gives any worker class) exists in the installed gunicorn: a gunicorn that renamed one
fails here, not the webhook at start. `make test-minimums` runs this against the
declared minimum, `make test` against the version in requirements.lock."""

from __future__ import annotations

import os
from typing import Any, cast

import gunicorn
from gunicorn.config import Config
from gunicorn.workers.base import Worker

from webhook.server.worker import WORKER_INTERFACE, WebhookWorker


def test_gunicorn_s_worker_class_has_everything_the_worker_uses() -> None:
    # Built as the arbiter builds a worker, before init_process (which would fork
    # nothing here but start the loop): what __init__ sets is there; the methods and
    # what init_process sets (PIPE, wsgi) are on the class or named by it.
    worker = Worker(0, os.getpid(), [], cast(Any, None), 30, Config(), cast(Any, None))
    try:
        gone = [name for name in WORKER_INTERFACE if not hasattr(worker, name)
                and name not in _SET_BY_INIT_PROCESS]
        assert not gone, (f"gunicorn {gunicorn.__version__} has no Worker attribute "
                          f"{', '.join(gone)}, which webhook/server/worker.py relies on")
    finally:
        worker.tmp.close()


# Set by gunicorn's Worker.init_process (read from its source: a gunicorn that stops
# setting them fails the webhook's start, which tests/http/test_gunicorn_tls.py runs).
_SET_BY_INIT_PROCESS = {"PIPE", "wsgi"}


def test_the_worker_overrides_only_what_a_worker_class_is_meant_to() -> None:
    overridden = {name for name in vars(WebhookWorker)
                  if not name.startswith("_") and hasattr(Worker, name)}
    assert overridden <= {"init_process", "run"}, sorted(overridden)
