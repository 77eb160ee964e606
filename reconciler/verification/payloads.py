"""The parts of Kargo's and Argo Rollouts' objects that Stage verification reads and
writes, typed (Kargo v1.11.2 ``api/v1alpha1``, Argo Rollouts v1.9.1), and accessors in
the spirit of Kargo's own (``FreightHistory.Current()``,
``VerificationInfoStack.Current()``), so no caller walks
``(stage.get("status") or {}).get("freightHistory") or []`` itself.

Objects arrive as plain JSON, so the types describe well-formed values; every
accessor treats each field as possibly absent or malformed (a list entry that is not
an object is skipped, a missing list is empty). Pure: no I/O.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any, Final, Literal, TypedDict, cast

from schemas.constants import (
    ANNOTATION_REQUEST,
    LABEL_ATTEMPT,
    LABEL_FREIGHT_COLLECTION,
    LABEL_MANAGED_BY,
    LABEL_STAGE,
    MANAGED_BY,
)
from schemas.objects import as_dict, as_list, meta_of

from ..payloads import Condition
from .naming import freight_collection_id, label_value

# A verification's phase (Kargo's VerificationInfo.phase).
Phase = Literal["Pending", "Running", "Successful", "Failed", "Error", "Inconclusive", "Aborted"]

# The phases in which a verification is over (Kargo's VerificationInfo.phase).
FINISHED: Final[frozenset[str]] = frozenset(
    {"Successful", "Failed", "Error", "Inconclusive", "Aborted"})

# Kargo v1.11.2 records a user's abort (kargo.akuity.io/abort) as phase Failed with this
# message, where engine mode records Aborted (docs/verification.md "Observe mode").
KARGO_ABORT_MESSAGE: Final = "Verification aborted by user"

# Kargo's refresh request (api/v1alpha1 AnnotationKeyRefresh): a new value makes
# Kargo's controller reconcile the object at once; its CLI and UI write the time of
# the request (pkg/api/refresh.go, RFC 3339).
ANNOTATION_REFRESH: Final = "kargo.akuity.io/refresh"


class AnalysisRunReference(TypedDict):
    name: str
    namespace: str
    phase: str


class VerificationInfo(TypedDict, total=False):
    """One ``verificationHistory`` entry of a freight collection."""

    id: str
    actor: str
    startTime: str
    phase: Phase
    message: str
    analysisRun: AnalysisRunReference
    finishTime: str


class FreightReference(TypedDict, total=False):
    name: str
    origin: dict[str, Any]


class FreightCollection(TypedDict, total=False):
    """One ``status.freightHistory`` entry of a Stage (newest first)."""

    id: str
    items: dict[str, FreightReference]  # by origin
    verificationHistory: list[VerificationInfo]  # newest first


class StageStatus(TypedDict, total=False):
    """The Stage status fields rollgate reads; it writes ``freightHistory`` and
    ``conditions`` (engine mode only)."""

    freightHistory: list[FreightCollection]
    conditions: list[Condition]
    health: dict[str, Any]
    currentPromotion: dict[str, Any]
    lastPromotion: dict[str, Any]


class StageStatusWrite(TypedDict, total=False):
    """The Stage status fields rollgate writes, whole; None removes the field."""

    freightHistory: list[FreightCollection]
    conditions: list[Condition] | None


class VerifiedStage(TypedDict, total=False):
    verifiedAt: str


class FreightStatus(TypedDict, total=False):
    # Stage name -> when the Freight was verified there; None in a merge patch removes.
    verifiedIn: dict[str, VerifiedStage | None]


class FreightStatusPatch(TypedDict):
    """The merge patch of Freight ``status`` rollgate sends."""

    status: FreightStatus


class AnalysisRunStatus(TypedDict, total=False):
    phase: str
    message: str
    startedAt: str
    completedAt: str  # set by Argo Rollouts when the run reaches a completed phase


class _Annotations(TypedDict):
    annotations: dict[str, str]


class RefreshPatch(TypedDict):
    """The merge patch of a Stage's metadata that asks Kargo to reconcile it."""

    metadata: _Annotations


# ---------------------------------------------------------------- status readers


def stage_status(stage: Mapping[str, Any]) -> StageStatus:
    return cast(StageStatus, as_dict(stage.get("status")))


def freight_status(freight: Mapping[str, Any]) -> FreightStatus:
    return cast(FreightStatus, as_dict(freight.get("status")))


def run_status(run: Mapping[str, Any]) -> AnalysisRunStatus:
    return cast(AnalysisRunStatus, as_dict(run.get("status")))


# ---------------------------------------------------------------- Stage accessors


def freight_history(stage: Mapping[str, Any]) -> list[FreightCollection]:
    """``status.freightHistory``, newest first (the entries that are objects)."""
    return [cast(FreightCollection, c) for c in as_list(stage_status(stage).get("freightHistory"))
            if isinstance(c, dict)]


def current_freight(stage: Mapping[str, Any]) -> FreightCollection | None:
    """The Stage's current freight collection (Kargo's ``FreightHistory.Current()``)."""
    history = freight_history(stage)
    return history[0] if history else None


def verification_history(collection: Mapping[str, Any] | None) -> list[VerificationInfo]:
    """A collection's verifications, newest first (the entries that are objects)."""
    if collection is None:
        return []
    return [cast(VerificationInfo, e) for e in as_list(collection.get("verificationHistory"))
            if isinstance(e, dict)]


def current_verification(collection: Mapping[str, Any] | None) -> VerificationInfo | None:
    """A collection's latest verification (Kargo's ``VerificationInfoStack.Current()``)."""
    history = verification_history(collection)
    return history[0] if history else None


def outcome(entry: Mapping[str, Any]) -> str:
    """The phase a finished entry is counted under: its own, but ``Aborted`` for Kargo's
    record of a user's abort, so an abort reads the same in both modes and the failure
    alert does not page on it (docs/operating.md "RollgateVerificationFailed")."""
    phase = str(entry.get("phase"))
    if phase == "Failed" and entry.get("message") == KARGO_ABORT_MESSAGE:
        return "Aborted"
    return phase


def run_of(entry: Mapping[str, Any]) -> str:
    """The name of the AnalysisRun a verification entry references ("" for none)."""
    name = as_dict(entry.get("analysisRun")).get("name")
    return name if isinstance(name, str) else ""


def freight_names(collection: Mapping[str, Any]) -> list[str]:
    """Sorted names of the Freight in a ``freightHistory`` entry (``items`` by origin)."""
    names = {name for ref in as_dict(collection.get("items")).values()
             if isinstance(ref, dict) and isinstance(name := ref.get("name"), str) and name}
    return sorted(names)


def collection_id(collection: Mapping[str, Any]) -> str:
    """The entry's ``id`` as Kargo wrote it, else computed with Kargo's rule."""
    found = collection.get("id")
    return found if isinstance(found, str) and found else freight_collection_id(
        freight_names(collection))


def promotion_finished_at(stage: Mapping[str, Any]) -> dt.datetime | None:
    """When the Stage's last promotion finished (``status.lastPromotion.finishedAt``)."""
    return parse_time(as_dict(stage_status(stage).get("lastPromotion")).get("finishedAt"))


def verified_in(freight: Mapping[str, Any] | None) -> dict[str, Any]:
    """The Stages a Freight is verified in (``status.verifiedIn``), by name."""
    return as_dict(freight_status(freight).get("verifiedIn")) if freight is not None else {}


def refresh_patch(now: str) -> RefreshPatch:
    """Kargo's refresh request as its CLI and UI write it, as a merge patch."""
    return {"metadata": {"annotations": {ANNOTATION_REFRESH: now}}}


# ---------------------------------------------------------------- AnalysisRun readers


def is_ours(run: Mapping[str, Any]) -> bool:
    return as_dict(meta_of(run).get("labels")).get(LABEL_MANAGED_BY) == MANAGED_BY


def run_stage(run: Mapping[str, Any]) -> str | None:
    """The Stage a run verifies, by Kargo's label (its full value from our annotation
    of the same key when the label had to be shortened)."""
    meta = meta_of(run)
    label = as_dict(meta.get("labels")).get(LABEL_STAGE)
    if not isinstance(label, str) or not label:
        return None
    full = as_dict(meta.get("annotations")).get(LABEL_STAGE)
    return full if isinstance(full, str) and label_value(full) == label else label


def run_attempt(run: Mapping[str, Any]) -> int:
    value = str(as_dict(meta_of(run).get("labels")).get(LABEL_ATTEMPT, ""))
    return int(value) if value.isdigit() else 0


def run_collection(run: Mapping[str, Any]) -> str:
    return str(as_dict(meta_of(run).get("labels")).get(LABEL_FREIGHT_COLLECTION, ""))


def run_phase(run: Mapping[str, Any]) -> str:
    return str(run_status(run).get("phase") or "")


def run_request(run: Mapping[str, Any]) -> str | None:
    value = as_dict(meta_of(run).get("annotations")).get(ANNOTATION_REQUEST)
    return value if isinstance(value, str) else None


def name_of(obj: Mapping[str, Any]) -> str:
    return str(meta_of(obj).get("name") or "")


# ---------------------------------------------------------------- time


def parse_time(value: object) -> dt.datetime | None:
    """A Kubernetes timestamp (RFC 3339) as an aware datetime; None if absent or not one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.UTC)
