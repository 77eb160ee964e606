"""What must hold of engine-mode verification once a cluster has settled, however it
got there (SIGKILLs, API server and etcd restarts, 410s, refused writes), as counts
of defects: the planner's property test (tests/unit/verification/test_plan_property.py)
and the fault suites (tests/faults/) check the same rules over the same shapes.

Pure: Stages, runs and Freight in, defects out. A defect is named by the objects it
is about, so a failing check says where to look.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from reconciler.verification.payloads import (
    FINISHED,
    collection_id,
    freight_history,
    freight_names,
    is_ours,
    run_collection,
    run_of,
    run_phase,
    run_stage,
    verification_history,
    verified_in,
)
from reconciler.verification.plan import ACTOR, RUN_PHASES

RUN_END = ("Successful", "Failed", "Error", "Inconclusive")


@dataclass
class Defects:
    duplicates: list[str] = field(default_factory=list)  # two runs (or entries) for one
    wrong_phases: list[str] = field(default_factory=list)  # entry phase != its run's
    missing_verified_in: list[str] = field(default_factory=list)
    false_verified_in: list[str] = field(default_factory=list)
    left_running: list[str] = field(default_factory=list)  # a run no current entry follows
    unrecorded: list[str] = field(default_factory=list)  # a run no entry records

    def counts(self) -> dict[str, int]:
        return {f.name: len(getattr(self, f.name)) for f in fields(self)}

    @property
    def total(self) -> int:
        return sum(self.counts().values())

    def add(self, other: Defects) -> None:
        for f in fields(self):
            getattr(self, f.name).extend(getattr(other, f.name))


def open_run(run: Mapping[str, Any] | None) -> bool:
    """Still Pending/Running and not asked to terminate."""
    return run is not None and run_phase(run) not in RUN_END and not (
        (run.get("spec") or {}).get("terminate"))


def defects(*, stages: Iterable[Mapping[str, Any]], runs: Iterable[Mapping[str, Any]],
            freight: Iterable[Mapping[str, Any]]) -> Defects:
    """Every defect of every Stage (with only rollgate verifying them)."""
    runs = [r for r in runs if is_ours(r)]
    by_name = {str(f["metadata"]["name"]): f for f in freight}
    out = Defects()
    for stage in stages:
        name = str(stage["metadata"]["name"])
        out.add(_stage_defects(stage, [r for r in runs if run_stage(r) == name], by_name))
    return out


def _stage_defects(stage: Mapping[str, Any], runs: list[Mapping[str, Any]],
                   freight: Mapping[str, Mapping[str, Any]]) -> Defects:
    name = str(stage["metadata"]["name"])
    out = Defects()
    collections = freight_history(stage)
    held = {collection_id(c): i for i, c in enumerate(collections)}
    entries: dict[str, tuple[int, Mapping[str, Any]]] = {}
    for index, collection in enumerate(collections):
        seen: set[str] = set()
        for entry in verification_history(collection):
            entry_id = str(entry.get("id"))
            if entry_id in seen:
                out.duplicates.append(f"{name}: entry {entry_id} twice")
            seen.add(entry_id)
            entries.setdefault(entry_id, (index, entry))
            entries.setdefault(run_of(entry), (index, entry))
    named = {str(r["metadata"]["name"]): r for r in runs}
    per_collection: dict[str, list[str]] = {}
    for run_name, run in named.items():
        per_collection.setdefault(run_collection(run), []).append(run_name)
        recorded = entries.get(run_name)
        if recorded is None and run_collection(run) in held:
            out.unrecorded.append(f"{name}: run {run_name}")
        if open_run(run) and not (recorded is not None and recorded[0] == 0 and (
                verification_history(collections[0])[:1] == [recorded[1]])
                and recorded[1].get("phase") not in FINISHED):
            out.left_running.append(f"{name}: run {run_name} ({run_phase(run) or 'new'})")
    out.duplicates += [f"{name}: runs {sorted(v)} for one collection"
                       for v in per_collection.values() if len(v) > 1]
    for entry_id, (_, recorded_entry) in sorted(entries.items()):
        if entry_id != recorded_entry.get("id") or recorded_entry.get("actor") != ACTOR:
            continue
        out.wrong_phases += _phase_defects(name, recorded_entry, named)
    missing, false = _verified_in_defects(name, collections, freight)
    out.missing_verified_in += missing
    out.false_verified_in += false
    return out


def _phase_defects(stage: str, entry: Mapping[str, Any],
                   runs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    run = runs.get(run_of(entry)) or runs.get(str(entry.get("id")))
    if run is None:
        return []
    phase = entry.get("phase")
    if phase == "Aborted":
        terminated = bool((run.get("spec") or {}).get("terminate"))
        return [] if terminated else [f"{stage}: {entry.get('id')} Aborted, run not terminated"]
    wanted = RUN_PHASES.get(run_phase(run), "Running")
    return [] if phase == wanted else [
        f"{stage}: {entry.get('id')} is {phase}, its run {run_phase(run) or 'new'}"]


def _verified_in_defects(stage: str, collections: list[Any],
                         freight: Mapping[str, Mapping[str, Any]]) -> tuple[list[str], list[str]]:
    """``verifiedIn`` follows the latest verification of the newest collection holding
    the Freight: Successful -> present, Failed -> absent, anything else -> no verdict;
    and it is never present when no verification of a collection holding it succeeded."""
    missing: list[str] = []
    false: list[str] = []
    newest: dict[str, Mapping[str, Any]] = {}
    succeeded: set[str] = set()
    for collection in collections:
        names = freight_names(collection)
        latest = (verification_history(collection) or [{}])[0]
        for fname in names:
            newest.setdefault(fname, latest)
        if any(e.get("phase") == "Successful" for e in verification_history(collection)):
            succeeded.update(names)
    for fname, newest_entry in sorted(newest.items()):
        if fname not in freight:
            continue
        marked = stage in verified_in(freight[fname])
        phase = newest_entry.get("phase")
        if phase == "Successful" and not marked:
            missing.append(f"{stage}: Freight {fname} ({newest_entry.get('id')} Successful)")
        elif marked and (phase == "Failed" or fname not in succeeded):
            false.append(f"{stage}: Freight {fname} ({newest_entry.get('id')} "
                         f"{phase or 'not verified'})")
    return missing, false
