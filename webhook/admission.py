"""AdmissionReview in, AdmissionReview out: the webhook's answers (docs/components.md
"Webhook", docs/validate.md "What a user sees", docs/comparison.md "Decisions where upstream
left a question open") as pure functions over dicts. No Flask, no I/O: the look-ups arrive
as callables, so every branch is testable without a server and the benchmark can time the
decision alone. The HTTP side is ``webhook.server``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, cast

import schemas
from kubekit.kinds import ROLLOUT_MANAGER, STAGE, Resource
from schemas.objects import meta_of
from webhook.config import Lookups
from webhook.payloads import (
    AdmissionRequest,
    AdmissionResponse,
    Status,
    StatusCause,
    StatusDetails,
)

API_VERSION = "admission.k8s.io/v1"
Action = Literal["validate", "mutate"]


# The endpoint's resource (plural) -> the kind it admits; anything else passes untouched.
TARGETS: dict[str, Resource] = {r.plural: r for r in (STAGE, ROLLOUT_MANAGER)}

_CHECKED_OPERATIONS = frozenset({"CREATE", "UPDATE"})

# The names manifests/webhook registers for each endpoint. The API server does not tell
# a webhook its configured name, and kubectl shows only the causes of an Invalid
# denial (not the message the API server prefixes with the webhook's name), so the
# denial names the webhook itself in a cause (see :func:`validate`).
WEBHOOK_NAMES: dict[str, str] = {
    "/validate/stages": "validate-stages.rollgate.dev",
    "/validate/rolloutmanagers": "validate-rolloutmanagers.rollgate.dev",
    "/mutate/stages": "mutate-stages.rollgate.dev",
    "/mutate/rolloutmanagers": "mutate-rolloutmanagers.rollgate.dev",
}


class BadReview(ValueError):
    """The body is not an AdmissionReview we can answer: HTTP 400 with this reason."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """The response body plus what the metrics and logs want to know about it."""

    body: dict[str, Any]
    result: Literal["allowed", "denied", "patched", "skipped", "error"]


def parse_review(body: Any) -> AdmissionRequest:
    """Check the envelope and return ``request``; raises :class:`BadReview`."""
    if not isinstance(body, dict):
        raise BadReview("request body must be a JSON object (an AdmissionReview)")
    if body.get("apiVersion") != API_VERSION or body.get("kind") != "AdmissionReview":
        raise BadReview(f"request body must be an {API_VERSION} AdmissionReview")
    request = body.get("request")
    if not isinstance(request, dict):
        raise BadReview("AdmissionReview has no request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("AdmissionReview request has no uid")
    return cast(AdmissionRequest, request)


def _envelope(response: AdmissionResponse) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def allow(uid: str, *, warnings: list[str] | None = None,
          patch: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    response: AdmissionResponse = {"uid": uid, "allowed": True}
    if warnings:
        response["warnings"] = warnings
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(
            json.dumps(patch, separators=(",", ":")).encode()
        ).decode("ascii")
    return _envelope(response)


def deny(uid: str, *, code: int, reason: str, message: str,
         details: StatusDetails | None = None,
         warnings: list[str] | None = None) -> dict[str, Any]:
    status: Status = {
        "metadata": {}, "status": "Failure", "code": code, "reason": reason, "message": message,
    }
    if details:
        status["details"] = details
    response: AdmissionResponse = {"uid": uid, "allowed": False, "status": status}
    if warnings:
        response["warnings"] = warnings
    return _envelope(response)


def fault(uid: str, *, action: Action) -> dict[str, Any]:
    """The answer when checking itself failed: validation fails closed with a 500 code
    (the API server shows it to the user), mutation lets the object through unchanged
    because its failurePolicy is Ignore anyway and a default is not worth a rejection."""
    if action == "mutate":
        return allow(uid)
    return deny(uid, code=500, reason="InternalError",
                message="rollgate webhook: internal error while validating; see webhook logs")


def _object_name(request: Mapping[str, Any], obj: Mapping[str, Any]) -> str:
    meta = meta_of(obj)
    for candidate in (meta.get("name"), request.get("name"), meta.get("generateName")):
        if isinstance(candidate, str) and candidate:
            return candidate
    return ""


def _request_kind(request: Mapping[str, Any], obj: Mapping[str, Any]) -> tuple[str, str]:
    """(group, kind) from ``request.kind``, else from the object's apiVersion/kind."""
    gvk = request.get("kind")
    if isinstance(gvk, dict) and isinstance(gvk.get("kind"), str):
        group = gvk.get("group")
        return (group if isinstance(group, str) else ""), gvk["kind"]
    api_version = obj.get("apiVersion")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
    kind = obj.get("kind")
    return group, (kind if isinstance(kind, str) else "")


def _with_namespace(obj: dict[str, Any], namespace: Any) -> dict[str, Any]:
    """Look-ups resolve in the object's namespace; an object sent without
    ``metadata.namespace`` gets the request's (a shallow copy, the input stays as is)."""
    meta = obj.get("metadata")
    if not isinstance(namespace, str) or not namespace or not isinstance(meta, dict):
        return obj
    if meta.get("namespace"):
        return obj
    return {**obj, "metadata": {**meta, "namespace": namespace}}


def _checked_operation(request: Mapping[str, Any]) -> bool:
    operation = request.get("operation")
    return isinstance(operation, str) and operation in _CHECKED_OPERATIONS


def _is_checked(request: Mapping[str, Any], resource: str) -> dict[str, Any] | None:
    """The object to check, or None when this request passes untouched (DELETE,
    CONNECT, subresources, other kinds)."""
    if not _checked_operation(request) or request.get("subResource"):
        return None
    obj = request.get("object")
    if not isinstance(obj, dict):
        return None
    group, kind = _request_kind(request, obj)
    target = TARGETS[resource]
    if kind != target.kind or group != target.group:
        return None
    return obj


# A huge object can have tens of thousands of findings; a denial listing all of them
# would be megabytes (and seconds of CPU to build). The first ones are enough to fix,
# then the user re-applies. The API server keeps only a few KiB of warnings anyway.
MAX_ERRORS = 100
MAX_WARNINGS = 50
MAX_TEXT = 512  # characters of one cause field, cause message or warning


def _clip(text: str, limit: int = MAX_TEXT) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def warning_text(finding: schemas.Finding) -> str:
    return _clip(f"{finding.field}: {finding.message}")


def _more(count: int, what: str) -> str:
    return f"... and {count} more {what}{'' if count == 1 else 's'}"


def warning_texts(findings: list[schemas.Finding]) -> list[str]:
    """At most :data:`MAX_WARNINGS` warnings (the last one says how many were left out)."""
    found = schemas.warnings(findings)
    if len(found) <= MAX_WARNINGS:
        return [warning_text(f) for f in found]
    kept = MAX_WARNINGS - 1
    return [*(warning_text(f) for f in found[:kept]), _more(len(found) - kept, "warning")]


# The part of ``spec`` the cross-object checks read, per endpoint (both spellings of a
# Stage's stanza: a change from one to the other is a change).
_LOOKED_UP: dict[str, tuple[str, ...]] = {
    STAGE.plural: ("analysis", "verification"),
    ROLLOUT_MANAGER.plural: ("plugins",),
}


def _stanza_json(obj: Mapping[str, Any], resource: str) -> str | None:
    """The looked-up stanza as canonical JSON (None when it cannot be serialized)."""
    spec = obj.get("spec")
    picked = ({key: spec[key] for key in _LOOKED_UP[resource] if key in spec}
              if isinstance(spec, dict) else spec)
    try:
        return json.dumps(picked, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return None


def _stanza_changed(request: Mapping[str, Any], obj: Mapping[str, Any], resource: str) -> bool:
    """Whether this request may pay for cross-object look-ups.

    The look-ups only add warnings about the stanza, and the webhook's failurePolicy is
    Fail, so API round trips on its path should buy something. An UPDATE that leaves the
    stanza as it was (``kubectl label``, Kargo's own updates, rollgate's own
    annotation patches) would only repeat the warnings given when the stanza was
    written (the "second RolloutManager" one included: it was given when that stanza
    was), so it gets none. Compared as canonical JSON, so ``1`` and ``true`` differ
    and key order does not matter; anything unserializable counts as changed.
    """
    old = request.get("oldObject")
    if request.get("operation") != "UPDATE" or not isinstance(old, dict):
        return True
    new = _stanza_json(obj, resource)
    return new is None or new != _stanza_json(old, resource)


# How much of the path to the deepest value a too-deep denial shows: enough to name the
# field (``spec.analysis.args[0].value``), not hundreds of ``[0]``.
_DEEP_PATH_SHOWN = 8


def deepest(value: Any) -> tuple[tuple[str | int, ...], int]:
    """The path to the most deeply nested value inside ``value``, and its depth; without
    recursion, so it works where the checks ran out of stack."""
    # (container, index of its entry in `nodes`) to visit; nodes[i] = (parent, key).
    nodes: list[tuple[int, str | int]] = [(-1, "")]
    depths = [0]
    todo: list[tuple[Any, int]] = [(value, 0)]
    deepest_at = 0
    while todo:
        current, at = todo.pop()
        items = (current.items() if isinstance(current, dict)
                 else enumerate(current) if isinstance(current, list) else ())
        for key, child in items:
            nodes.append((at, key))
            depths.append(depths[at] + 1)
            if depths[-1] > depths[deepest_at]:
                deepest_at = len(nodes) - 1
            if isinstance(child, dict | list):
                todo.append((child, len(nodes) - 1))
    path: list[str | int] = []
    at = deepest_at
    while at > 0:
        at, key = nodes[at]
        path.append(key)
    return tuple(reversed(path)), depths[deepest_at]


def too_deep(obj: dict[str, Any]) -> schemas.Finding:
    """The denial's finding for an object nested deeper than the checks can follow."""
    path, depth = deepest(obj)
    return schemas.Finding(
        path=path[:_DEEP_PATH_SHOWN],
        message=f"is nested {depth} levels deep (counted from the object), deeper than "
        "rollgate's checks can follow",
    )


def validate(request: AdmissionRequest, *, resource: str, lookups: Lookups,
             allow_http_plugins: bool = False,
             verdicts: schemas.Verdicts | None = None) -> Outcome:
    """The validating decision for one parsed ``request`` (see :func:`parse_review`);
    ``verdicts``: the app's findings kept per Stage stanza (``schemas.verdicts``)."""
    uid = request["uid"]
    obj = _is_checked(request, resource)
    if obj is None:
        if (_checked_operation(request) and not isinstance(request.get("object"), dict)
                and not request.get("subResource")):
            # A CREATE/UPDATE without an object cannot be judged; failing closed is
            # the validating webhook's policy.
            return Outcome(deny(uid, code=400, reason="BadRequest",
                                message="AdmissionReview request has no object"), "denied")
        return Outcome(allow(uid), "skipped")
    obj = _with_namespace(obj, request.get("namespace"))
    if _stanza_changed(request, obj, resource):
        lookups = lookups.begin()
        template, managers = lookups.template, lookups.rollout_managers
    else:
        template = managers = None
    try:
        findings = schemas.check(
            obj,
            template_lookup=template,
            rollout_managers=managers,
            allow_http_plugins=allow_http_plugins,
            verdicts=verdicts,
            # The API server checked the CRD's schema first: an unknown field is a
            # newer upstream's (docs/install.md "Version skew").
            served=True,
        )
        old = request.get("oldObject")
        if request.get("operation") == "UPDATE" and isinstance(old, dict):
            findings = schemas.ratchet(findings, obj=obj, old_obj=old)
        errors = schemas.errors(findings)
        warnings = warning_texts(findings)
    except RecursionError:
        # A value nested nearly as deep as the JSON parser allows leaves the checks,
        # which recurse, no stack. The client's doing, so a denial, not a fault.
        errors, warnings = [too_deep(obj)], []
    if not errors:
        return Outcome(allow(uid, warnings=warnings), "allowed")
    kind = TARGETS[resource].kind
    name = _clip(_object_name(request, obj), 253)
    shown = [(_clip(f.field), _clip(f.message)) for f in errors[:MAX_ERRORS]]
    causes: list[StatusCause] = [
        {"reason": "FieldValueInvalid", "field": field, "message": text} for field, text in shown]
    parts = [f"{field}: {text}" for field, text in shown]
    if len(errors) > MAX_ERRORS:
        more = _more(len(errors) - MAX_ERRORS, "error")
        parts.append(more)
        causes.append({"reason": "FieldValueInvalid", "field": "", "message": more})
    message = f'{kind} "{name}" is invalid: ' + "; ".join(parts)
    # First cause: who denied it, with no field (the object as a whole), the way
    # Kubernetes' own ValidatingAdmissionPolicy names itself; kubectl prints it as
    # `* : admission webhook "..." denied the request` above the field errors.
    webhook_name = WEBHOOK_NAMES[f"/validate/{resource}"]
    details: StatusDetails = {
        "name": name,
        "group": TARGETS[resource].group,
        "kind": kind,
        "causes": [
            {"reason": "FieldValueInvalid", "field": "",
             "message": f'admission webhook "{webhook_name}" denied the request'},
            *causes,
        ],
    }
    return Outcome(
        deny(uid, code=422, reason="Invalid", message=message, details=details,
             warnings=warnings),
        "denied",
    )


def mutate(request: AdmissionRequest, *, resource: str) -> Outcome:
    """The mutating decision: defaults as a JSONPatch, with one warning per changed value
    naming what is stored (so the manifest can say so and re-apply as ``unchanged``);
    never denies."""
    uid = request["uid"]
    obj = _is_checked(request, resource)
    if obj is None:
        return Outcome(allow(uid), "skipped")
    if resource == STAGE.plural:
        # Nothing to default: what upstream treats the same when absent (a template
        # reference's kind) is not added, or kubectl and Argo CD would report a change on
        # every sync. The endpoint stays so that a registration left from an earlier
        # release still gets an answer (an allow without a patch).
        return Outcome(allow(uid), "allowed")
    try:
        ops = schemas.default_patch(obj)
        notes = [_clip(text) for text in schemas.default_warnings(obj)][:MAX_WARNINGS]
    except RecursionError:  # see validate(); mutation never denies
        ops, notes = [], []
    if not ops:
        return Outcome(allow(uid), "allowed")
    return Outcome(allow(uid, patch=ops, warnings=notes), "patched")


def review(body: Any, *, action: Action, resource: str, lookups: Lookups | None = None,
           allow_http_plugins: bool = False,
           verdicts: schemas.Verdicts | None = None) -> Outcome:
    """Body in, response out, on a body already parsed from JSON: the one entry point
    of both the server's app (webhook/server/app.py) and bench/admission.py, so the
    benchmark times what production runs.

    Raises :class:`BadReview` for a body that is not an AdmissionReview; any other
    exception is the caller's internal fault (see :func:`fault`).
    """
    request = parse_review(body)
    if action == "validate":
        return validate(request, resource=resource, lookups=lookups or Lookups(),
                        allow_http_plugins=allow_http_plugins, verdicts=verdicts)
    return mutate(request, resource=resource)
