"""Defaulting as RFC 6902 JSON Patches for the mutating webhook.

Defaulting adds nothing that upstream treats the same when absent (docs/comparison.md "Decisions
where upstream left a question open", "No defaulting of Stages"): a field added into an
atomic list (``kind: AnalysisTemplate`` on a template reference,
``clusterScope: false``) makes kubectl and Argo CD report a change on every sync, so a
Stage gets no patch at all; every reader takes an absent ``kind`` as AnalysisTemplate and
an absent ``clusterScope`` as false. What remains is the RolloutManager's sha256, which
Argo Rollouts does treat differently when it is not lower-case hex.

Only fields rollgate defaults are touched, every op is idempotent (a second call on the
patched object returns ``[]``), and garbage is skipped rather than reported: mutation
never denies (validation reports the problem once, with its field path).
"""

from __future__ import annotations

from typing import Any

from schemas.constants import KIND_ROLLOUT_MANAGER
from schemas.normalize import PLUGIN_LISTS, normalize_sha256
from schemas.pointer import to_pointer

Op = dict[str, Any]


def _get(obj: object, *keys: str) -> object:
    for key in keys:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _sha256_changes(rm: Any) -> list[tuple[str, int, str, str]]:
    """(plugin list, index, sha256 as written, as stored) of every digest to normalise."""
    changes: list[tuple[str, int, str, str]] = []
    for list_name in PLUGIN_LISTS:
        entries = _get(rm, "spec", "plugins", list_name)
        if not isinstance(entries, list):
            continue
        for index, entry in enumerate(entries):
            if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
                continue
            raw = entry["sha256"]
            digest = normalize_sha256(raw)
            if digest != raw:
                changes.append((list_name, index, raw, digest))
    return changes


def rollout_manager_default_patch(rm: Any) -> list[Op]:
    """sha256 trimmed and lower-cased (removed when that leaves ""), because Argo Rollouts
    compares the digest it computes, lower-case hex, with the string as written."""
    ops: list[Op] = []
    for list_name, index, _, digest in _sha256_changes(rm):
        pointer = to_pointer(("spec", "plugins", list_name, index, "sha256"))
        if not digest:
            ops.append({"op": "remove", "path": pointer})
        else:
            ops.append({"op": "replace", "path": pointer, "value": digest})
    return ops


def default_warnings(obj: Any) -> list[str]:
    """One warning per value the default patch changes, naming what is stored.

    The stored value differs from the manifest, so a client-side ``kubectl apply`` sends
    the written value again on every apply (``configured``, never ``unchanged``) and Argo
    CD's default diff shows the object OutOfSync for ever; the fix is in the manifest,
    so the warning says what to write there
    (docs/comparison.md "GitOps: re-applying a manifest")."""
    if not isinstance(obj, dict) or obj.get("kind") != KIND_ROLLOUT_MANAGER:
        return []
    found = []
    for list_name, index, _, digest in _sha256_changes(obj):
        field = f"spec.plugins.{list_name}[{index}].sha256"
        if digest:
            found.append(f'{field}: stored as "{digest}" (trimmed and lower-cased, as Argo '
                         "Rollouts compares it); write it so in the manifest, or every "
                         "apply and sync sees a change")
        else:
            found.append(f"{field}: blank, so it is removed; leave it out of the manifest, "
                         "or every apply and sync sees a change")
    return found


def default_patch(obj: Any) -> list[Op]:
    """The default patch for a RolloutManager; ``[]`` for anything else (Stages too)."""
    kind = obj.get("kind") if isinstance(obj, dict) else None
    if kind == KIND_ROLLOUT_MANAGER:
        return rollout_manager_default_patch(obj)
    return []
