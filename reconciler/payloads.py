"""The parts of Kargo's and Argo Rollouts' objects that rollgate reads and writes, typed
(Kargo v1.11.2 ``api/v1alpha1``, Argo Rollouts v1.9.1).

Objects arrive as plain JSON (DESIGN.md), so these describe well-formed values: the
``*_status`` readers hand a status out typed, and code reading it still treats every
field as possibly absent (``total=False``) or malformed.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict, cast

from schemas.objects import as_dict

ConditionStatus = Literal["True", "False", "Unknown"]
# A verification's phase (Kargo's VerificationInfo.phase).
Phase = Literal["Pending", "Running", "Successful", "Failed", "Error", "Inconclusive", "Aborted"]


class Condition(TypedDict, total=False):
    """metav1.Condition, as in ``status.conditions``."""

    type: str
    status: ConditionStatus
    reason: str
    message: str
    observedGeneration: int
    lastTransitionTime: str


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
    completedAt: str


def stage_status(stage: Mapping[str, Any]) -> StageStatus:
    return cast(StageStatus, as_dict(stage.get("status")))


def freight_status(freight: Mapping[str, Any]) -> FreightStatus:
    return cast(FreightStatus, as_dict(freight.get("status")))


def run_status(run: Mapping[str, Any]) -> AnalysisRunStatus:
    return cast(AnalysisRunStatus, as_dict(run.get("status")))
