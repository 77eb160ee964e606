"""AdmissionReview v1 (``admission.k8s.io/v1``) as the webhook reads and answers it.

A request arrives as JSON from the API server, or from anything that can reach the
port: ``admission.parse_review`` checks the envelope and the uid; every other field is
read with a type check, so these types describe a well-formed request only.
"""

from __future__ import annotations

from typing import Any, TypedDict


class GroupVersionKind(TypedDict, total=False):
    group: str
    version: str
    kind: str


class AdmissionRequest(TypedDict, total=False):
    uid: str
    kind: GroupVersionKind
    subResource: str
    name: str
    namespace: str
    operation: str  # CREATE, UPDATE, DELETE, CONNECT
    object: dict[str, Any] | None
    oldObject: dict[str, Any] | None
    dryRun: bool


class StatusCause(TypedDict):
    reason: str
    field: str
    message: str


class StatusDetails(TypedDict, total=False):
    name: str
    group: str
    kind: str
    causes: list[StatusCause]


class Status(TypedDict, total=False):
    """metav1.Status, the reason of a denial."""

    metadata: dict[str, Any]
    status: str
    code: int
    reason: str
    message: str
    details: StatusDetails


class AdmissionResponse(TypedDict, total=False):
    uid: str
    allowed: bool
    status: Status
    warnings: list[str]
    patchType: str  # "JSONPatch"
    patch: str  # base64 of the JSON patch
