"""Observe mode's findings: what looks wrong in another verifier's (Kargo's) work on a
Stage, one pure function per finding (README, "Observe mode").

Each function reads the Stage as the cache holds it, its runs and, where it needs them,
Freight and the clock, and returns the findings; ``anomalies`` runs them all in order
and ``recheck_after`` says when a pass must look again because a finding becomes due
with no event to wake the Stage. Pure: no I/O.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

from schemas.objects import meta_of

from .options import OBSERVE_GRACE_SECONDS
from .payloads import (
    collection_id,
    current_freight,
    current_verification,
    freight_history,
    freight_names,
    name_of,
    parse_time,
    run_collection,
    run_of,
    run_phase,
    verification_history,
    verified_in,
)

ACTIVE_RUN_PHASES: Final = frozenset({"", "Pending", "Running"})

Runs = Sequence[Mapping[str, Any]]


class Anomaly(NamedTuple):
    kind: str  # Event reason and metric label
    subject: str  # what it is about (run, Freight or entry), for de-duplication
    message: str


def _age(run: Mapping[str, Any], now: dt.datetime) -> float:
    created = parse_time(meta_of(run).get("creationTimestamp"))
    return (now - created).total_seconds() if created is not None else 0.0


def _recorded(stage: Mapping[str, Any]) -> dict[str, set[str]]:
    """Run names each freight collection's verifications reference, by collection id."""
    return {collection_id(c): {run_of(e) for e in verification_history(c)}
            for c in freight_history(stage)}


# ---------------------------------------------------------------- the findings


def duplicate_runs(
    stage: Mapping[str, Any], runs: Runs, *, now: dt.datetime,
    grace: float = OBSERVE_GRACE_SECONDS,
) -> list[Anomaly]:
    """``DuplicateVerificationRuns``: two or more runs for one (stage, freight collection)
    and one of them, older than ``grace``, is in no verification entry (no reverify
    started it)."""
    name = name_of(stage)
    recorded = _recorded(stage)
    by_collection: dict[str, list[Mapping[str, Any]]] = {}
    for run in runs:
        by_collection.setdefault(run_collection(run), []).append(run)
    found: list[Anomaly] = []
    for cid, group in sorted(by_collection.items()):
        if len(group) < 2:
            continue
        stray = sorted(name_of(r) for r in group
                       if name_of(r) not in recorded.get(cid, set()) and _age(r, now) > grace)
        if stray:
            found.append(Anomaly(
                "DuplicateVerificationRuns", ",".join(stray),
                f"{len(group)} AnalysisRuns verify freight collection {cid} of Stage {name}, "
                f"but {', '.join(stray)} is in no verification of its history (no reverify "
                "started it): the verifier ran the same verification twice"))
    return found


def stale_runs(stage: Mapping[str, Any], runs: Runs) -> list[Anomaly]:
    """``StaleVerificationRun``: a run still Pending/Running for freight that is no
    longer the Stage's current freight."""
    current = current_freight(stage)
    if current is None:
        return []
    cid = collection_id(current)
    found: list[Anomaly] = []
    for run in runs:
        if run_collection(run) != cid and run_phase(run) in ACTIVE_RUN_PHASES:
            found.append(Anomaly(
                "StaleVerificationRun", name_of(run),
                f"AnalysisRun {name_of(run)} is still {run_phase(run) or 'Pending'} for freight "
                f"collection {run_collection(run)}, which is no longer current in Stage "
                f"{name_of(stage)} (current: {cid}); nobody will read its result"))
    return found


def verified_despite_failure(
    stage: Mapping[str, Any], freight: Mapping[str, Mapping[str, Any] | None]
) -> list[Anomaly]:
    """``VerifiedDespiteFailure``: the latest verification of the current freight Failed
    while a Freight's ``verifiedIn`` still names the Stage."""
    current = current_freight(stage)
    latest = current_verification(current)
    if current is None or latest is None or latest.get("phase") != "Failed":
        return []
    name = name_of(stage)
    return [Anomaly(
        "VerifiedDespiteFailure", freight_name,
        f"verification {latest.get('id')} of Stage {name} Failed, but Freight "
        f"{freight_name} is still verified in it (status.verifiedIn)")
        for freight_name in freight_names(current)
        if name in verified_in(freight.get(freight_name))]


# ---------------------------------------------------------------- all of them


def anomalies(
    stage: Mapping[str, Any],
    runs: Runs,
    freight: Mapping[str, Mapping[str, Any] | None],
    *,
    now: dt.datetime,
    grace: float = OBSERVE_GRACE_SECONDS,
) -> list[Anomaly]:
    """Every finding about ``stage``: duplicates, stale runs, verified despite a
    failure."""
    return [
        *duplicate_runs(stage, runs, now=now, grace=grace),
        *stale_runs(stage, runs),
        *verified_despite_failure(stage, freight),
    ]


# ---------------------------------------------------------------- when to look again


def _duplicate_due(stage: Mapping[str, Any], runs: Runs, now: dt.datetime,
                   grace: float) -> float | None:
    """Seconds until an unrecorded run is old enough to count as a duplicate (a margin
    of 1 s after, at least 1 s from now), or None."""
    recorded = {name for names in _recorded(stage).values() for name in names}
    waits = [grace - _age(r, now) for r in runs
             if name_of(r) not in recorded and _age(r, now) <= grace]
    return max(1.0, min(waits) + 1.0) if waits else None


def recheck_after(
    stage: Mapping[str, Any], runs: Runs, *, now: dt.datetime,
    grace: float = OBSERVE_GRACE_SECONDS,
) -> float | None:
    """Seconds until a finding may become due with no event to wake the Stage (an
    unrecorded run reaching ``grace``), or None."""
    return _duplicate_due(stage, runs, now, grace)
