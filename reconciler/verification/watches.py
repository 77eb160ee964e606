"""What both verification controllers watch, and how a change maps to Stages.

A run maps to the Stage its Kargo label names, a Freight to the Stages it is verified
in; runs are indexed by ``<namespace>/<kargo.akuity.io/stage label>``, the selector
Kargo itself uses to find a Stage's runs.
"""

from __future__ import annotations

from kubekit.kinds import ANALYSIS_RUN, FREIGHT, STAGE
from schemas.constants import LABEL_STAGE
from schemas.objects import Obj, as_dict, meta_of

from ..runtime.types import Cache, Indexes, Key, Watch
from ..runtime.watches import enqueue_self
from .naming import label_value
from .payloads import freight_history, freight_names, run_stage, verified_in

# Store index of runs by "<namespace>/<kargo.akuity.io/stage label>".
RUNS_BY_STAGE = "stage"
# Store index of Stages by "<namespace>/<Freight name>" for every Freight in their history.
STAGES_BY_FREIGHT = "freight"


def _stage_label_key(namespace: str, stage: str) -> str:
    return f"{namespace}/{label_value(stage)}"


def _index_run_by_stage(run: Obj) -> list[str]:
    meta = meta_of(run)
    label = as_dict(meta.get("labels")).get(LABEL_STAGE)
    return [f"{meta.get('namespace') or ''}/{label}"] if label else []


def stage_of_run(old: Obj | None, run: Obj, cache: Cache) -> list[Key]:
    """The Stage a run names (its Kargo label)."""
    stage = run_stage(run)
    return [Key(meta_of(run).get("namespace") or "", stage)] if stage else []


def stages_verifying(old: Obj | None, freight: Obj, cache: Cache) -> list[Key]:
    """The Stages a Freight is verified in (``status.verifiedIn``)."""
    namespace = meta_of(freight).get("namespace") or ""
    return [Key(namespace, s) for s in verified_in(freight)]


def _index_stage_by_freight(stage: Obj) -> list[str]:
    namespace = meta_of(stage).get("namespace") or ""
    return sorted({f"{namespace}/{name}" for collection in freight_history(stage)
                   for name in freight_names(collection)})


def stages_of_freight(old: Obj | None, freight: Obj, cache: Cache) -> list[Key]:
    """The Stages a Freight is verified in, and those whose freight history holds it:
    engine mode writes ``verifiedIn`` of the Freight of a finished verification, and a
    Freight that reaches the cache only after its run succeeded (the informer re-listing
    after an API server restart or a 410) must bring its Stage back."""
    namespace = meta_of(freight).get("namespace") or ""
    holders = cache.by_index(STAGE, STAGES_BY_FREIGHT,
                             f"{namespace}/{meta_of(freight).get('name') or ''}")
    return sorted({Key(namespace, s) for s in verified_in(freight)}
                  | {Key(namespace, str(meta_of(h).get("name"))) for h in holders})


INDEXES: Indexes = {ANALYSIS_RUN: {RUNS_BY_STAGE: _index_run_by_stage}}
# Engine mode: a Freight also maps to the Stages that hold it (stages_of_freight).
ENGINE_WATCHES = (Watch(STAGE, enqueue_self), Watch(FREIGHT, stages_of_freight),
                  Watch(ANALYSIS_RUN, stage_of_run))
ENGINE_INDEXES: Indexes = {**INDEXES, STAGE: {STAGES_BY_FREIGHT: _index_stage_by_freight}}


def stage_runs(cache: Cache, namespace: str, stage: str) -> list[Obj]:
    """Every run labelled with the Stage (ours and another verifier's); a shortened
    label shared by two Stage names is told apart by our full-name annotation."""
    return [r for r in cache.by_index(ANALYSIS_RUN, RUNS_BY_STAGE,
                                      _stage_label_key(namespace, stage))
            if run_stage(r) in (stage, label_value(stage))]
