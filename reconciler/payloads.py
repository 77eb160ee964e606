"""The status parts both features write, typed: Kubernetes conditions (metav1.Condition),
as ``reconciler.conditions`` sets them on Stages (verification, engine mode) and on
RolloutManagers (plugins).

Objects arrive as plain JSON (``kubekit.rest`` decodes nothing into types), so these
describe well-formed values; code reading them still treats every field as possibly absent
(``total=False``) or malformed. The shapes only Stage verification uses are in
``reconciler.verification.payloads``.
"""

from __future__ import annotations

from typing import Literal, TypedDict

ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(TypedDict, total=False):
    """metav1.Condition, as in ``status.conditions``."""

    type: str
    status: ConditionStatus
    reason: str
    message: str
    observedGeneration: int
    lastTransitionTime: str
