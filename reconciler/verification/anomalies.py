"""Observe mode's findings: what looks wrong in another verifier's (Kargo's) work on a
Stage, one pure function per finding (docs/verification.md, "Observe mode").

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

from .options import OBSERVE_GRACE_SECONDS, OBSERVE_LAG_SECONDS
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
    run_status,
    verification_history,
    verified_in,
)

ACTIVE_RUN_PHASES: Final = frozenset({"", "Pending", "Running"})
# The AnalysisRun phases Argo Rollouts ends a run in (AnalysisPhase.Completed()).
COMPLETED_RUN_PHASES: Final = frozenset({"Successful", "Failed", "Error", "Inconclusive"})
# The verification phases that still wait for their run.
UNFINISHED_PHASES: Final = frozenset({"Pending", "Running"})

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


class Lagging(NamedTuple):
    """The current verification, still Pending/Running, and its run, which finished."""

    entry: Mapping[str, Any]
    run: Mapping[str, Any]
    finished_at: dt.datetime

    @property
    def subject(self) -> str:
        return entry_subject(self.entry, self.run)


def entry_subject(entry: Mapping[str, Any], run: Mapping[str, Any]) -> str:
    """The entry's id (its run's name if it has none): one finding, one refresh per entry."""
    return str(entry.get("id") or "") or name_of(run)


def run_finished_at(
    run: Mapping[str, Any], first_seen: Mapping[str, dt.datetime]
) -> dt.datetime | None:
    """When a completed run finished: its ``status.completedAt`` (Argo Rollouts sets it
    when the run completes), else when rollgate first saw it completed
    (``first_seen``, by run name); None while it runs."""
    if run_phase(run) not in COMPLETED_RUN_PHASES:
        return None
    return parse_time(run_status(run).get("completedAt")) or first_seen.get(name_of(run))


def unrecorded_run(
    stage: Mapping[str, Any], runs: Runs
) -> tuple[Mapping[str, Any], Mapping[str, Any]] | None:
    """(entry, run) when the current verification entry
    (``freightHistory[0].verificationHistory[0]``) still says Pending/Running while its
    run (by ``analysisRun.name``) has completed; else None."""
    entry = current_verification(current_freight(stage))
    if entry is None or entry.get("phase") not in UNFINISHED_PHASES or not run_of(entry):
        return None
    run = next((r for r in runs if name_of(r) == run_of(entry)), None)
    if run is None or run_phase(run) not in COMPLETED_RUN_PHASES:
        return None
    return entry, run


def became_completed(old: Mapping[str, Any] | None, run: Mapping[str, Any]) -> bool:
    """A watch event that changed the run's phase into a completed one (``old`` None: first
    seen, no change)."""
    return old is not None and run_phase(run) in COMPLETED_RUN_PHASES and (
        run_phase(old) != run_phase(run))


def phase_change_unmapped(
    old: Mapping[str, Any] | None, run: Mapping[str, Any], stage: Mapping[str, Any] | None
) -> bool:
    """True when a run's change into a completed phase finds no Stage whose current
    verification names it, as Kargo v1.11.2's AnalysisRun handler looks it up (its
    ``StagesByAnalysisRun`` index: ``freightHistory[0].verificationHistory[0].analysisRun``
    of the Stages in its cache). ``stage`` is the run's Stage as a cache holds it at the
    moment of the change. Kargo then hears of the result only at its 5-minute requeue
    (docs/verification.md, "Not recorded"). A run first seen already completed (``old`` None:
    a list at
    start-up) is no change, as Kargo's handler ignores creates."""
    if not became_completed(old, run):
        return False
    entry = current_verification(current_freight(stage)) if stage is not None else None
    # The Stage is the run's namespace's (its label maps it there), as Kargo's runs are.
    return entry is None or run_of(entry) != name_of(run)


def lagging(
    stage: Mapping[str, Any], runs: Runs, first_seen: Mapping[str, dt.datetime]
) -> Lagging | None:
    """The unrecorded run of the current verification (``unrecorded_run``) with the
    time it finished, however long ago; None when there is none or its finish time is
    unknown."""
    found = unrecorded_run(stage, runs)
    if found is None:
        return None
    entry, run = found
    finished_at = run_finished_at(run, first_seen)
    return Lagging(entry, run, finished_at) if finished_at is not None else None


def not_recorded(
    stage: Mapping[str, Any], runs: Runs, *, now: dt.datetime,
    lag: float = OBSERVE_LAG_SECONDS, first_seen: Mapping[str, dt.datetime] | None = None,
) -> list[Anomaly]:
    """``VerificationNotRecorded``: the run of the current verification finished more
    than ``lag`` seconds ago and the entry still says Pending/Running (Kargo has not
    recorded the result; it may only at its next 5-minute requeue)."""
    found = lagging(stage, runs, first_seen or {})
    if found is None:
        return []
    age = (now - found.finished_at).total_seconds()
    if age <= lag:
        return []
    entry, run = found.entry, found.run
    return [Anomaly(
        "VerificationNotRecorded", found.subject,
        f"AnalysisRun {name_of(run)} finished {run_phase(run)} {age:.0f}s ago, but "
        f"verification {entry.get('id') or name_of(run)} of Stage {name_of(stage)} still says "
        f"{entry.get('phase')}: the verifier has not recorded the result (Kargo may do so "
        "only at its next periodic reconcile; `kargo refresh stage` or rollgate's "
        "--refresh-lagging asks it at once)")]


# ---------------------------------------------------------------- all of them


def anomalies(
    stage: Mapping[str, Any],
    runs: Runs,
    freight: Mapping[str, Mapping[str, Any] | None],
    *,
    now: dt.datetime,
    grace: float = OBSERVE_GRACE_SECONDS,
    lag: float = OBSERVE_LAG_SECONDS,
    first_seen: Mapping[str, dt.datetime] | None = None,
) -> list[Anomaly]:
    """Every finding about ``stage``: duplicates, stale runs, verified despite a
    failure, not recorded."""
    return [
        *duplicate_runs(stage, runs, now=now, grace=grace),
        *stale_runs(stage, runs),
        *verified_despite_failure(stage, freight),
        *not_recorded(stage, runs, now=now, lag=lag, first_seen=first_seen),
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


def _lag_due(stage: Mapping[str, Any], runs: Runs, now: dt.datetime, lag: float,
             first_seen: Mapping[str, dt.datetime]) -> float | None:
    """Seconds until the current verification's finished run is ``lag`` old (with a
    0.1 s margin, so the next pass sees it past due), or None."""
    found = lagging(stage, runs, first_seen)
    if found is None:
        return None
    wait = lag - (now - found.finished_at).total_seconds()
    return wait + 0.1 if wait >= 0 else None


def recheck_after(
    stage: Mapping[str, Any], runs: Runs, *, now: dt.datetime,
    grace: float = OBSERVE_GRACE_SECONDS, lag: float = OBSERVE_LAG_SECONDS,
    first_seen: Mapping[str, dt.datetime] | None = None,
) -> float | None:
    """Seconds until a finding may become due with no event to wake the Stage (an
    unrecorded run reaching ``grace``, a finished run of the current verification
    reaching ``lag``), or None."""
    waits = [w for w in (_duplicate_due(stage, runs, now, grace),
                         _lag_due(stage, runs, now, lag, first_seen or {}))
             if w is not None]
    return min(waits) if waits else None
