"""API errors in the reconciler's logs are one line: status, reason and the API
server's message (``kubekit.rest.brief``), never the response headers and escaped body
``str(ApiException)`` prints; an Event refused because its namespace is being deleted
is a debug line, not a warning."""

from __future__ import annotations

import json
import logging

import pytest
from kubernetes.client.exceptions import ApiException

from kubekit.kinds import STAGE
from kubekit.rest import brief, namespace_terminating
from reconciler.runtime.events import Recorder
from reconciler.runtime.health import Metrics
from reconciler.runtime.manager import ControllerRunner
from reconciler.runtime.types import Context, Controller, Key, Watch
from testkit import objects
from testkit.fakeapi import FakeApi, api_error, context

STAGE_OBJ = objects.stage("test", namespace="gone", uid="u1")
TERMINATING = ("events \"test.1\" is forbidden: unable to create new content in namespace "
               "gone because it is being terminated")


def with_headers(exc: ApiException) -> ApiException:
    """What the official client raises: headers and body, which ``str(exc)`` prints."""
    exc.headers = {"Audit-Id": "b3c1", "Content-Type": "application/json"}
    return exc


def terminating() -> ApiException:
    exc = api_error(403, "Forbidden", TERMINATING)
    assert exc.body is not None
    body = json.loads(exc.body)
    body["details"] = {"name": "test.1", "kind": "events", "causes": [
        {"reason": "NamespaceTerminating", "message": "namespace gone is being terminated",
         "field": "metadata.namespace"}]}
    exc.body = json.dumps(body)
    return with_headers(exc)


def record(api: FakeApi, caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    recorder = Recorder(api, instance="test")
    with caplog.at_level(logging.DEBUG, logger="reconciler.events"):
        recorder.emit(STAGE_OBJ, type="Warning", reason="NotOwner", message="m")
        recorder.flush()
    return [r for r in caplog.records if r.name == "reconciler.events"]


def test_a_refused_event_is_one_warning_line_without_headers(caplog):
    api = FakeApi()
    api.fail("create", with_headers(api_error(403, "Forbidden",
             'events is forbidden: User "system:serviceaccount:x:y" cannot create\n'
             'resource "events"')))

    records = record(api, caplog)

    assert [r.levelno for r in records] == [logging.WARNING]
    line = records[0].getMessage()
    assert line == ('could not record event NotOwner in namespace gone: HTTP 403 Forbidden: '
                    'events is forbidden: User "system:serviceaccount:x:y" cannot create '
                    'resource "events"')
    assert "Audit-Id" not in line and "HTTP response" not in line and "\n" not in line


def test_an_event_in_a_namespace_being_deleted_is_a_debug_line(caplog):
    api = FakeApi()
    api.fail("create", terminating())

    records = record(api, caplog)

    assert [r.levelno for r in records] == [logging.DEBUG]
    assert records[0].getMessage() == (
        "event NotOwner not recorded: namespace gone is being deleted")


def test_brief_is_one_line_for_every_kind_of_error():
    assert brief(terminating()) == f"HTTP 403 Forbidden: {TERMINATING}"
    assert brief(api_error(0, "ConnectionError: refused")) == "ConnectionError: refused"
    no_body = with_headers(ApiException(status=502, reason="Bad Gateway"))
    no_body.body = "<html>\n<b>proxy</b>\n</html>"
    assert brief(no_body) == "HTTP 502 Bad Gateway"
    assert brief(ValueError("a\nb")) == "ValueError: a b"


def test_namespace_terminating_needs_the_cause_not_just_403():
    assert namespace_terminating(terminating())
    assert not namespace_terminating(api_error(403, "Forbidden", TERMINATING))
    assert not namespace_terminating(ValueError("403"))


class Writer(Controller):
    """A controller whose reconcile writes one object (which the fake then refuses)."""

    name = "writer"
    primary = STAGE
    watches: tuple[Watch, ...] = ()

    def reconcile(self, key: Key, ctx: Context) -> None:
        ctx.client.create(STAGE, key.namespace, objects.stage(key.name))


def reconcile_once(api: FakeApi, caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    runner = ControllerRunner(Writer(), metrics=Metrics(), workers=1)
    with caplog.at_level(logging.DEBUG, logger="reconciler"):
        runner.process(Key("gone", "test"), context(api))
    return [r for r in caplog.records if r.getMessage().startswith("reconcile failed")]


def test_a_reconcile_failing_in_a_namespace_being_deleted_is_a_debug_line(caplog):
    api = FakeApi()
    api.fail("create", terminating())

    records = reconcile_once(api, caplog)

    assert [r.levelno for r in records] == [logging.DEBUG]
    assert "HTTP 403 Forbidden: " + TERMINATING in records[0].getMessage()


def test_another_reconcile_failure_stays_a_one_line_warning(caplog):
    api = FakeApi()
    api.fail("create", with_headers(api_error(403, "Forbidden", "stages is forbidden")))

    records = reconcile_once(api, caplog)

    assert [r.levelno for r in records] == [logging.WARNING]
    assert records[0].getMessage().endswith(": HTTP 403 Forbidden: stages is forbidden")
    assert "Audit-Id" not in records[0].getMessage()
