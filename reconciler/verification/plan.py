"""Stage verification, engine mode, as a pure plan (docs/verification.md, "Engine mode").

``plan`` reads one Stage, its AnalysisRuns, Freight and AnalysisTemplates as the cache
holds them (``World``: plain data, no callable and no client) and returns everything a
pass must do: the whole new value of the status fields rollgate
writes (``status.freightHistory`` with its ``verificationHistory`` entries, and the
``Verified`` condition), the run to create, the runs to terminate, the Freight
``verifiedIn`` patches and the Events. Nothing here does I/O, so every rule is tested
without an API server, and a pass over an unchanged world provably plans nothing. A pass
plans once: the status it writes after creating a run already records that run.

The verification of the current freight is a list of named steps run in order
(``_Planner.VERIFY_STEPS``), in the spirit of Kargo's ordered sub-reconcilers
(``reconcile()`` in ``pkg/controller/stages/regular_stages.go``): each step gets the
facts of the pass and the ``Progress`` so far, and returns the new ``Progress``; none
reaches into another's variables.

State lives only in Kargo's own fields and in the runs (their deterministic names,
labels and the ``rollgate.dev/request`` annotation): a restarted reconciler reads the
same state and reaches the same plan.
"""
from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, NamedTuple, cast

import schemas
from schemas.constants import ANNOTATION_ABORT, ANNOTATION_REVERIFY, KARGO_FINALIZER
from schemas.objects import Obj, as_dict, as_list, meta_of
from schemas.references import TemplateKey

from ..conditions import get_condition, set_condition
from ..payloads import ConditionStatus
from .analysis_run import AnalysisBuildError, build_analysis_run, templates_lookup
from .naming import run_name
from .payloads import (
    FINISHED,
    AnalysisRunReference,
    FreightCollection,
    FreightStatusPatch,
    Phase,
    StageStatusWrite,
    VerificationInfo,
    collection_id,
    freight_names,
    is_ours,
    run_attempt,
    run_collection,
    run_of,
    run_phase,
    run_request,
    run_status,
    stage_status,
    verification_history,
    verified_in,
)

ACTOR = "rollgate"
HISTORY_LIMIT = 10
CONDITION = "Verified"
# AnalysisRun phase -> verification phase (Kargo copies the run's phase the same way).
RUN_PHASES: dict[str, Phase] = {
    "": "Pending",
    "Pending": "Pending",
    "Running": "Running",
    "Successful": "Successful",
    "Failed": "Failed",
    "Error": "Error",
    "Inconclusive": "Inconclusive",
}
# verification phase -> (event type, reason) for a finished verification
EVENTS: dict[str, tuple[str, str]] = {
    "Successful": ("Normal", "VerificationSucceeded"),
    "Failed": ("Warning", "VerificationFailed"),
    "Error": ("Warning", "VerificationError"),
    "Inconclusive": ("Warning", "VerificationInconclusive"),
    "Aborted": ("Normal", "VerificationAborted"),
}


class Event(NamedTuple):
    type: str
    reason: str
    message: str


class Terminate(NamedTuple):
    run: str
    request: str | None  # the abort request's value, recorded on the run


class Finished(NamedTuple):
    """A verification that finished in this pass (for metrics)."""

    entry: Mapping[str, Any]
    run: Obj | None


@dataclass(frozen=True)
class World:
    """What one pass plans from: objects as the API server holds them, plain data only
    (no callable, no client), so planning can set off no request."""

    stage: Mapping[str, Any]
    runs: Sequence[Mapping[str, Any]]  # every AnalysisRun labelled with the Stage
    freight: Mapping[str, Mapping[str, Any] | None]  # name -> Freight (None: not found)
    # Every template the Stage's run reads (analysis_run.referenced_templates); one that
    # does not exist is absent.
    templates: Mapping[TemplateKey, Mapping[str, Any]]
    now: str
    # run name -> why it cannot be used (a foreign object holds it, the API refused it)
    blocked: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Plan:
    status: StageStatusWrite | None = None  # fields to write, whole; None = no write
    create: Obj | None = None
    terminate: list[Terminate] = field(default_factory=list)
    freight: list[tuple[str, FreightStatusPatch]] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    finished: list[Finished] = field(default_factory=list)
    conflict: str | None = None  # another verifier acts on this collection

    @property
    def empty(self) -> bool:
        return not (self.status or self.create or self.terminate or self.freight
                    or self.events)


class Request(NamedTuple):
    """A reverify or abort request as Kargo's UI, CLI and API write it."""

    raw: str  # the annotation's value, recorded on the run that handled it
    id: str  # "" = the latest verification
    actor: str


def parse_request(stage: Mapping[str, Any], key: str) -> Request | None:
    """``{"id", "actor", "controlPlane"}`` JSON or a plain id; None when absent."""
    raw = as_dict(meta_of(stage).get("annotations")).get(key)
    if not isinstance(raw, str):
        return None
    text = raw.strip()
    if text.startswith("{"):
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if isinstance(body, dict):
            return Request(raw, str(body.get("id") or ""), str(body.get("actor") or ""))
    return Request(raw, text, "")


def waiting_for(stage: Mapping[str, Any], current: Mapping[str, Any]) -> str | None:
    """What the Stage still waits for before its current freight can be verified (as in
    Kargo v1: no promotion running, the last one Succeeded for this freight, and
    ``status.health`` Healthy); None when ready."""
    status = stage_status(stage)
    promotion = status.get("currentPromotion")
    if promotion:
        name = as_dict(promotion).get("name") or ""
        return f"waiting for promotion {name} to finish".replace("  ", " ")
    last = as_dict(status.get("lastPromotion"))
    if last:
        phase = as_dict(last.get("status")).get("phase") or ""
        promoted = as_dict(as_dict(last.get("status")).get("freightCollection")).get("id")
        if phase != "Succeeded":
            return (f"waiting for promotion {last.get('name', '')} to succeed "
                    f"(phase {phase or 'unknown'})")
        if promoted and promoted != collection_id(current):
            return (f"waiting for the last promotion ({last.get('name', '')}) to record the "
                    "current freight")
    health = as_dict(status.get("health")).get("status") or "Unknown"
    if health != "Healthy":
        return f"waiting for the Stage to become Healthy (health is {health})"
    return None


# ---------------------------------------------------------------- entries


def _copy(entry: Mapping[str, Any]) -> VerificationInfo:
    """A deep copy of an entry as Kargo stores it."""
    return cast(VerificationInfo, copy.deepcopy(dict(entry)))


def entry_from_run(
    entry: Mapping[str, Any], run: Mapping[str, Any], now: str
) -> VerificationInfo:
    """``entry`` brought up to date with its run (phase, message, run reference)."""
    out = _copy(entry)
    meta = meta_of(run)
    phase = RUN_PHASES.get(run_phase(run), "Running")
    out["id"] = str(meta.get("name"))
    out["actor"] = ACTOR
    out["analysisRun"] = {"name": str(meta.get("name")), "namespace": str(meta.get("namespace")),
                          "phase": run_phase(run)}
    out.setdefault("startTime", str(meta.get("creationTimestamp") or now))
    out["phase"] = phase
    detail = run_status(run).get("message")
    text = f"AnalysisRun {meta.get('name')} is {run_phase(run) or 'Pending'}"
    out["message"] = f"{text}: {detail}" if detail else text
    if phase in FINISHED:
        out.setdefault("finishTime", str(run_status(run).get("completedAt") or now))
    else:
        out.pop("finishTime", None)
    return out


def finish(entry: Mapping[str, Any], *, phase: Phase, message: str, now: str) -> VerificationInfo:
    out = _copy(entry)
    out["phase"] = phase
    out["message"] = message
    out.setdefault("startTime", now)
    out["finishTime"] = now
    return out


def push(history: Sequence[Mapping[str, Any]], entry: Mapping[str, Any]) -> list[Obj]:
    """History newest first with ``entry`` at the top (replacing its older self)."""
    rest = [copy.deepcopy(dict(h)) for h in history if h.get("id") != entry.get("id")]
    return [copy.deepcopy(dict(entry)), *rest][:HISTORY_LIMIT]


def replace_entry(history: Sequence[Mapping[str, Any]], entry: Mapping[str, Any]) -> list[Obj]:
    """History with the entry of the same id replaced in place."""
    return [copy.deepcopy(dict(entry)) if h.get("id") == entry.get("id")
            else copy.deepcopy(dict(h)) for h in history]


def verified_condition(
    history: Sequence[Mapping[str, Any]], *, waiting: str | None
) -> tuple[ConditionStatus, str, str]:
    """(status, reason, message) of ``Verified`` as Kargo v1.11.2 sets it
    (``verifyStageFreight`` in pkg/controller/stages/regular_stages.go): True once any
    verification of the current freight succeeded, else from the latest one.
    ``waiting``: the gate's message while the latest entry waits for it."""
    if any(h.get("phase") == "Successful" for h in history):
        return "True", "Verified", "Freight has been verified"
    if not history:
        return "Unknown", "WaitingForVerification", waiting or (
            "Waiting for verification to be performed after successful promotion")
    latest = history[0]
    phase = latest.get("phase")
    message = str(latest.get("message") or "")
    if phase == "Pending":
        if not latest.get("analysisRun"):
            return "Unknown", "WaitingForVerification", waiting or message
        return "Unknown", "VerificationPending", "Freight is pending verification"
    if phase == "Running":
        return "Unknown", "VerificationRunning", "Freight is currently being verified"
    if phase == "Failed":
        return "False", "VerificationFailed", message
    if phase == "Error":
        return "False", "VerificationError", message
    if phase == "Aborted":
        return "False", "VerificationAborted", message
    if phase == "Inconclusive":
        return "Unknown", "VerificationInconclusive", message
    return "Unknown", "UnknownVerificationPhase", (
        f"Freight verification is in an unknown phase: {phase}")


# ---------------------------------------------------------------- the plan


def plan(world: World) -> Plan:
    """Everything one pass must do for ``world.stage`` (see the module docstring)."""
    return _Planner(world).run()


# (attempt, reverify request value or None): the attempt a pass starts.
Start = tuple[int, "str | None"]


@dataclass(frozen=True)
class Facts:
    """What the verification steps of one pass read; fixed for the pass."""

    current: Obj  # freightHistory[0], the planner's own copy (the status it writes)
    cid: str  # its freight collection id
    names: list[str]  # its Freight names
    history: list[Obj]  # its verifications as stored, newest first
    ours: list[Mapping[str, Any]]  # rollgate's runs for this collection
    next_attempt: int  # one more than any attempt seen in runs or entries


@dataclass(frozen=True)
class Progress:
    """What the steps have decided so far."""

    latest: Obj | None  # the latest verification as this pass sees it
    start: Start | None = None  # the attempt to start, if any


class _Planner:
    def __init__(self, world: World) -> None:
        self.world = world
        self.stage = world.stage
        meta = meta_of(self.stage)
        self.name = str(meta.get("name"))
        self.namespace = str(meta.get("namespace") or "")
        self.generation = meta.get("generation")
        self.status = stage_status(self.stage)
        self.history: list[Obj] = [
            copy.deepcopy(c) for c in as_list(self.status.get("freightHistory"))
            if isinstance(c, dict)]
        self.runs = {str(meta_of(r).get("name")): r for r in world.runs}
        self.out = Plan()
        self._conditions: list[Any] | None = None  # None: leave the conditions alone

    # -- entry point ------------------------------------------------------------
    def run(self) -> Plan:
        spec = schemas.normalize_analysis(self.stage)
        if not self.history:
            if spec is not None:
                self._set_condition("Unknown", "NoFreight",
                                    "Stage has no current Freight to verify")
            self._finish_status()
            return self.out
        current = self.history[0]
        cid = collection_id(current)
        self._supersede(cid)
        if spec is None:
            self._stanza_removed(current)
            self._finish_status()
            return self.out
        foreign = self._foreign(current, cid)
        if foreign:
            self.out = Plan(conflict=foreign,
                            events=[Event("Warning", "VerifierConflict", foreign)])
            return self.out
        self._verify(current, cid)
        self._finish_status()
        return self.out

    def _run_for(self, entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The run of a verification entry: the one it names, or for an entry of ours
        written before its run (Pending, no ``analysisRun`` yet), the run named by its
        id, which is the run's deterministic name: that run may exist although the pass
        that created it could not record it (a 409 from a promotion landing)."""
        named = self.runs.get(run_of(entry))
        if named is not None or entry.get("actor") != ACTOR:
            return named
        return self.runs.get(str(entry.get("id") or ""))

    # -- older freight, a removed stanza, another verifier -------------------------
    def _supersede(self, cid: str) -> None:
        """Unfinished verifications of older freight end: their runs are terminated."""
        self._terminate_forgotten(cid)
        # Freight of a newer collection follow that one's verdict, not an older one's.
        decided = set(freight_names(self.history[0]))
        recorded = {name for c in self.history for e in verification_history(c)
                    for name in (str(e.get("id")), run_of(e))}
        for collection in self.history[1:]:
            if collection_id(collection) != cid:
                self._record_unrecorded(collection, recorded)
            for entry in verification_history(collection):
                if entry.get("actor") != ACTOR or entry.get("phase") in FINISHED:
                    continue
                done, run = self._superseded(entry, cid)
                collection["verificationHistory"] = replace_entry(
                    collection["verificationHistory"], done)
                self._finished(done, run)
            names = freight_names(collection)
            self._older_freight([n for n in names if n not in decided], collection)
            decided.update(names)

    def _older_freight(self, names: list[str], collection: Mapping[str, Any]) -> None:
        """``verifiedIn`` of older freight follows its latest verification too: a run
        that ended on its own after the Stage moved on, or a Freight that reached the
        cache only after its verification was recorded (for a collection that is no
        longer the current one)."""
        latest = verification_history(collection)[:1]
        if latest and latest[0].get("actor") == ACTOR:
            self._freight(names, latest[0])

    def _record_unrecorded(self, collection: Obj, recorded: set[str]) -> None:
        """A run of ours for this older freight that no entry names gets one, so it
        ends like the others: a pass created it, then a SIGKILL or a refused Stage
        write (a promotion landing) lost the entry, and the Stage moved on. Without
        the entry nothing would terminate the run and its outcome would be recorded
        nowhere. The entry goes on top: the run is newer than any entry
        the collection holds, as it was created after them."""
        mine = collection_id(collection)
        for run in sorted(self.world.runs, key=run_attempt):
            name = str(meta_of(run).get("name"))
            if is_ours(run) and run_collection(run) == mine and name not in recorded:
                recorded.add(name)  # once, should the collection appear twice
                entry: Obj = {"id": name, "actor": ACTOR, "phase": "Pending",
                              "startTime": str(meta_of(run).get("creationTimestamp")
                                               or self.world.now)}
                collection["verificationHistory"] = push(
                    verification_history(collection), entry)

    def _terminate_forgotten(self, cid: str) -> None:
        """A run of ours still going for freight the history no longer holds (pushed
        out by more promotions than it keeps while nothing recorded the run) is
        terminated: no entry is left to record it in, and no one would end it."""
        held = {collection_id(c) for c in self.history}
        for run in self.world.runs:
            if (is_ours(run) and run_collection(run) not in held and not _terminated(run)
                    and run_phase(run) not in FINISHED):
                self.out.terminate.append(Terminate(str(meta_of(run).get("name")), None))

    def _superseded(
        self, entry: Mapping[str, Any], cid: str
    ) -> tuple[VerificationInfo, Mapping[str, Any] | None]:
        """How an unfinished verification of older freight ends, and its run."""
        run = self._run_for(entry)
        if run is not None and run_phase(run) in FINISHED and not _terminated(run):
            return entry_from_run(entry, run, self.world.now), run  # it ended on its own
        if run is not None and not _terminated(run) and run_phase(run) not in FINISHED:
            self.out.terminate.append(Terminate(meta_of(run)["name"], None))
        done = finish(entry, phase="Aborted", message=f"superseded by {cid}", now=self.world.now)
        if run is not None:
            # the reference as recorded (or, for an entry written before its run, the run
            # found by its id), with the run's last phase
            meta = meta_of(run)
            done["analysisRun"] = cast(AnalysisRunReference, {
                "name": meta.get("name"), "namespace": meta.get("namespace"),
                **as_dict(entry.get("analysisRun")), "phase": run_phase(run)})
        return done, run

    def _stanza_removed(self, current: Obj) -> None:
        """No stanza: stop a verification of ours in progress; ``Verified`` goes, as it
        would describe a check that no longer exists (the history stays)."""
        history = verification_history(current)
        latest = history[0] if history else None
        if latest and latest.get("actor") == ACTOR and latest.get("phase") not in FINISHED:
            run = self._run_for(latest)
            if run is not None and not _terminated(run) and run_phase(run) not in FINISHED:
                self.out.terminate.append(Terminate(meta_of(run)["name"], None))
            done = finish(latest, phase="Aborted",
                          message="aborted: the verification stanza was removed from the Stage",
                          now=self.world.now)
            current["verificationHistory"] = replace_entry(
                as_list(current.get("verificationHistory")), done)
            self._finished(done, run)
        self._drop_condition()

    def _foreign(self, current: Mapping[str, Any], cid: str) -> str | None:
        """Why another verifier owns this collection, if it does.

        Kargo's finalizer comes first: Kargo adds it when it first reconciles a Stage,
        before any promotion, and Kargo v1 verifies every Stage it reconciles. Its runs
        and entries come only after the promotion is recorded, too late to keep a second
        verifier from starting (seen with the real Kargo v1.11.2)."""
        if KARGO_FINALIZER in as_list(meta_of(self.stage).get("finalizers")):
            return (f"Stage carries Kargo's finalizer {KARGO_FINALIZER}: a Kargo controller "
                    "reconciles it, and Kargo verifies every Stage it reconciles; rollgate "
                    "leaves it alone (engine mode is for Stages no Kargo controller "
                    "reconciles)")
        for entry in verification_history(current):
            if entry.get("actor") != ACTOR:
                return (f"verification {entry.get('id')} of freight collection {cid} was "
                        f"recorded by {entry.get('actor') or 'another controller (no actor)'}, "
                        "not rollgate: another verifier (Kargo's controller?) verifies this "
                        "Stage; rollgate leaves it alone")
        for run in self.world.runs:
            if run_collection(run) == cid and not is_ours(run):
                return (f"AnalysisRun {meta_of(run).get('name')} for freight collection {cid} "
                        "was not created by rollgate: another verifier (Kargo's controller?) "
                        "verifies this Stage; rollgate leaves it alone")
        return None

    # -- the current freight's verification, step by step ------------------------------
    def _verify(self, current: Obj, cid: str) -> None:
        history: list[Obj] = [dict(h) for h in verification_history(current)]
        ours = [r for r in self.world.runs if is_ours(r) and run_collection(r) == cid]
        facts = Facts(
            current=current, cid=cid, names=freight_names(current), history=history,
            ours=ours,
            next_attempt=max([run_attempt(r) for r in ours]
                             + [_attempt_of(h) for h in history] + [0]) + 1,
        )
        progress = Progress(latest=history[0] if history else None)
        for name, step in self.VERIFY_STEPS:
            try:
                progress = step(self, facts, progress)
            except Exception as exc:
                exc.add_note(f"in verification step {name!r}")
                raise
        self._record(facts, progress.latest)

    def _follow_run(self, facts: Facts, progress: Progress) -> Progress:
        """The latest verification follows its run. A run of ours newer than the latest
        entry (created, then a crash or a conflict before the status write) is adopted
        as the latest; an entry that waits for the gate asks to start its attempt."""
        latest = progress.latest
        newest = max(facts.ours, key=run_attempt, default=None)
        if newest is not None and (latest is None or run_attempt(newest) > _attempt_of(latest)):
            return replace(progress, latest=dict(entry_from_run({}, newest, self.world.now)))
        if latest is None or latest.get("phase") in FINISHED:
            return progress
        ref = run_of(latest)
        run = self.runs.get(ref or str(latest.get("id")))
        if run is not None:
            return replace(progress, latest=dict(entry_from_run(latest, run, self.world.now)))
        if ref:
            return replace(progress, latest=dict(finish(
                latest, phase="Error", now=self.world.now,
                message=f"AnalysisRun {ref} was deleted before it finished; set annotation "
                        f"{ANNOTATION_REVERIFY} on the Stage to verify again")))
        # the gate was waiting: start (or keep waiting for) the entry's own attempt
        return replace(progress, start=(_attempt_of(latest) or facts.next_attempt, None))

    def _abort(self, facts: Facts, progress: Progress) -> Progress:
        """An abort request naming the latest verification ends it ``Aborted`` (its run
        is terminated, recording the request); one naming an older verification gets an
        ``AbortIgnored`` Warning event."""
        abort = parse_request(self.stage, ANNOTATION_ABORT)
        latest = progress.latest
        if abort is None or latest is None:
            return progress
        if abort.id not in ("", latest.get("id")):
            if not self._handled(abort, aborting=True):
                self.out.events.append(Event(
                    "Warning", "AbortIgnored",
                    f"{ANNOTATION_ABORT} names verification {abort.id!r}, which is not the "
                    f"latest; the latest is {latest.get('id')!r}: set the annotation to that "
                    "id to abort it"))
            return progress
        if latest.get("phase") in FINISHED:
            return progress
        run = self._run_for(latest)
        if run is not None and not _terminated(run):
            self.out.terminate.append(Terminate(meta_of(run)["name"], abort.raw))
        by = f" by {abort.actor}" if abort.actor else ""
        return Progress(latest=dict(finish(latest, phase="Aborted", now=self.world.now,
                                           message=f"aborted{by} ({ANNOTATION_ABORT})")))

    def _reverify(self, facts: Facts, progress: Progress) -> Progress:
        """A reverify request naming the latest, finished verification starts the next
        attempt (one made while it runs waits for it); one naming an older verification
        gets a ``ReverifyIgnored`` Warning event. Each request is acted on once."""
        reverify = parse_request(self.stage, ANNOTATION_REVERIFY)
        latest = progress.latest
        if reverify is None or latest is None or self._handled(reverify):
            return progress
        if reverify.id not in ("", latest.get("id")):
            self.out.events.append(Event(
                "Warning", "ReverifyIgnored",
                f"{ANNOTATION_REVERIFY} names verification {reverify.id!r}, which is not "
                f"the latest; the latest is {latest.get('id')!r}: set the annotation to "
                "that id to verify again"))
            return progress
        if latest.get("phase") in FINISHED:
            return replace(progress, start=(facts.next_attempt, reverify.raw))
        return progress  # acted on once the latest verification finishes

    def _retry_after_error(self, facts: Facts, progress: Progress) -> Progress:
        """An ``Error``, then a new generation of the Stage: the next attempt starts by
        itself if the changed Stage builds a different run (or fails differently)."""
        latest = progress.latest
        if progress.start is not None or latest is None or latest.get("phase") != "Error" or (
                not self._generation_moved()):
            return progress
        return replace(progress, start=self._retry(latest, facts))

    def _first_attempt(self, facts: Facts, progress: Progress) -> Progress:
        """Nothing yet for this freight: attempt 1."""
        return replace(progress, start=(1, None)) if progress.latest is None else progress

    def _start_attempt(self, facts: Facts, progress: Progress) -> Progress:
        """The attempt asked for is started (or adopted, or waits, or is an Error)."""
        if progress.start is None:
            return progress
        started = self._start(progress.start, facts)
        return Progress(latest=started or progress.latest)

    VERIFY_STEPS: ClassVar[tuple[tuple[str, Callable[[_Planner, Facts, Progress], Progress]],
                                 ...]] = (
        ("follow the latest run", _follow_run),
        ("abort", _abort),
        ("reverify", _reverify),
        ("retry after an error", _retry_after_error),
        ("first attempt", _first_attempt),
        ("start the attempt", _start_attempt),
    )

    def _record(self, facts: Facts, latest: Obj | None) -> None:
        """The latest verification into the history (newest first), the ``Verified``
        condition from it, and ``verifiedIn`` of the Freight."""
        history = facts.history
        if latest is not None:
            before = next((h for h in history if h.get("id") == latest.get("id")), None)
            history = push(history, latest)
            if latest.get("phase") in FINISHED and (
                    before is None or before.get("phase") not in FINISHED):
                self._finished(latest, self._run_for(latest))
            facts.current["verificationHistory"] = history
        waiting = None
        if history and history[0].get("phase") == "Pending" and not history[0].get("analysisRun"):
            waiting = str(history[0].get("message") or "")
        self._set_condition(*verified_condition(history, waiting=waiting))
        if history:
            self._freight(facts.names, history[0])

    def _start(self, start: Start, facts: Facts) -> Obj | None:
        """The entry for starting ``attempt``: adopted, waiting, an Error, or a run to
        create (``self.out.create``), recorded as the run will be once created; None
        while a reverify waits for the gate."""
        attempt, request = start
        name = run_name(self.name, facts.cid, attempt)
        base: Obj = {"id": name, "actor": ACTOR}
        existing = self.runs.get(name)
        if existing is not None:
            return dict(entry_from_run(base, existing, self.world.now))
        if name in self.world.blocked:
            return dict(finish(base, phase="Error", message=self.world.blocked[name],
                               now=self.world.now))
        if not facts.names:
            return dict(finish(base, phase="Error", now=self.world.now,
                               message="freightHistory[0] lists no Freight to verify"))
        gate = waiting_for(self.stage, facts.current)
        if gate is not None:
            # A reverify waits without a new entry: the latest one stays until it starts.
            return None if request is not None else {**base, "phase": "Pending", "message": gate}
        try:
            self.out.create = self._build(facts, attempt, request)
        except AnalysisBuildError as exc:
            return dict(finish(base, phase="Error", now=self.world.now, message=(
                f"{exc}; fix the Stage or its templates (a changed Stage starts a new attempt), "
                f"or set annotation {ANNOTATION_REVERIFY} on the Stage to retry")))
        return dict(entry_from_run(base, self.out.create, self.world.now))

    def _build(self, facts: Facts, attempt: int, request: str | None) -> Obj:
        """The run of ``attempt`` from the world's templates; AnalysisBuildError for what
        the user must fix."""
        return build_analysis_run(
            self.stage, templates_lookup(self.world.templates), freight=facts.names,
            collection=facts.cid, attempt=attempt, request=request)

    def _retry(self, latest: Mapping[str, Any], facts: Facts) -> Start | None:
        """A new attempt if the changed Stage builds a different run than the failed one
        (or builds one at all, or fails differently); the same result is not retried."""
        attempt = facts.next_attempt
        run = self._run_for(latest)
        try:
            candidate = self._build(facts, attempt, None)
        except AnalysisBuildError as exc:
            return None if str(exc) in str(latest.get("message") or "") else (attempt, None)
        if run is not None and candidate.get("spec") == run.get("spec"):
            return None
        return (attempt, None)

    def _generation_moved(self) -> bool:
        cond = get_condition(as_list(self.status.get("conditions")), CONDITION)
        seen = (cond or {}).get("observedGeneration")
        return isinstance(self.generation, int) and isinstance(seen, int) and (
            self.generation > seen)

    def _handled(self, request: Request, *, aborting: bool = False) -> bool:
        """Whether a run of this Stage already carries the request (acted on once)."""
        runs = self.world.runs if not aborting else [
            r for r in self.world.runs if meta_of(r).get("name") == request.id]
        return any(run_request(r) == request.raw for r in runs if is_ours(r))

    def _freight(self, names: list[str], latest: Mapping[str, Any]) -> None:
        """``verifiedIn`` follows the latest verification: set on Successful, removed on
        Failed; Error, Inconclusive and Aborted say nothing about the freight."""
        phase = latest.get("phase")
        if phase not in ("Successful", "Failed"):
            return
        for name in names:
            freight = self.world.freight.get(name)
            if freight is None:
                continue
            present = self.name in verified_in(freight)
            if phase == "Successful" and not present:
                at = latest.get("finishTime") or self.world.now
                self.out.freight.append(
                    (name, {"status": {"verifiedIn": {self.name: {"verifiedAt": at}}}}))
            elif phase == "Failed" and present:
                self.out.freight.append((name, {"status": {"verifiedIn": {self.name: None}}}))

    def _finished(self, entry: Mapping[str, Any], run: Mapping[str, Any] | None) -> None:
        etype, reason = EVENTS[str(entry.get("phase"))]
        message = f"{entry.get('id')}: {entry.get('message', '')}"
        self.out.events.append(Event(etype, reason, message))
        self.out.finished.append(Finished(dict(entry), dict(run) if run else None))

    # -- status ------------------------------------------------------------------
    def _set_condition(self, status: ConditionStatus, reason: str, message: str) -> None:
        self._conditions = set_condition(
            as_list(self.status.get("conditions")), type=CONDITION, status=status,
            reason=reason, message=message, observed_generation=self.generation,
            now=self.world.now)

    def _drop_condition(self) -> None:
        self._conditions = [c for c in as_list(self.status.get("conditions"))
                            if not (isinstance(c, dict) and c.get("type") == CONDITION)]

    def _finish_status(self) -> None:
        wanted: StageStatusWrite = {}
        conditions = self._conditions
        if conditions is not None and conditions != as_list(self.status.get("conditions")):
            wanted["conditions"] = conditions or None
        if self.history != as_list(self.status.get("freightHistory")):
            # the entries as Kargo wrote them, with the verifications brought up to date
            wanted["freightHistory"] = cast("list[FreightCollection]", self.history)
        self.out.status = wanted or None


def _terminated(run: Mapping[str, Any]) -> bool:
    return bool(as_dict(run.get("spec")).get("terminate"))


def _attempt_of(entry: Mapping[str, Any]) -> int:
    """The attempt in an entry id ``<stage>.<collection[:7]>.<attempt>``; 0 if none."""
    tail = str(entry.get("id") or "").rpartition(".")[2]
    return int(tail) if tail.isdigit() else 0
