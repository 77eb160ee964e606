"""Flask glue: HTTP in and out, metrics and logs around the pure decisions in
:mod:`webhook.admission`. Every path ends in a deliberate answer: 400/404/405/413 as
plain text, an AdmissionReview otherwise, never a stack trace."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from webhook import admission, metrics
from webhook.config import Lookups, WebhookConfig

log = logging.getLogger("rollgate.webhook")

_JSON = "application/json"


def _lookups(config: WebhookConfig) -> Lookups:
    if config.lookups is not None:
        return config.lookups
    if config.api_client is not None:
        from webhook.lookups import ClusterLookups

        return ClusterLookups(
            config.api_client, timeout=config.lookup_timeout, ttl=config.cache_ttl
        ).as_lookups()
    return Lookups()


def _plain(status: int, text: str) -> Response:
    return Response(text + "\n", status=status, mimetype="text/plain")


def _json(body: dict[str, Any]) -> Response:
    # UTF-8 as is (JSON's encoding): kubectl shows a message's text as the webhook
    # wrote it, and an escaped "\u00e8" only costs bytes. JSON input may carry a lone
    # surrogate ("\ud800", e.g. in a uid) that UTF-8 cannot encode: then the answer
    # is escaped ASCII, which is still valid JSON.
    try:
        data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()
    except UnicodeEncodeError:
        data = json.dumps(body, separators=(",", ":")).encode()
    return Response(data, status=200, mimetype=_JSON)


def _parse_body(limit: int) -> Any:
    """The JSON body; raises BadReview for anything that is not JSON. Reading the body
    enforces ``limit`` (the app's MAX_CONTENT_LENGTH: 413) even without a Content-Length
    header."""
    try:
        raw = request.get_data(cache=False)
        if len(raw) >= limit and request.content_length is None:
            # A chunked body is cut at the limit rather than refused; one more read tells
            # "exactly at the limit" (b"") from "over it" (werkzeug raises 413).
            request.stream.read(1)
    except HTTPException:
        raise  # 413
    except Exception as exc:
        # The server's body reader refused the body (gunicorn's chunk parser errors, a
        # body shorter than announced). webhook.server.worker refuses such bodies before they
        # get here; this is the backstop: the client's fault, a 400, no traceback.
        raise admission.BadReview(
            f"request body could not be read ({type(exc).__name__})") from exc
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, bad UTF-8, deep nesting
        raise admission.BadReview("request body is not valid JSON") from exc


def create_app(config: WebhookConfig | None = None) -> Flask:
    """The webhook WSGI app. ``config`` defaults to no look-ups and https/file plugins."""
    config = config or WebhookConfig()
    lookups = _lookups(config)
    app = Flask("rollgate-webhook")
    app.config["MAX_CONTENT_LENGTH"] = config.max_body_bytes

    def handle(action: admission.Action, resource: str) -> Response:
        endpoint = f"/{action}/{resource}"
        started = time.perf_counter()
        # Until the envelope parses, any exit (400, 413 from reading the body) is the
        # client's fault; after that, only a fault in checking is an error.
        result = "bad_request"
        try:
            try:
                body = _parse_body(config.max_body_bytes)
            except admission.BadReview as exc:
                return _plain(400, str(exc))
            try:
                # The call the benchmark times, so it measures what production runs.
                outcome = admission.review(body, action=action, resource=resource,
                                           lookups=lookups,
                                           allow_http_plugins=config.allow_http_plugins)
            except admission.BadReview as exc:
                return _plain(400, str(exc))
            except Exception:
                # review() raises BadReview only from parsing the envelope, so anything
                # else came after it: the request and its uid are there.
                result = "error"
                uid = body["request"]["uid"]
                log.exception("internal fault while answering admission request",
                              extra={"uid": uid, "endpoint": endpoint})
                return _json(admission.fault(uid, action=action))
            result = outcome.result
            if result == "denied":
                req = body["request"]
                status = outcome.body["response"]["status"]
                # A server-side dry run changes nothing and its caller sees the denial
                # (the control-plane harness probes with one, as `kubectl apply
                # --dry-run=server` checks do): a debug line, not an operator's concern.
                level = logging.DEBUG if req.get("dryRun") is True else logging.INFO
                log.log(level, "denied", extra={
                    "uid": req["uid"], "endpoint": endpoint,
                    "namespace": req.get("namespace"), "object_name": req.get("name"),
                    "operation": req.get("operation"), "dry_run": req.get("dryRun") is True,
                    "denial": status.get("message"),
                })
            return _json(outcome.body)
        finally:
            metrics.observe(endpoint=endpoint, result=result,
                            seconds=time.perf_counter() - started)

    for action in ("validate", "mutate"):
        for resource in admission.TARGETS:
            def view(action: admission.Action = action, resource: str = resource) -> Response:
                return handle(action, resource)

            app.add_url_rule(f"/{action}/{resource}", endpoint=f"{action}_{resource}",
                             view_func=view, methods=["POST"])

    @app.get("/healthz")
    def healthz() -> Response:
        return _plain(200, "ok")

    @app.get("/readyz")
    def readyz() -> Response:
        # Ready as soon as the app exists: look-ups are optional by design, so an
        # unreachable API server must not take the webhook out of the Service.
        return _plain(200, "ok")

    @app.get("/metrics")
    def metrics_view() -> Response:
        payload, content_type = metrics.exposition()
        return Response(payload, status=200, content_type=content_type)

    if config.bench_noop:
        noop_body = json.dumps(admission.allow("bench"), separators=(",", ":")).encode()

        @app.post("/noop")
        def noop() -> Response:
            # The bench's baseline: same server, TLS and Flask path, no decision.
            request.get_data(cache=False)
            return Response(noop_body, status=200, mimetype=_JSON)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        code = exc.code or 400
        if code == 413:
            text = f"request body is larger than {config.max_body_bytes} bytes"
        else:
            text = exc.name
        response = _plain(code, text)
        if code == 405 and exc.get_response().headers.get("Allow"):
            response.headers["Allow"] = exc.get_response().headers["Allow"]
        return response

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> Response:
        # Last resort (a bug outside the admission path): logged, no traceback leaked.
        log.exception("unhandled error")
        return _plain(500, "internal error")

    return app
