"""What the verification controllers keep of a Stage, Freight and AnalysisRun in the cache
(docs/components.md, "What the cache keeps"): cache transforms in the sense of controller-runtime's
``cache.Options.DefaultTransform``, one pure function per kind and mode.

A Stage with Kargo's full history (10 freight collections, each with up to 10
verifications, ``lastPromotion`` with every step's state) is ~40 KB of JSON and several
times that as Python objects; a controller reads a small part of it. Each function
returns a new object with only the fields its mode reads, every kept value shared with
the input (nothing is copied, nothing mutated). ``tests/unit/verification/test_slim.py``
records every field the controllers read in their scenarios and fails when one of them
is not kept.

Engine mode writes Stage ``status.freightHistory`` and ``conditions`` whole (a JSON merge
patch replaces lists) and compares them with what the Stage has ("a write that changes
nothing is not made"), so it keeps both whole: the write carries exactly what a write
computed from the whole object would, and the comparison is between the same shapes.
Observe mode writes no status and keeps, of the current collection's verification
entries, what the findings and metrics read, of older collections' only the run names
(for the duplicate-run finding), and stores the freight history as compact JSON
(``Packed``): ~10 KB per Stage where the same as dicts and strings costs ~20 KB, and
twice that once the heap fragments. It is decoded at each read, some ten times per pass
(tens of microseconds each).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any, Final

from schemas.objects import Obj, as_dict

from .packed import Packed

# Metadata no verification controller reads: the server-side-apply bookkeeping (often the
# largest part of an object) and kubectl's copy of the whole last applied object.
DROPPED_METADATA: Final = ("managedFields",)
LAST_APPLIED: Final = "kubectl.kubernetes.io/last-applied-configuration"
_STAGE_STATUS_ENGINE: Final = ("freightHistory", "conditions", "health", "currentPromotion")
_ENTRY_FIELDS: Final = ("id", "actor", "startTime", "phase", "message", "finishTime")
_RUN_STATUS: Final = ("phase", "message", "startedAt", "completedAt")

Transform = Callable[[Obj], Obj]


def _intern(value: Any) -> Any:
    """One string object for values repeated across every Stage (phases, actors)."""
    return sys.intern(value) if isinstance(value, str) else value


def strip_metadata(obj: Obj) -> Obj:
    """``obj`` without ``metadata.managedFields`` and kubectl's last-applied annotation
    (the rest shared, not copied); ``obj`` itself when it has neither. The transform of
    the kinds read whole (AnalysisTemplates), and the metadata of every other."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    annotations = meta.get("annotations")
    applied = isinstance(annotations, dict) and LAST_APPLIED in annotations
    if not applied and not any(k in meta for k in DROPPED_METADATA):
        return obj
    slim = {k: v for k, v in meta.items() if k not in DROPPED_METADATA}
    if applied and isinstance(annotations, dict):
        slim["annotations"] = {k: v for k, v in annotations.items() if k != LAST_APPLIED}
    return {**obj, "metadata": slim}


def _pick(source: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: source[k] for k in keys if k in source}


def _head(obj: Obj) -> dict[str, Any]:
    """apiVersion, kind and metadata (events name the object with them), without what
    ``strip_metadata`` drops."""
    return _pick(strip_metadata(obj), ("apiVersion", "kind", "metadata"))


def _last_promotion(status: Mapping[str, Any]) -> dict[str, Any]:
    """Of ``lastPromotion``: its name, phase, the id of the collection it promoted and when
    it finished (what gates a verification and times promotion-to-verified); not the
    Freight it carried, nor the state of its steps."""
    last = as_dict(status.get("lastPromotion"))
    if not last:
        return {}
    promotion = as_dict(last.get("status"))
    slim: dict[str, Any] = _pick(last, ("name", "finishedAt"))
    kept = _pick(promotion, ("phase",))
    collection = as_dict(promotion.get("freightCollection"))
    if "id" in collection:
        kept["freightCollection"] = {"id": collection["id"]}
    if kept or "status" in last:
        slim["status"] = kept
    return {"lastPromotion": slim}


def _entry(entry: Any, *, current: bool) -> Any:
    """A verification entry: of the current collection's, what the metrics and findings
    read; of an older collection's, only its run's name (which runs a verification of
    that freight started, for the duplicate-run finding)."""
    if not isinstance(entry, dict):
        return entry
    slim = _pick(entry, _ENTRY_FIELDS) if current else {}
    for key in ("phase", "actor"):
        if key in slim:
            slim[key] = _intern(slim[key])
    run = entry.get("analysisRun")
    if isinstance(run, dict):
        slim["analysisRun"] = _pick(run, ("name",))
    elif "analysisRun" in entry:
        slim["analysisRun"] = run
    return slim


def _items(items: Any) -> Any:
    """A collection's Freight by origin: their names (not the images and commits they
    carry)."""
    if not isinstance(items, dict):
        return items
    return {origin: _pick(ref, ("name",)) if isinstance(ref, dict) else ref
            for origin, ref in items.items()}


def _observed_collection(collection: Any, *, current: bool) -> Any:
    """A freight collection: its id, its Freight's names (of an older one only when it
    has no id, which is then computed from them) and its verifications (``_entry``)."""
    if not isinstance(collection, dict):
        return collection
    slim = _pick(collection, ("id",))
    if "items" in collection and (current or not isinstance(collection.get("id"), str)
                                  or not collection.get("id")):
        slim["items"] = _items(collection["items"])
    if "verificationHistory" in collection:
        history = collection["verificationHistory"]
        if isinstance(history, list):
            slim["verificationHistory"] = [_entry(e, current=current) for e in history]
        else:
            slim["verificationHistory"] = history
    return slim


def observed_stage(stage: Obj) -> Obj:
    """Observe mode: metadata, and of the status the freight history (``_observed_collection``:
    the current collection's verifications, the run names of older ones) and
    ``lastPromotion`` (``_last_promotion``); no spec (Kargo verifies, not rollgate)."""
    slim = _head(stage)
    status = as_dict(stage.get("status"))
    if "status" in stage:
        kept: dict[str, Any] = _last_promotion(status)
        if "freightHistory" in status:
            history = status["freightHistory"]
            first = next((i for i, c in enumerate(history) if isinstance(c, dict)), None) if (
                isinstance(history, list)) else None
            # Stored as compact JSON, decoded at each read: a few hundred objects per
            # Stage would cost ~4 times their JSON (and more once the heap fragments).
            kept["freightHistory"] = (Packed([_observed_collection(c, current=i == first)
                                              for i, c in enumerate(history)])
                                      if isinstance(history, list) else history)
        slim["status"] = kept
    return slim


def decoded(stage: Obj) -> Obj:
    """The Stage with a packed freight history decoded once (a shallow copy; the cached
    object keeps it packed): an observe pass reads the history some ten times, and each
    read of a ``Packed`` decodes it afresh."""
    status = as_dict(stage.get("status"))
    history = status.get("freightHistory")
    if not isinstance(history, Packed):
        return stage
    return {**stage, "status": {**status, "freightHistory": history.unpacked()}}


def engine_stage(stage: Obj) -> Obj:
    """Engine mode: metadata, spec, and of the status what the planner reads and the
    status write carries whole (``freightHistory``, ``conditions``), ``health``,
    ``currentPromotion`` and ``lastPromotion`` (``_last_promotion``)."""
    slim = _head(stage)
    if "spec" in stage:
        slim["spec"] = stage["spec"]
    if "status" in stage:
        status = as_dict(stage.get("status"))
        kept = _pick(status, _STAGE_STATUS_ENGINE)
        health = status.get("health")
        if isinstance(health, dict):
            kept["health"] = _pick(health, ("status",))
        kept.update(_last_promotion(status))
        slim["status"] = kept
    return slim


def freight(obj: Obj) -> Obj:
    """Both modes: metadata and ``status.verifiedIn`` (not the artifacts it carries)."""
    slim = _head(obj)
    if "status" in obj:
        slim["status"] = _pick(as_dict(obj.get("status")), ("verifiedIn",))
    return slim


def observed_run(run: Obj) -> Obj:
    """Observe mode: metadata and the run's phase, message and start and completion
    times (not its spec, nor its metric results and measurements)."""
    slim = _head(run)
    if "status" in run:
        slim["status"] = _pick(as_dict(run.get("status")), _RUN_STATUS)
    return slim


def engine_run(run: Obj) -> Obj:
    """Engine mode: as ``observed_run``, plus the spec (a run is adopted only when its
    spec equals the one rollgate would create, and ``spec.terminate`` is read)."""
    slim = observed_run(run)
    if "spec" in run:
        slim["spec"] = run["spec"]
    return slim

