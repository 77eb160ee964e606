"""Defaulting as RFC 6902 JSON Patches for the mutating webhook.

Only fields rollgate defaults are touched, every op is idempotent (a second call on the
patched object returns ``[]``), and garbage is skipped rather than reported: mutation
never denies (validation reports the problem once, with its field path).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from schemas.constants import KIND_ANALYSIS_TEMPLATE, KIND_ROLLOUT_MANAGER, KIND_STAGE
from schemas.normalize import PLUGIN_LISTS, normalize_sha256
from schemas.pointer import to_pointer

Op = dict[str, Any]


def _get(obj: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _default_each(
    entries: object, *, path: tuple[str, ...], field: str, value: object
) -> Iterator[Op]:
    if not isinstance(entries, list):
        return
    for index, entry in enumerate(entries):
        # A null counts as absent, so it is defaulted too ("add" replaces a member).
        if isinstance(entry, dict) and entry.get(field) is None:
            yield {"op": "add", "path": to_pointer((*path, index, field)), "value": value}


def stage_default_patch(stage: Any) -> list[Op]:
    """``clusterScope: false`` on analysis templates, ``kind: AnalysisTemplate`` on
    verification templates: the run builder can then read one explicit value."""
    return [
        *_default_each(
            _get(stage, "spec", "analysis", "templates"),
            path=("spec", "analysis", "templates"),
            field="clusterScope",
            value=False,
        ),
        *_default_each(
            _get(stage, "spec", "verification", "analysisTemplates"),
            path=("spec", "verification", "analysisTemplates"),
            field="kind",
            value=KIND_ANALYSIS_TEMPLATE,
        ),
    ]


def rollout_manager_default_patch(rm: Any) -> list[Op]:
    """sha256 trimmed and lower-cased (removed when that leaves ""), because Argo Rollouts
    compares the digest it computes, lower-case hex, with the string as written."""
    ops: list[Op] = []
    for list_name in PLUGIN_LISTS:
        entries = _get(rm, "spec", "plugins", list_name)
        if not isinstance(entries, list):
            continue
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
                continue
            raw = entry["sha256"]
            digest = normalize_sha256(raw)
            pointer = to_pointer(("spec", "plugins", list_name, index, "sha256"))
            if not digest:
                ops.append({"op": "remove", "path": pointer})
            elif digest != raw:
                ops.append({"op": "replace", "path": pointer, "value": digest})
    return ops


def default_patch(obj: Any) -> list[Op]:
    """The default patch for a Stage or RolloutManager; ``[]`` for anything else."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if kind == KIND_STAGE:
        return stage_default_patch(obj)
    if kind == KIND_ROLLOUT_MANAGER:
        return rollout_manager_default_patch(obj)
    return []
