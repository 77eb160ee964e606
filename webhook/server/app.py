"""The webhook's endpoints: HTTP in and out, metrics and logs around the pure decisions
in :mod:`webhook.admission`. Every path ends in a deliberate answer: 400/404/405/413 as
plain text, an AdmissionReview otherwise, never a stack trace.

A plain object with one method, :meth:`App.respond` (method, path, body in; status,
body, type out), called by the server (:mod:`webhook.server.http11`): seven fixed routes
need no framework, and the WSGI layer and Flask's request and response objects cost
more per call than the decision itself (docs/components.md "The server, measured").
"""

from __future__ import annotations

import json
import logging
import time
from _json import make_encoder, make_scanner
from collections.abc import Callable
from typing import Any, NoReturn

import schemas
from webhook import admission, metrics
from webhook.config import Lookups, MustWait, WebhookConfig
from webhook.server.http11 import Answer, plain

log = logging.getLogger("rollgate.webhook")

_JSON = "application/json"

Route = Callable[[bytes, bool], Answer | None]  # (body, may_wait)


def _lookups(config: WebhookConfig) -> tuple[Lookups, Lookups]:
    """The look-ups that may wait for the API server, and those that answer from the
    cache only (webhook.lookups.MustWait otherwise); a caller's own are both."""
    if config.lookups is not None:
        return config.lookups, config.lookups
    if config.api_client is not None:
        from webhook.lookups import ClusterLookups

        cluster = ClusterLookups(config.api_client, timeout=config.lookup_timeout,
                                 ttl=config.cache_ttl)
        return cluster.as_lookups(), cluster.as_lookups(cached_only=True)
    return Lookups(), Lookups()


def _not_json(value: object) -> NoReturn:
    """What ``json.JSONEncoder.default`` does: a value JSON has no form for is a bug."""
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# The encoder json.dumps would build on every call (any non-default option makes it
# build one), built once: it is several Python calls per answer, which cost most when
# the CPU caches are cold (docs/benchmarks.md "Inside the webhook server"). No cycle
# check: an answer is a tree the app builds.
_CHUNKS = make_encoder(markers=None, default=_not_json,
                       encoder=json.encoder.encode_basestring,  # ensure_ascii=False
                       indent=None, key_separator=":", item_separator=",", sort_keys=False,
                       skipkeys=False, allow_nan=True)


def encode_json(body: dict[str, Any]) -> bytes:
    """An answer's body as the webhook writes it (bench/server_profile.py times it)."""
    # UTF-8 as is (JSON's encoding): kubectl shows a message's text as the webhook
    # wrote it, and an escaped "\u00e8" only costs bytes. JSON input may carry a lone
    # surrogate ("\ud800", e.g. in a uid) that UTF-8 cannot encode: then the answer
    # is escaped ASCII, which is still valid JSON.
    try:
        return "".join(_CHUNKS(body, 0)).encode()
    except UnicodeEncodeError:
        return json.dumps(body, separators=(",", ":")).encode()


def _json(body: dict[str, Any]) -> Answer:
    return Answer(200, encode_json(body), _JSON)


# json.loads's own scanner (C), called without the Python layers around it (the
# encoding's detection, decode(), raw_decode(), two whitespace matches): with the CPU
# caches cold each costs, 10 to 30 us in all (docs/benchmarks.md "Inside the webhook
# server"). The same decoder options as json.loads, so the same values.
# typeshed types the scanner's argument as a scanner; it is the decoder whose options it
# reads, as json.JSONDecoder itself passes it.
_SCAN: Callable[[str, int], tuple[Any, int]] = make_scanner(
    json.JSONDecoder())  # type: ignore[arg-type]


def decode_json(raw: bytes) -> Any:
    """``json.loads(raw)``, faster for what the API server sends: UTF-8 without a BOM,
    an object first. Anything else, and anything the scanner refuses, goes to
    ``json.loads`` itself, so its answers and errors are the ones given (a UTF-16-LE
    body starts with ``{`` and a NUL, which the scanner refuses)."""
    if raw[:1] == b"{":
        try:
            text = raw.decode("utf-8", "surrogatepass")  # as json.loads decodes UTF-8
            value, end = _SCAN(text, 0)
        except (ValueError, StopIteration):  # UnicodeDecodeError, JSONDecodeError
            return json.loads(raw)
        # What json.loads allows after the value: its whitespace (not str.isspace's).
        if end == len(text) or not text[end:].strip(" \t\n\r"):
            return value
    return json.loads(raw)


def _parse(raw: bytes) -> Any:
    """The JSON body; raises BadReview for anything that is not JSON."""
    try:
        return decode_json(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, deep nesting
        raise admission.BadReview("request body is not valid JSON") from exc


class App:
    """The webhook's routes; see the module docstring."""

    def __init__(self, config: WebhookConfig) -> None:
        self.config = config
        self._lookups, self._cached_lookups = _lookups(config)
        # Findings kept per Stage stanza, for a stanza checked before (docs/components.md
        # "Verdicts kept").
        self._verdicts = schemas.Verdicts()
        self._routes: dict[str, dict[str, Route]] = {
            "/healthz": {"GET": lambda _body, _wait: plain(200, "ok")},
            # Ready as soon as the app exists: look-ups are optional by design, so an
            # unreachable API server must not take the webhook out of the Service.
            "/readyz": {"GET": lambda _body, _wait: plain(200, "ok")},
            "/metrics": {"GET": self._metrics},
        }
        for action in ("validate", "mutate"):
            for resource in admission.TARGETS:
                self._routes[f"/{action}/{resource}"] = {"POST": self._admission(
                    action, resource)}
        if config.bench_noop:
            # The benchmarks' baseline: same server, TLS and HTTP path, no decision; it
            # answers the request's uid, as any webhook must (hack/noop-webhook too).
            self._routes["/noop"] = {"POST": lambda body, _wait: _json(admission.allow(
                json.loads(body)["request"]["uid"]))}

    def respond(self, method: str, path: str, body: bytes, *,
                may_wait: bool = True) -> Answer | None:
        """The answer to one request (HEAD is asked as GET by the server); with
        ``may_wait`` False, None when it needs a look-up the cache cannot answer."""
        methods = self._routes.get(path)
        if methods is None:
            return plain(404, "Not Found")
        route = methods.get(method)
        if route is None:
            allowed = ", ".join(sorted({*methods, "HEAD"} if "GET" in methods else methods))
            return plain(405, "Method Not Allowed", fields=(("Allow", allowed),))
        if len(body) > self.config.max_body_bytes:
            # The server refuses such a body before it is read whole; this is for callers
            # that hand the app a body directly.
            return plain(413, f"request body is larger than {self.config.max_body_bytes} bytes")
        try:
            return route(body, may_wait)
        except Exception:
            # Last resort (a bug outside the admission path): logged, no traceback leaked.
            log.exception("unhandled error", extra={"endpoint": path})
            return plain(500, "internal error")

    def after_answers(self) -> None:
        """The server has written the answers given so far: record their metrics now,
        off the API server's wait (webhook.metrics)."""
        try:
            metrics.flush()
        except Exception:
            # The worker calls this from its loop and its threads: a metrics fault is
            # logged, never allowed to stop either.
            log.exception("could not record the metrics of answered requests")

    def _metrics(self, _body: bytes, _may_wait: bool) -> Answer:
        payload, content_type = metrics.exposition()
        return Answer(200, payload, content_type)

    def _admission(self, action: admission.Action, resource: str) -> Route:
        endpoint = f"/{action}/{resource}"

        def answer(body: bytes, may_wait: bool) -> Answer | None:
            started = time.perf_counter()
            lookups = self._lookups if may_wait else self._cached_lookups
            try:
                result, reply = self._review(body, action=action, resource=resource,
                                             lookups=lookups)
            except MustWait:
                return None  # asked again where it may wait: observed then
            metrics.observe(endpoint=endpoint, result=result,
                            seconds=time.perf_counter() - started)
            return reply

        return answer

    def _review(self, raw: bytes, *, action: admission.Action, resource: str,
                lookups: Lookups) -> tuple[str, Answer]:
        """(metrics result, answer) for one AdmissionReview body."""
        endpoint = f"/{action}/{resource}"
        try:
            body = _parse(raw)
            # The call the benchmark times, so it measures what production runs.
            outcome = admission.review(body, action=action, resource=resource,
                                       lookups=lookups,
                                       allow_http_plugins=self.config.allow_http_plugins,
                                       verdicts=self._verdicts)
        except admission.BadReview as exc:
            return "bad_request", plain(400, str(exc))
        except Exception:
            # review() raises BadReview only from parsing the envelope, so anything
            # else came after it: the request and its uid are there.
            uid = body["request"]["uid"]
            log.exception("internal fault while answering admission request",
                          extra={"uid": uid, "endpoint": endpoint})
            return "error", _json(admission.fault(uid, action=action))
        if outcome.result == "denied":
            _log_denial(body["request"], outcome.body["response"]["status"], endpoint)
        return outcome.result, _json(outcome.body)


def _log_denial(req: dict[str, Any], status: dict[str, Any], endpoint: str) -> None:
    # A server-side dry run changes nothing and its caller sees the denial (the
    # control-plane harness probes with one, as `kubectl apply --dry-run=server` checks
    # do): a debug line, not an operator's concern.
    level = logging.DEBUG if req.get("dryRun") is True else logging.INFO
    log.log(level, "denied", extra={
        "uid": req["uid"], "endpoint": endpoint,
        "namespace": req.get("namespace"), "object_name": req.get("name"),
        "operation": req.get("operation"), "dry_run": req.get("dryRun") is True,
        "denial": status.get("message"),
    })


def create_app(config: WebhookConfig | None = None) -> App:
    """The webhook app. ``config`` defaults to no look-ups and https/file plugins."""
    return App(config or WebhookConfig())
