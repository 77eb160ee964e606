"""Properties of the verification planner (reconciler/verification/plan.py) over Stage
histories that crashes, refused writes and late Freight produce.

A Stage's history is not drawn as arbitrary JSON: hypothesis draws a sequence of what
happens to one Stage (promotions, with the Stage healthy or not; runs moving to any
phase, terminated or not; Freight that arrive late; passes of the planner) and each
pass is carried out the way the engine does it (create, then terminate, then the
Freight patches, then the status write), cut short at any point, as a SIGKILL or a 409
would. So the histories are the ones a real cluster can hold: several collections,
entries in every phase, entries written while the gate waited (no ``analysisRun``)
whose run a later pass created, runs nobody recorded, missing and present Freight.

After every pass, what the planner decided must keep:
- every entry it records Successful gets ``verifiedIn`` planned for every Freight of
  its collection it holds (or the Freight already has it);
- no run of an entry that is ended (Aborted, Failed, Error, Successful, Inconclusive)
  or superseded is left Pending/Running: the plan terminates it.
And once passes run undisturbed until they plan nothing, the settled-state rules the
fault suites check too (support/testkit/invariants.py): no duplicate run, no entry whose phase
differs from its run's, no run left running that no current entry follows, no run
whose outcome no entry records, and ``verifiedIn`` as the latest verification of the
newest collection holding the Freight says.

This property found two defects, fixed in the planner: a run whose entry a crash lost
before a promotion ran on, recorded nowhere; a Freight of an older collection that
arrived late never got ``verifiedIn``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.verification import plan as planner
from reconciler.verification.payloads import (
    FINISHED,
    freight_names,
    run_of,
    run_phase,
    verification_history,
)
from testkit import invariants, kargo_shapes
from tests.unit.verification.test_plan import NOW, TEMPLATES, applied, stage

STAGE = "prod"
RUN_END = invariants.RUN_END
# A run's phase as the Argo Rollouts controller moves it ("" = just created).
RUN_MOVES = ("Running", *RUN_END)


@dataclass
class Model:
    """One Stage, its runs and Freight as the API server holds them."""

    stage: dict[str, Any]
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    freight: dict[str, dict[str, Any]] = field(default_factory=dict)
    promotions: int = 0

    def names(self) -> list[str]:
        return sorted({n for c in self.collections() for n in freight_names(c)})

    def collections(self) -> list[dict[str, Any]]:
        return list(self.stage["status"].get("freightHistory") or [])

    def world(self) -> planner.World:
        current = self.collections()[0] if self.collections() else None
        return planner.World(stage=copy.deepcopy(self.stage),
                             runs=[copy.deepcopy(r) for r in self.runs.values()],
                             freight={n: copy.deepcopy(self.freight.get(n))
                                      for n in self.names()} if current is not None else {},
                             templates=TEMPLATES, now=NOW)


# ---------------------------------------------------------------- what happens


def promote(m: Model, *, size: int, healthy: bool, arrive: bool) -> None:
    """Kargo promotes new Freight (``size`` of them, from as many Warehouses)."""
    m.promotions += 1
    freight = {f"w{i}": f"p{m.promotions}-{i}" for i in range(size)}
    patch = kargo_shapes.promotion_patch(m.stage, freight, promotion=f"promo-{m.promotions}",
                                  health="Healthy" if healthy else "Progressing",
                                  finished_at=NOW)
    for key, value in patch["status"].items():
        if value is None:
            m.stage["status"].pop(key, None)
        else:
            m.stage["status"][key] = value
    if arrive:
        for name in freight.values():
            m.freight[name] = {"metadata": {"name": name}, "status": {}}


def become_healthy(m: Model) -> None:
    m.stage["status"]["health"] = {"status": "Healthy"}


def freight_arrives(m: Model, pick: int) -> None:
    missing = [n for n in m.names() if n not in m.freight]
    if missing:
        name = missing[pick % len(missing)]
        m.freight[name] = {"metadata": {"name": name}, "status": {}}


def run_moves(m: Model, pick: int, phase: str) -> None:
    """The Rollouts controller moves an unfinished run (a terminated one ends)."""
    open_runs = [r for _, r in sorted(m.runs.items()) if run_phase(r) not in RUN_END]
    if not open_runs:
        return
    target = open_runs[pick % len(open_runs)]
    if target["spec"].get("terminate") and phase == "Running":
        phase = "Successful"  # Argo Rollouts ends a terminated run
    target["status"] = {"phase": phase}


def one_pass(m: Model, *, cut: int | None) -> planner.Plan:
    """One pass as the engine carries it out: one plan, whose status already records the
    run it creates (here every create comes out as planned: the world holds every run);
    ``cut``: how many of its writes land before a SIGKILL (or a 409 on the Stage write);
    None = all of them."""
    p = planner.plan(m.world())
    writes: list[Any] = []
    if p.create is not None:
        writes.append(("create", p.create["metadata"]["name"], copy.deepcopy(p.create)))
    writes += [("terminate", t.run, None) for t in p.terminate]
    writes += [("freight", name, body) for name, body in p.freight]
    if p.status is not None:
        writes.append(("status", "", p))
    for kind, name, body in writes[:cut]:
        if kind == "create":
            m.runs.setdefault(name, body)
        elif kind == "terminate" and name in m.runs:
            m.runs[name]["spec"]["terminate"] = True
        elif kind == "freight" and name in m.freight:
            verified = m.freight[name].setdefault("status", {}).setdefault("verifiedIn", {})
            for stage_name, value in body["status"]["verifiedIn"].items():
                if value is None:
                    verified.pop(stage_name, None)
                else:
                    verified[stage_name] = value
        elif kind == "status":
            m.stage = applied(m.stage, body)
    return p


STEP = st.one_of(
    st.tuples(st.just("promote"), st.integers(1, 2), st.booleans(), st.booleans()),
    st.tuples(st.just("healthy")),
    st.tuples(st.just("freight"), st.integers(0, 5)),
    st.tuples(st.just("run"), st.integers(0, 5), st.sampled_from(RUN_MOVES)),
    st.tuples(st.just("pass"), st.one_of(st.none(), st.integers(0, 3))),
)


def play(m: Model, steps: list[tuple[Any, ...]]) -> Iterator[tuple[planner.World, planner.Plan]]:
    for step in steps:
        kind = step[0]
        if kind == "promote":
            promote(m, size=step[1], healthy=step[2], arrive=step[3])
        elif kind == "healthy":
            become_healthy(m)
        elif kind == "freight":
            freight_arrives(m, step[1])
        elif kind == "run":
            run_moves(m, step[1], step[2])
        else:
            world = m.world()
            yield world, one_pass(m, cut=step[1])


def settle(m: Model) -> None:
    """Passes with nothing cut short until one plans nothing (a fixed point)."""
    become_healthy(m)
    for _ in range(8):
        if one_pass(m, cut=None).empty:
            return
    raise AssertionError(f"no fixed point: {m.stage['status']}")


# ---------------------------------------------------------------- the checks


def run_for(runs: dict[str, Any], entry: Mapping[str, Any]) -> dict[str, Any] | None:
    return runs.get(run_of(entry)) or runs.get(str(entry.get("id") or ""))


def check_pass(world: planner.World, p: planner.Plan) -> None:
    history = (p.status or {}).get("freightHistory") or world.stage["status"].get(
        "freightHistory") or []
    check_newly_successful_marked(world, p, history)
    check_ended_runs_terminated(world, p, history)


def check_newly_successful_marked(world: planner.World, p: planner.Plan,
                                  history: list[Any]) -> None:
    """Every entry the pass records Successful gets ``verifiedIn`` planned for every
    Freight of its collection the world holds (or the Freight already has it)."""
    before = {e.get("id"): e.get("phase")
              for c in world.stage["status"].get("freightHistory") or []
              for e in verification_history(c)}
    planned = {name for name, body in p.freight
               if body["status"]["verifiedIn"].get(STAGE) is not None}
    for collection in history:
        newly = [e for e in verification_history(collection) if e.get("phase") == "Successful"
                 and before.get(e.get("id")) != "Successful"]
        for entry in newly:
            for name in freight_names(collection):
                freight = world.freight.get(name)
                assert freight is None or name in planned or STAGE in (
                    freight.get("status") or {}).get("verifiedIn", {}), (
                    f"{entry['id']} recorded Successful, {name} not marked")


def check_ended_runs_terminated(world: planner.World, p: planner.Plan,
                                history: list[Any]) -> None:
    """No run of an entry that is ended (or of an older collection) is left running:
    the plan terminates it."""
    runs = {r["metadata"]["name"]: r for r in world.runs}
    if p.create is not None:
        runs.setdefault(p.create["metadata"]["name"], p.create)
    terminated = {t.run for t in p.terminate}
    for index, collection in enumerate(history):
        for entry in verification_history(collection):
            ended = entry.get("phase") in (*FINISHED, "Aborted") or index > 0
            if ended and invariants.open_run(run_for(runs, entry)):
                assert run_for(runs, entry)["metadata"]["name"] in terminated, (  # type: ignore[index]
                    f"{entry['id']} is {entry.get('phase')} but its run is left running")


def check_settled(m: Model) -> None:
    found = invariants.defects(stages=[m.stage], runs=m.runs.values(),
                               freight=m.freight.values())
    assert found.total == 0, found


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=st.lists(STEP, min_size=1, max_size=30))
def test_planner_keeps_verified_in_and_leaves_no_run_running(
        steps: list[tuple[Any, ...]]) -> None:
    m = Model(stage=stage(history=[]))
    m.stage["status"].pop("lastPromotion")
    for world, p in play(m, steps):
        check_pass(world, p)
    settle(m)
    check_settled(m)
