"""``rollgate explain stage``: the verification of a Stage's current freight as one
timeline, built from the objects alone (docs/operating.md "Why is my freight not verified?").

"Why is my freight not verified?" is otherwise answered by reading three objects with
``kubectl get -o yaml``: the Stage (promotion, health, Kargo's verification entries and
``Verified`` condition), its AnalysisRuns (each metric's measurements) and the Freight
(``verifiedIn``). This module puts what matters of them in the order it happened,
adds every finding observe mode would report (``anomalies``, the same functions the
observer runs) and says in one sentence where verification stands (``answer``), using
the engine's own gate (``plan.waiting_for``) for what a verification waits for.

The document is plain JSON (``-o json`` prints it as it is; ``explain_text`` renders
it for a terminal). Pure: no I/O, no clock but the ``now`` it is given.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from schemas.objects import as_dict, as_list, meta_of

from .anomalies import Anomaly, anomalies
from .options import OBSERVE_GRACE_SECONDS, OBSERVE_LAG_SECONDS
from .payloads import (
    collection_id,
    current_freight,
    freight_names,
    name_of,
    run_collection,
    run_of,
    run_phase,
    run_status,
    stage_status,
    verification_history,
    verified_in,
)
from .plan import waiting_for

Obj = Mapping[str, Any]
Item = dict[str, Any]


# ---------------------------------------------------------------- the parts


def promotion_item(stage: Obj) -> Item | None:
    """The last promotion (``status.lastPromotion``), or the one running."""
    status = stage_status(stage)
    running = as_dict(status.get("currentPromotion"))
    if running:
        return {"time": None, "what": "promotion", "name": running.get("name") or "",
                "phase": "Running", "text": f"promotion {running.get('name') or ''} running"}
    last = as_dict(status.get("lastPromotion"))
    if not last:
        return None
    result = as_dict(last.get("status"))
    phase = str(result.get("phase") or "Unknown")
    finished = last.get("finishedAt") or result.get("finishedAt")
    text = f"promotion {last.get('name') or ''} finished: {phase}"
    if result.get("message"):
        text += f" ({result['message']})"
    return {"time": finished, "what": "promotion", "name": last.get("name") or "",
            "phase": phase, "message": result.get("message") or "", "text": text}


def health_item(stage: Obj) -> Item:
    """``status.health``: Kargo verifies only a Healthy Stage."""
    health = as_dict(stage_status(stage).get("health"))
    state = str(health.get("status") or "Unknown")
    issues = [str(i) for i in as_list(health.get("issues")) if i]
    text = f"health: {state}" + (f" ({'; '.join(issues)})" if issues else "")
    return {"time": None, "what": "health", "status": state, "issues": issues, "text": text}


def measurement_items(run: Obj) -> list[Item]:
    """Each metric's measurements, in the order Argo Rollouts took them."""
    found: list[Item] = []
    for result in as_list(run_status(run).get("metricResults")):
        metric = as_dict(result)
        name = str(metric.get("name") or "")
        for number, raw in enumerate(as_list(metric.get("measurements")), start=1):
            m = as_dict(raw)
            phase = str(m.get("phase") or "")
            text = f"metric {name} measurement {number}: {phase or 'Pending'}"
            if m.get("value") is not None:
                text += f", value {m['value']}"
            if m.get("message"):
                text += f": {m['message']}"
            found.append({"time": m.get("finishedAt") or m.get("startedAt"),
                          "what": "measurement", "run": name_of(run), "metric": name,
                          "number": number, "phase": phase, "value": m.get("value"),
                          "message": m.get("message") or "", "text": text})
    return found


def metric_summaries(run: Obj) -> list[dict[str, Any]]:
    """Per metric: its phase, message and counts (``status.metricResults``)."""
    return [{"name": str(m.get("name") or ""), "phase": str(m.get("phase") or ""),
             "message": str(m.get("message") or ""),
             **{k: int(m.get(k) or 0) for k in ("count", "successful", "failed",
                                                 "inconclusive", "error")}}
            for m in map(as_dict, as_list(run_status(run).get("metricResults")))]


def run_items(run: Obj) -> list[Item]:
    """The run starting, its measurements, and its end."""
    status = run_status(run)
    name = name_of(run)
    items: list[Item] = [{"time": status.get("startedAt") or meta_of(run).get(
        "creationTimestamp"), "what": "analysis-run-started", "run": name,
        "text": f"AnalysisRun {name} started"}]
    items += measurement_items(run)
    phase = run_phase(run)
    if phase in ("Successful", "Failed", "Error", "Inconclusive"):
        text = f"AnalysisRun {name} completed: {phase}"
        if status.get("message"):
            text += f" ({status['message']})"
        items.append({"time": status.get("completedAt"), "what": "analysis-run-completed",
                      "run": name, "phase": phase, "message": status.get("message") or "",
                      "metrics": metric_summaries(run), "text": text})
    else:
        items.append({"time": None, "what": "analysis-run-running", "run": name,
                      "phase": phase or "Pending", "metrics": metric_summaries(run),
                      "text": f"AnalysisRun {name} is {phase or 'Pending'}"})
    return items


def entry_items(entry: Obj, runs: Mapping[str, Obj]) -> list[Item]:
    """One verification entry of Kargo's (start, its run, end)."""
    ident = str(entry.get("id") or "")
    run_name = run_of(entry)
    actor = f" by {entry['actor']}" if entry.get("actor") else ""
    items: list[Item] = [{
        "time": entry.get("startTime"), "what": "verification-started", "id": ident,
        "run": run_name, "actor": entry.get("actor") or "",
        "text": f"verification {ident} started{actor}"
                + (f" (AnalysisRun {run_name})" if run_name else "")}]
    run = runs.get(run_name)
    if run is not None:
        items += run_items(run)
    elif run_name:
        items.append({"time": None, "what": "analysis-run-missing", "run": run_name,
                      "text": f"AnalysisRun {run_name} not found (deleted?)"})
    phase = str(entry.get("phase") or "Pending")
    text = f"verification {ident}: {phase}"
    if entry.get("message"):
        text += f" ({entry['message']})"
    items.append({"time": entry.get("finishTime"), "what": "verification", "id": ident,
                  "phase": phase, "message": entry.get("message") or "", "text": text})
    return items


def condition_item(stage: Obj) -> Item:
    """Kargo's ``Verified`` condition on the Stage."""
    found = next((as_dict(c) for c in as_list(stage_status(stage).get("conditions"))
                  if as_dict(c).get("type") == "Verified"), None)
    if found is None:
        return {"time": None, "what": "condition", "status": "", "reason": "", "message": "",
                "text": "condition Verified: not set"}
    text = f"condition Verified={found.get('status')} ({found.get('reason') or ''})"
    if found.get("message"):
        text += f": {found['message']}"
    # Its state now: lastTransitionTime is when the status last changed, which can be
    # before this freight's verification began, so it stays out of the time column.
    return {"time": None, "what": "condition", "status": found.get("status") or "",
            "reason": found.get("reason") or "", "message": found.get("message") or "",
            "lastTransitionTime": found.get("lastTransitionTime"), "text": text}


def verified_in_items(stage: Obj, freight: Mapping[str, Obj | None]) -> list[Item]:
    """Whether each Freight of the current collection says it is verified here."""
    name = name_of(stage)
    items: list[Item] = []
    for freight_name in sorted(freight):
        obj = freight.get(freight_name)
        if obj is None:
            items.append({"time": None, "what": "freight", "freight": freight_name,
                          "verified": False, "text": f"Freight {freight_name} not found"})
            continue
        entry = verified_in(obj).get(name)
        when = as_dict(entry).get("verifiedAt") if entry is not None else None
        text = (f"Freight {freight_name} is verified in {name}" if entry is not None
                else f"Freight {freight_name} is not verified in {name}")
        items.append({"time": when, "what": "freight", "freight": freight_name,
                      "verified": entry is not None, "text": text})
    return items


def finding_items(found: Sequence[Anomaly]) -> list[Item]:
    return [{"time": None, "what": "finding", "kind": a.kind, "subject": a.subject,
             "message": a.message, "text": f"{a.kind}: {a.message}"} for a in found]


# ---------------------------------------------------------------- the answer


def _failing_metrics(run: Obj | None) -> str:
    """``metric m: Failed, last value v (message)`` for each metric that did not succeed."""
    parts = []
    for metric in map(as_dict, as_list(run_status(run or {}).get("metricResults"))):
        if metric.get("phase") in (None, "", "Successful"):
            continue
        last = as_dict((as_list(metric.get("measurements")) or [{}])[-1])
        part = f"metric {metric.get('name')}: {metric.get('phase')}"
        if last.get("value") is not None:
            part += f", last value {last['value']}"
        message = metric.get("message") or last.get("message")
        if message:
            part += f" ({message})"
        parts.append(part)
    return "; ".join(parts)


def answer(stage: Obj, runs: Mapping[str, Obj], found: Sequence[Anomaly]) -> str:
    """Where the verification of the current freight stands, in one sentence."""
    current = current_freight(stage)
    if current is None:
        return "no freight: nothing has been promoted into this Stage yet"
    condition = condition_item(stage)
    history = verification_history(current)
    if condition["status"] == "True":
        verdict = "verified"
        if history and history[0].get("phase") != "Successful":
            verdict += (f" (an earlier verification succeeded; the latest, "
                        f"{history[0].get('id')}, is {history[0].get('phase')})")
        return verdict + "".join(f"; {a.kind}" for a in found)
    if not history:
        waiting = waiting_for(stage, current)
        return ("not verified: " + (waiting or "no verification has started yet (the "
                "verifier has not picked the Stage up)"))
    latest = history[0]
    phase = str(latest.get("phase") or "Pending")
    run = runs.get(run_of(latest))
    text = f"not verified: the latest verification ({latest.get('id')}) is {phase}"
    if latest.get("message"):
        text += f": {latest['message']}"
    failing = _failing_metrics(run)
    if failing and phase != "Successful":
        text += f"; {failing}"
    if found:
        text += "; " + "; ".join(a.kind for a in found)
    return text


# ---------------------------------------------------------------- the document


def explain_stage(
    stage: Obj,
    runs: Sequence[Obj],
    freight: Mapping[str, Obj | None],
    *,
    now: dt.datetime,
    grace: float = OBSERVE_GRACE_SECONDS,
    lag: float = OBSERVE_LAG_SECONDS,
) -> dict[str, Any]:
    """The explanation of ``stage``'s current verification: a JSON document.

    ``runs``: the Stage's AnalysisRuns (found by Kargo's Stage label); ``freight``: the
    Freight of the current collection by name (None: not found). The timeline holds,
    in order: the promotion, health, each verification entry of the current freight
    (oldest first) with its run and measurements, the ``Verified`` condition, each
    Freight's ``verifiedIn``; then the findings observe mode would report."""
    current = current_freight(stage)
    by_name = {name_of(r): r for r in runs}
    found = anomalies(stage, runs, freight, now=now, grace=grace, lag=lag)
    timeline: list[Item] = [i for i in (promotion_item(stage),) if i is not None]
    timeline.append(health_item(stage))
    recorded = set()
    for entry in reversed(verification_history(current)):
        recorded.add(run_of(entry))
        timeline += entry_items(entry, by_name)
    cid = collection_id(current) if current is not None else ""
    for run in sorted(runs, key=lambda r: str(meta_of(r).get("creationTimestamp") or "")):
        if cid and run_collection(run) == cid and name_of(run) not in recorded:
            timeline += [{**i, "unrecorded": True,
                          "text": i["text"] + " [in no verification entry]"}
                         for i in run_items(run)]
    timeline.append(condition_item(stage))
    timeline += verified_in_items(stage, freight)
    meta = meta_of(stage)
    return {
        "stage": {"namespace": meta.get("namespace") or "", "name": name_of(stage)},
        "freight": {"collection": cid,
                    "names": freight_names(current) if current is not None else []},
        "answer": answer(stage, by_name, found),
        "timeline": timeline,
        "findings": finding_items(found),
    }
