"""Pure decisions of the rollout-plugins controller (docs/plugins.md, "RolloutManager plugins").

What one pass over a namespace does (``plan``): which mode the namespace is in
(``--plugins-mode``; auto follows the ``argo-rollouts`` Deployment and its controller), who
owns the plugin keys (the oldest RolloutManager), and whether the key names a RolloutManager
that does not own them. Then, for sync: whether the ConfigMap already holds the rendering
(``in_sync``), the server-side apply body, the keys and entries a write removes, whether
the Argo Rollouts Deployment must roll, and the words of the ``PluginsSynced`` condition.

No Kubernetes client and no runtime here (an import-linter contract keeps it so):
``reconciler.plugins.controller`` reads the cache, calls these and does the writes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from kubekit.kinds import ROLLOUT_MANAGER
from reconciler.conditions import set_condition
from reconciler.payloads import Condition, ConditionStatus
from schemas.constants import ANNOTATION_PLUGINS_CHECKSUM
from schemas.objects import as_dict, as_list, meta_of
from schemas.plugins import manager_age_key

from .render import CONFIG_MAP_NAME, MANAGED_KEYS, METRIC_KEY, TRAFFIC_KEY, checksum, parse_entries

if TYPE_CHECKING:
    from .digests import PluginDigest

FIELD_MANAGER = "rollgate"
CONDITION = "PluginsSynced"
DEFAULT_DEPLOYMENT = "argo-rollouts"
# The checksum of "no plugins": a Deployment without the annotation has loaded none,
# so it must not be restarted just to record that nothing is configured.
EMPTY_CHECKSUM = checksum({})
# A failed download is retried this much later (the server may be back); a mismatch
# waits for a spec change or the periodic resync.
DOWNLOAD_RETRY_SECONDS = 60.0

# What rollgate does with the plugins of one namespace; the flag's values.
Mode = Literal["sync", "audit", "waiting"]
FLAG_MODES = ("auto", "sync", "audit")


# --- the mode of a namespace ---------------------------------------------------------------


def controller_reference(deployment: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The Deployment's controller ownerReference when it is a RolloutManager."""
    refs = meta_of(deployment).get("ownerReferences") or []
    for ref in refs:
        if not isinstance(ref, Mapping) or ref.get("controller") is not True:
            continue
        group = str(ref.get("apiVersion") or "").partition("/")[0]
        if ref.get("kind") == ROLLOUT_MANAGER.kind and group == ROLLOUT_MANAGER.group:
            return ref
    return None


def namespace_mode(flag: str, deployment: Mapping[str, Any] | None) -> Mode:
    """What rollgate does in one namespace (``--plugins-mode``; docs/plugins.md,
    "RolloutManager plugins").

    auto: a Deployment controlled by a RolloutManager means the operator renders the
    plugins (audit); one without such a controller means nobody else does (sync); none
    yet means wait, because the operator creates it only after the RolloutManager
    appears and writing first would start the fight.
    """
    if flag == "sync":
        return "sync"
    if flag == "audit":
        return "audit"
    if deployment is None:
        return "waiting"
    return "audit" if controller_reference(deployment) is not None else "sync"


def audited_manager(
    rollout_managers: Sequence[Mapping[str, Any]],
    deployment: Mapping[str, Any] | None,
    owner: Mapping[str, Any] | None,
) -> Mapping[str, Any] | None:
    """The RolloutManager whose spec the operator renders: the Deployment's controller
    (by uid, else by name), else ``owner`` (the oldest)."""
    ref = controller_reference(deployment)
    if ref is None:
        return owner
    for rm in rollout_managers:
        meta = meta_of(rm)
        if ref.get("uid"):
            if meta.get("uid") == ref.get("uid"):
                return rm
        elif meta.get("name") == ref.get("name"):
            return rm
    return owner


# --- who owns the namespace, and what a pass does there -----------------------------------


def is_deleting(obj: Mapping[str, Any]) -> bool:
    return bool(meta_of(obj).get("deletionTimestamp"))


def owner_of(rollout_managers: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The RolloutManager that owns the namespace's plugin keys: the oldest one.

    ``schemas.plugins.manager_age_key`` orders them (the webhook's "second RolloutManager"
    warning uses the same key, so it names this owner). RolloutManagers being deleted are
    out of the running, so ownership moves on at once.
    """
    live = [rm for rm in rollout_managers if not is_deleting(rm)]
    if not live:
        return None
    return min(live, key=manager_age_key)


# release: no RolloutManager left, remove the keys rollgate owns (sync mode only);
# forget: nothing to write; wait: auto mode and no Deployment yet, nothing at all is
# written; not-owner: the key names a RolloutManager that is not the oldest; audit / sync:
# the modes.
Action = Literal["release", "forget", "wait", "audit", "not-owner", "sync"]


@dataclass(frozen=True, slots=True)
class PassPlan:
    """What one pass over a namespace does."""

    mode: Mode
    action: Action
    owner: Mapping[str, Any] | None = None  # the oldest RolloutManager, when there is one


def plan(
    flag: str,
    rollout_managers: Sequence[Mapping[str, Any]],
    deployment: Mapping[str, Any] | None,
    keyed: Mapping[str, Any] | None,
) -> PassPlan:
    """The pass over a namespace, from the cache.

    ``keyed`` is the RolloutManager the queued key names (None when the key is the
    ConfigMap's or the RolloutManager is gone): in sync mode a live one that is not the
    owner only learns who is.

    Only sync writes the ConfigMap, the Deployment or a condition. While auto mode waits
    for the Deployment nothing at all is written, not even the RolloutManager's status
    nor the release of keys rollgate wrote earlier: argo-rollouts-manager creates the
    Deployment after the RolloutManager appears, and a condition written before would
    stay stale forever next to it (audit writes no condition). The Deployment is watched,
    so the namespace is decided again when it appears.
    """
    mode = namespace_mode(flag, deployment)
    owner = owner_of(rollout_managers)
    if owner is None:
        return PassPlan(mode, "release" if mode == "sync" else "forget")
    if mode != "sync":
        return PassPlan(mode, "audit" if mode == "audit" else "wait", owner)
    if (keyed is not None and not is_deleting(keyed)
            and meta_of(keyed).get("name") != meta_of(owner).get("name")):
        return PassPlan(mode, "not-owner", owner)
    return PassPlan(mode, "sync", owner)


# --- the ConfigMap -------------------------------------------------------------------------


def managed_values(config_map: Mapping[str, Any] | None) -> dict[str, str]:
    """The managed keys as they are in ``config_map`` (absent keys left out)."""
    data = ((config_map or {}).get("data")) or {}
    return {k: data[k] for k in MANAGED_KEYS if k in data}


def keys_owned_by(config_map: Mapping[str, Any] | None, manager: str) -> set[str]:
    """Managed keys that ``manager`` owns according to ``metadata.managedFields``.

    Server-side apply only removes a field its applier owns, and a value that another
    manager wrote (a hand edit moves ownership to ``kubectl-edit``) is someone else's
    content; both decisions need to know who owns which key.
    """
    owned: set[str] = set()
    for entry in meta_of(config_map).get("managedFields") or []:
        if not isinstance(entry, Mapping) or entry.get("manager") != manager:
            continue
        fields = ((entry.get("fieldsV1") or {}).get("f:data")) or {}
        owned.update(k for k in MANAGED_KEYS if f"f:{k}" in fields)
    return owned


def owned_keys(config_map: Mapping[str, Any] | None) -> list[str]:
    """The managed keys rollgate owns, in rendering order."""
    owned = keys_owned_by(config_map, FIELD_MANAGER)
    return [k for k in MANAGED_KEYS if k in owned]


def foreign_keys(config_map: Mapping[str, Any] | None) -> list[str]:
    """The managed keys rollgate does not own: their entries are someone's hand-made
    configuration (entries in keys rollgate owns were its own)."""
    owned = keys_owned_by(config_map, FIELD_MANAGER)
    return [k for k in MANAGED_KEYS if k not in owned]


def in_sync(config_map: Mapping[str, Any] | None, data: Mapping[str, str]) -> bool:
    """True when the ConfigMap already holds exactly ``data`` in the managed keys.

    Ownership counts too: a key with the right value that rollgate does not own would
    survive a later apply that drops it, so taking it over is still a pending write.
    No ConfigMap and nothing to write is in sync (no empty ConfigMap gets created).
    """
    if config_map is None:
        return not data
    return managed_values(config_map) == dict(data) and set(data) <= keys_owned_by(
        config_map, FIELD_MANAGER
    )


def apply_body(namespace: str, data: Mapping[str, str]) -> dict[str, Any]:
    """The server-side apply configuration: identity plus only the keys rollgate owns."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP_NAME, "namespace": namespace},
    }
    if data:
        body["data"] = dict(data)
    return body


def leftover_keys(data: Mapping[str, str], applied: Mapping[str, Any] | None) -> list[str]:
    """Managed keys the spec no longer renders that are still there after the apply
    (another field manager co-owns them, so the apply only gave up rollgate's share)."""
    left = managed_values(applied)
    return [k for k in MANAGED_KEYS if k not in data and k in left]


def removal_patch(config_map: Mapping[str, Any], keys: Iterable[str]) -> list[dict[str, Any]]:
    """JSON patch removing ``keys``, guarded by a test of the value rollgate decided on.

    Needed when another manager co-owns a key that the spec no longer lists: apply only
    gives up rollgate's claim, and RolloutManager is the source of truth for these keys.
    """
    data = config_map.get("data") or {}
    ops: list[dict[str, Any]] = []
    for key in keys:
        if key in data:
            ops.append({"op": "test", "path": f"/data/{key}", "value": data[key]})
            ops.append({"op": "remove", "path": f"/data/{key}"})
    return ops


def _describe_entry(key: str, index: int, entry: Any) -> str:
    if isinstance(entry, Mapping) and isinstance(entry.get("name"), str) and entry["name"]:
        return f"{key}: {entry['name']}"
    return f"{key}[{index}] (entry without a name)"


def _unlisted_in_key(key: str, raw: Any, wanted: str | None) -> list[str]:
    current = parse_entries(raw if isinstance(raw, str) else None)
    if current is None:
        return [f"{key} (content that is not a YAML list of plugins)"]
    wanted_names = {e.get("name") for e in parse_entries(wanted) or [] if isinstance(e, Mapping)}
    return [
        _describe_entry(key, index, entry)
        for index, entry in enumerate(current)
        if not (isinstance(entry, Mapping) and entry.get("name") in wanted_names)
    ]


def unlisted_entries(
    existing: Mapping[str, Any] | None,
    desired: Mapping[str, str],
    *,
    keys: Iterable[str] = MANAGED_KEYS,
) -> list[str]:
    """Describe the entries in ``existing`` managed keys that ``desired`` does not list.

    Used for the Warning event when rollgate replaces hand-made entries. An entry is
    identified by (key, name): a changed location of a listed plugin is an update, not a
    dropped entry. Content that is not a YAML list is reported as a whole. ``keys``
    restricts the check (the controller passes the keys it did not write itself, so a
    plugin removed from the spec is not reported as "dropped").
    """
    existing = existing or {}
    out: list[str] = []
    for key in keys:
        if existing.get(key) is not None:
            out.extend(_unlisted_in_key(key, existing[key], desired.get(key)))
    return out


# --- the Argo Rollouts Deployment ----------------------------------------------------------


def pod_template_checksum(deployment: Mapping[str, Any] | None) -> str:
    annotations = (
        ((deployment or {}).get("spec") or {}).get("template", {}).get("metadata") or {}
    ).get("annotations") or {}
    return annotations.get(ANNOTATION_PLUGINS_CHECKSUM) or EMPTY_CHECKSUM


def write_pending(
    config_map: Mapping[str, Any] | None,
    deployment: Mapping[str, Any] | None,
    data: Mapping[str, str],
    digest: str,
) -> bool:
    """Whether a sync pass would write the ConfigMap or roll the Deployment (only then is
    there something for the digest pre-flight to prove)."""
    if not in_sync(config_map, data):
        return True
    return deployment is not None and pod_template_checksum(deployment) != digest


def checksum_patch(digest: str) -> dict[str, Any]:
    """The merge patch of the one pod-template annotation (a rolling restart: the
    Deployment's own strategy replaces the pods one at a time)."""
    return {"spec": {"template": {"metadata": {"annotations": {
        ANNOTATION_PLUGINS_CHECKSUM: digest,
    }}}}}


# --- the PluginsSynced condition and what it says ------------------------------------------


def describe(data: Mapping[str, str]) -> str:
    """Human summary of rendered data, e.g. "1 traffic router plugin, 2 metric plugins"."""

    def count(key: str, noun: str) -> str:
        n = len(parse_entries(data.get(key)) or [])
        return f"{n} {noun} plugin{'s' if n != 1 else ''}"

    return f"{count(TRAFFIC_KEY, 'traffic router')}, {count(METRIC_KEY, 'metric')}"


def invalid_spec_message(findings: Iterable[object]) -> str:
    return (f"spec.plugins is invalid; ConfigMap {CONFIG_MAP_NAME} was not changed: "
            + "; ".join(str(f) for f in findings))


def not_owner_message(owner: str, namespace: str) -> str:
    return (f'RolloutManager "{owner}" is the oldest in namespace "{namespace}" and owns the '
            "plugin configuration; the plugins of this one are not synced")


def refusal(bad: Sequence[PluginDigest], deployment: str) -> tuple[str, str]:
    """(reason, message) when the digest pre-flight could not prove every digest."""
    outcomes = {d.check.outcome for d in bad}
    if "mismatch" in outcomes or "not-executable" not in outcomes:
        reason = "DigestMismatch" if "mismatch" in outcomes else "DownloadFailed"
        why = "Argo Rollouts exits at start when a plugin's digest does not match"
    else:
        reason = "NotExecutable"
        why = "Argo Rollouts would fail when a Rollout or an AnalysisRun first used it"
    message = (
        "; ".join(d.describe() for d in bad)
        + f". ConfigMap {CONFIG_MAP_NAME} and Deployment \"{deployment}\" were left as they "
        f"were: {why}"
    )
    return reason, message


def rollout_note(deployment: str, namespace: str, *, exists: bool) -> str:
    """The part of the Synced message about the Deployment.

    The same words whether this pass rolled it or an earlier one did: a condition message
    that changes on the pass after a rollout is a status write for nothing (the
    RolloutsRestarted event tells when it rolled).
    """
    if not exists:
        return (f'Deployment "{deployment}" not found in namespace "{namespace}": '
                "the plugins will load when it starts")
    return f'Deployment "{deployment}" has this plugin configuration in its pod template'


def synced_message(data: Mapping[str, str], digest: str, note: str) -> str:
    return (f"ConfigMap {CONFIG_MAP_NAME} holds {describe(data)} "
            f"(checksum {digest[:12]}); {note}")


def updated_conditions(
    rm: Mapping[str, Any],
    *,
    status: ConditionStatus,
    reason: str,
    message: str,
    now: dt.datetime,
) -> list[Condition] | None:
    """``status.conditions`` with ``PluginsSynced`` set, other conditions as they are;
    None when that changes nothing (no status write)."""
    current = list((rm.get("status") or {}).get("conditions") or [])
    updated = set_condition(
        current, type=CONDITION, status=status, reason=reason, message=message,
        observed_generation=meta_of(rm).get("generation"), now=now,
    )
    return None if updated == current else updated



def without_condition(rm: Mapping[str, Any]) -> dict[str, Any] | None:
    """Audit's one status write: the ``status`` fields that remove a ``PluginsSynced``
    condition an earlier rollgate wrote (before the operator's Deployment existed, or in
    sync mode), every other condition kept exactly as it is; None when there is none,
    so nothing is written (once removed, never again).

    The list is written whole (a merge patch replaces lists), so the write carries the
    resourceVersion it was computed from: a condition the operator added meanwhile is
    never lost, the write is refused instead (409). No condition left removes the field,
    as the operator's ``omitempty`` leaves it.
    """
    conditions = as_list(as_dict(rm.get("status")).get("conditions"))
    kept = [c for c in conditions if not (isinstance(c, Mapping) and c.get("type") == CONDITION)]
    if len(kept) == len(conditions):
        return None
    return {"conditions": kept or None}
