"""Kubernetes-style status conditions, as a pure function both controllers share.

Conventions (metav1.Condition): one entry per ``type``; ``lastTransitionTime`` moves
only when ``status`` changes, so users can tell how long something has been true;
other condition types are left exactly as they were (another controller may own
them).
"""

from __future__ import annotations

import copy
import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, cast

from .payloads import Condition
from .payloads import ConditionStatus as Status


def format_time(now: dt.datetime) -> str:
    return now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def set_condition(
    conditions: Sequence[Mapping[str, Any]] | None,
    *,
    type: str,
    status: Status,
    reason: str,
    message: str,
    observed_generation: int | None,
    now: dt.datetime | str,
) -> list[Condition]:
    """Return a new list with the condition ``type`` set; the input is not modified."""
    stamp = now if isinstance(now, str) else format_time(now)
    out: list[Condition] = []
    found = False
    for cond in conditions or ():
        if cond.get("type") != type:
            out.append(cast(Condition, copy.deepcopy(dict(cond))))  # another's, kept as is
            continue
        if found:
            continue  # a duplicate entry of this type: conventions allow only one
        found = True
        keep_time = cond.get("status") == status and cond.get("lastTransitionTime")
        out.append(_build(type, status, reason, message, observed_generation,
                          cond["lastTransitionTime"] if keep_time else stamp))
    if not found:
        out.append(_build(type, status, reason, message, observed_generation, stamp))
    return out


def _build(type: str, status: Status, reason: str, message: str,
           observed_generation: int | None, stamp: str) -> Condition:
    cond: Condition = {
        "type": type,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp,
    }
    if observed_generation is not None:
        cond["observedGeneration"] = observed_generation
    return cond


def get_condition(
    conditions: Sequence[Mapping[str, Any]] | None, type: str
) -> Mapping[str, Any] | None:
    """The condition of ``type``, or None (apimachinery's ``FindStatusCondition``)."""
    return next((c for c in conditions or () if c.get("type") == type), None)
