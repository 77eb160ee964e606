"""Pure rules of Stage verification (DESIGN.md "Verification behaviour").

Everything here is a function of objects already read, so the decisions — is the
Stage ready, which phase does a run mean, what does the status look like — are
tested without an API server; the controller only does the I/O around them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypedDict

from .conditions import set_condition

Obj = dict[str, Any]
Phase = Literal["Pending", "Running", "Successful", "Failed", "Error", "Inconclusive", "Aborted"]

FINISHED: frozenset[str] = frozenset({"Successful", "Failed", "Error", "Inconclusive", "Aborted"})
HISTORY_LIMIT = 10
CONDITION = "Verified"

# AnalysisRun phase -> verification phase. A run that exists but has not reported a
# phase yet is already running as far as the user is concerned.
RUN_PHASES: dict[str, Phase] = {
    "": "Running",
    "Pending": "Running",
    "Running": "Running",
    "Successful": "Successful",
    "Failed": "Failed",
    "Error": "Error",
    "Inconclusive": "Inconclusive",
}

# verification phase -> (condition status, reason)
CONDITIONS: dict[str, tuple[str, str]] = {
    "Successful": ("True", "Verified"),
    "Failed": ("False", "VerificationFailed"),
    "Error": ("False", "VerificationError"),
    "Aborted": ("False", "VerificationAborted"),
    "Pending": ("Unknown", "Pending"),
    "Running": ("Unknown", "Running"),
    "Inconclusive": ("Unknown", "Inconclusive"),
}

# verification phase -> (event type, reason) for a finished verification
EVENTS: dict[str, tuple[str, str]] = {
    "Successful": ("Normal", "VerificationSucceeded"),
    "Failed": ("Warning", "VerificationFailed"),
    "Error": ("Warning", "VerificationError"),
    "Inconclusive": ("Warning", "VerificationInconclusive"),
    "Aborted": ("Normal", "VerificationAborted"),
}


class RunRef(TypedDict):
    name: str
    namespace: str
    phase: str


class Verification(TypedDict, total=False):
    id: str
    freight: list[str]
    collection: str
    attempt: int
    phase: Phase
    message: str
    analysisRun: RunRef
    startTime: str
    finishTime: str


# ---------------------------------------------------------------- reading the Stage


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def current_freight(stage: Mapping[str, Any]) -> list[str]:
    """Sorted names of the Stage's current freight.

    Kargo today: ``status.freightHistory[0].items`` (a map of origin -> reference; a
    list is accepted too); older Kargo: ``status.currentFreight.name``.
    """
    status = _dict(stage.get("status"))
    history = status.get("freightHistory")
    if isinstance(history, list) and history and isinstance(history[0], dict):
        items = history[0].get("items")
        refs = items.values() if isinstance(items, dict) else (
            items if isinstance(items, list) else [])
        names = {r.get("name") for r in refs if isinstance(r, dict) and r.get("name")}
        if names:
            return sorted(names)
    name = _dict(status.get("currentFreight")).get("name")
    return [name] if isinstance(name, str) and name else []


AppLookup = Callable[[str, str], Mapping[str, Any] | None]  # (namespace, name) -> app


def argocd_apps(stage: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(namespace, name) of the Argo CD Applications the Stage updates."""
    mechanisms = _dict(_dict(stage.get("spec")).get("promotionMechanisms"))
    apps = []
    for update in mechanisms.get("argoCDAppUpdates") or []:
        if isinstance(update, dict) and update.get("appName"):
            apps.append((update.get("appNamespace") or "argocd", update["appName"]))
    return apps


def waiting_for(stage: Mapping[str, Any], apps: AppLookup) -> str | None:
    """What the Stage still waits for before it can be verified; None when ready."""
    status = _dict(stage.get("status"))
    if not current_freight(stage):
        return "waiting for freight to be promoted to the Stage"
    promotion = status.get("currentPromotion")
    if promotion:
        name = _dict(promotion).get("name") if isinstance(promotion, dict) else promotion
        return f"waiting for promotion {name or ''} to finish".replace("  ", " ")
    health = status.get("health")
    if isinstance(health, dict):
        state = health.get("status") or "Unknown"
        if state != "Healthy":
            return f"waiting for the Stage to become Healthy (health is {state})"
        return None
    for namespace, name in argocd_apps(stage):
        app = apps(namespace, name)
        if app is None:
            return f"waiting for Argo CD Application {namespace}/{name} (not found)"
        app_status = _dict(app.get("status"))
        health_status = _dict(app_status.get("health")).get("status") or "Unknown"
        sync_status = _dict(app_status.get("sync")).get("status") or "Unknown"
        if health_status != "Healthy" or sync_status != "Synced":
            return (
                f"waiting for Argo CD Application {namespace}/{name} to be Healthy and "
                f"Synced (health: {health_status}, sync: {sync_status})"
            )
    return None


def annotation(stage: Mapping[str, Any], key: str) -> str | None:
    """An annotation's value ("" counts as set), or None when absent."""
    value = _dict(_dict(stage.get("metadata")).get("annotations")).get(key)
    return None if value is None else str(value)


def latest_verification(stage: Mapping[str, Any], collection: str) -> Verification | None:
    """``status.verification`` when it is about ``collection``, else None (new freight)."""
    v = _dict(_dict(stage.get("status")).get("verification"))
    if v.get("collection") == collection and v.get("id"):
        return copy.deepcopy(v)  # type: ignore[return-value]
    return None


# ---------------------------------------------------------------- decisions


def run_phase(run: Mapping[str, Any]) -> str:
    return str(_dict(run.get("status")).get("phase") or "")


def verification_phase(run: Mapping[str, Any]) -> Phase:
    """The verification phase an AnalysisRun's phase means (unknown phases = Running)."""
    return RUN_PHASES.get(run_phase(run), "Running")


def run_message(run: Mapping[str, Any]) -> str:
    """The verification message for a run: its phase and the run's own message."""
    name = _dict(run.get("metadata")).get("name", "")
    detail = _dict(run.get("status")).get("message")
    text = f"AnalysisRun {name} is {run_phase(run) or 'Pending'}"
    return f"{text}: {detail}" if detail else text


def reverify_requested(value: str | None, latest: Verification | None) -> Literal[
    "none", "start", "wait", "stale"
]:
    """What a ``kargo.akuity.io/reverify`` annotation asks for right now.

    ``start`` a new attempt; ``wait`` until the latest verification finishes (the
    annotation stays); ``stale`` names an older verification (drop it); ``none``.
    """
    if value is None:
        return "none"
    if latest is None:
        return "stale"  # nothing verified yet for this freight: a fresh one starts anyway
    if value and value != latest.get("id"):
        return "stale"
    if latest.get("phase") not in FINISHED:
        return "wait"
    return "start"


def new_verification(
    *, run_name: str, freight: Sequence[str], collection: str, attempt: int, message: str
) -> Verification:
    return {
        "id": run_name,
        "freight": list(freight),
        "collection": collection,
        "attempt": attempt,
        "phase": "Pending",
        "message": message,
    }


def finish(v: Verification, *, phase: Phase, message: str, now: str) -> Verification:
    out: Verification = copy.deepcopy(v)
    out["phase"] = phase
    out["message"] = message
    out.setdefault("startTime", now)
    out["finishTime"] = now
    return out


def with_history(history: Sequence[Mapping[str, Any]] | None, v: Verification) -> list[Obj]:
    """History newest first with ``v`` at the top (replacing its older self), max 10."""
    rest = [copy.deepcopy(dict(h)) for h in history or () if h.get("id") != v.get("id")]
    return [copy.deepcopy(dict(v)), *rest][:HISTORY_LIMIT]


def status_with(
    status: Mapping[str, Any] | None,
    v: Verification,
    *,
    generation: int | None,
    now: str,
    record_history: bool = True,
) -> Obj:
    """The Stage status with ``v`` as the latest verification, history and condition."""
    out = copy.deepcopy(dict(status or {}))
    out["verification"] = copy.deepcopy(dict(v))
    if record_history and v.get("id"):
        out["verificationHistory"] = with_history(out.get("verificationHistory"), v)
    cond_status, reason = CONDITIONS[v["phase"]]
    out["conditions"] = set_condition(
        out.get("conditions"), type=CONDITION, status=cond_status,  # type: ignore[arg-type]
        reason=reason, message=v.get("message", ""), observed_generation=generation, now=now,
    )
    return out


def status_without_verification(
    status: Mapping[str, Any] | None, aborted: Verification | None = None
) -> Obj:
    """The Stage status once it has no analysis stanza any more.

    ``verification`` and the ``Verified`` condition go (they would describe a check
    that no longer exists); ``verificationHistory`` stays as the record of what ran,
    with ``aborted`` (an active verification that was stopped) on top of it.
    """
    out = copy.deepcopy(dict(status or {}))
    out.pop("verification", None)
    if aborted is not None:
        out["verificationHistory"] = with_history(out.get("verificationHistory"), aborted)
    conditions = [c for c in out.get("conditions") or []
                  if not (isinstance(c, dict) and c.get("type") == CONDITION)]
    if conditions:
        out["conditions"] = conditions
    else:
        out.pop("conditions", None)
    return out


def same_status(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether writing ``b`` over ``a`` would change anything we own.

    Ignores lastTransitionTime churn only where ``set_condition`` already kept it, so
    a plain equality check of our three fields is enough.
    """
    keys = ("verification", "verificationHistory", "conditions")
    a, b = a or {}, b or {}
    return all(a.get(k) == b.get(k) for k in keys)


def stages_in_verified_in(freight: Mapping[str, Any]) -> list[str]:
    return list(_dict(_dict(freight.get("status")).get("verifiedIn")))
