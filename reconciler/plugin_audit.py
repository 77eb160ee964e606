"""Plugins next to argo-rollouts-manager: which mode a namespace is in, and what differs.

argo-rollouts-manager (v0.0.9, ``controllers/configmap.go``) renders ``spec.plugins`` into
``argo-rollouts-config`` itself: both keys replaced wholesale, entries sorted by name,
``argoproj-labs/openshift`` always added to the traffic router plugins, and the
``sha256`` of traffic router plugins dropped (only metric plugins keep theirs). It owns
the ``argo-rollouts`` Deployment through a controller ownerReference. Where it runs,
rollgate writing the same keys would start a fight (each reverts the other and Argo
Rollouts restarts in a loop), so rollgate only compares and reports: pure functions here,
the controller turns the findings into Warning events and metrics.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import schemas
from kubekit.kinds import ROLLOUT_MANAGER
from reconciler.plugins import CONFIG_MAP_NAME, KEYS_BY_LIST, parse_entries
from schemas.normalize import PLUGIN_LISTS, normalize_sha256
from schemas.objects import meta_of

Mode = Literal["sync", "audit", "waiting"]
FLAG_MODES = ("auto", "sync", "audit")

OPERATOR = "argo-rollouts-manager"
# Added by the operator to every rendering (controllers/default.go); never a finding.
OPENSHIFT_PLUGIN = "argoproj-labs/openshift"


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
    """What rollgate does in one namespace (``--plugins-mode``; DESIGN.md).

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
    if ref is not None:
        for rm in rollout_managers:
            meta = meta_of(rm)
            if (ref.get("uid") and meta.get("uid") == ref.get("uid")) or (
                not ref.get("uid") and meta.get("name") == ref.get("name")
            ):
                return rm
    return owner


@dataclass(frozen=True, slots=True, order=True)
class Finding:
    """One difference between the spec and what the operator rendered.

    ``kind`` names the class of difference (a metric label and the event reason);
    ``subject`` tells two findings of a kind apart, so that "what changed since the last
    report" can be computed without comparing message texts.
    """

    kind: str
    subject: str
    message: str

    @property
    def key(self) -> tuple[str, str]:
        return (self.kind, self.subject)


# kind -> event reason (Warning)
REASONS: dict[str, str] = {
    "config-map-missing": "PluginsNotRendered",
    "unreadable-key": "PluginsNotRendered",
    "missing": "PluginMissing",
    "unlisted": "PluginUnlisted",
    "location-differs": "PluginLocationDiffers",
    "digest-dropped": "PluginDigestDropped",
    "digest-differs": "PluginDigestDiffers",
    "operator-refuses": "PluginRefusedByOperator",
    "invalid-spec": "InvalidSpec",
    "digest-mismatch": "DigestMismatch",
    "download-failed": "DownloadFailed",
}


def _by_name(entries: list[Any]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for entry in entries:
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            out.setdefault(entry["name"], entry)
    return out


def _entry_findings(
    list_name: str, key: str, spec_entries: list[Mapping[str, Any]], live: list[Any]
) -> list[Finding]:
    found: list[Finding] = []
    live_by_name = _by_name(live)
    listed = set()
    for index, plugin in enumerate(spec_entries):
        name, location = str(plugin["name"]), str(plugin["location"])
        listed.add(name)
        where = f"spec.plugins.{list_name}[{index}]"
        got = live_by_name.get(name)
        if got is None:
            found.append(Finding("missing", name, (
                f"{where} ({name}) is not in {key} of ConfigMap {CONFIG_MAP_NAME}: "
                "Argo Rollouts does not load it")))
            continue
        if str(got.get("location") or "") != location:
            found.append(Finding("location-differs", name, (
                f"{where} ({name}): {key} of ConfigMap {CONFIG_MAP_NAME} has location "
                f"{got.get('location')!s:.300}, the spec {location:.300}")))
        want = normalize_sha256(plugin.get("sha256"))
        have = normalize_sha256(got.get("sha256"))
        if want and not have:
            why = (f"{OPERATOR} drops the sha256 of traffic router plugins"
                   if list_name == "trafficManagement" else "the ConfigMap has no sha256")
            found.append(Finding("digest-dropped", name, (
                f"{where}.sha256: {why}, so Argo Rollouts downloads {name} from "
                f"{location:.300} without checking it (spec sha256 {want})")))
        elif want != have:
            found.append(Finding("digest-differs", name, (
                f"{where}.sha256: {key} of ConfigMap {CONFIG_MAP_NAME} has sha256 "
                f"{have or '(none)'}, the spec {want or '(none)'}")))
    for name in live_by_name:
        if name in listed or (list_name == "trafficManagement" and name == OPENSHIFT_PLUGIN):
            continue
        found.append(Finding("unlisted", f"{key}/{name}", (
            f"{key} of ConfigMap {CONFIG_MAP_NAME} has plugin {name}, which "
            f"spec.plugins.{list_name} does not list: Argo Rollouts loads it")))
    return found


def compare_with_operator(
    rollout_manager: Mapping[str, Any],
    config_map: Mapping[str, Any] | None,
    *,
    allow_http_plugins: bool = False,
) -> list[Finding]:
    """Differences between ``spec.plugins`` and the ConfigMap the operator rendered.

    What the operator always does on its own (add ``argoproj-labs/openshift``, sort,
    write ``sha256: ""``) is not a difference; what it does to the spec (drop a traffic
    router plugin's digest) is.
    """
    rm = dict(rollout_manager)
    spec = schemas.normalize_plugins(rm)
    found: list[Finding] = []
    errors = schemas.errors(
        schemas.check_rollout_manager(rm, allow_http_plugins=allow_http_plugins))
    if errors:
        found.append(Finding("invalid-spec", "", (
            f"spec.plugins is invalid and {OPERATOR} renders it anyway: "
            + "; ".join(str(f) for f in errors))))
    for index, plugin in enumerate(spec["trafficManagement"]):
        if plugin.get("name") == OPENSHIFT_PLUGIN:
            found.append(Finding("operator-refuses", OPENSHIFT_PLUGIN, (
                f"spec.plugins.trafficManagement[{index}]: {OPERATOR} refuses a plugin named "
                f"{OPENSHIFT_PLUGIN} (it adds that one itself) and stops rendering the "
                "plugins")))
    if config_map is None:
        found.append(Finding("config-map-missing", "", (
            f"ConfigMap {CONFIG_MAP_NAME} does not exist: {OPERATOR} has not rendered "
            "spec.plugins")))
        return found
    data = config_map.get("data") or {}
    for list_name in PLUGIN_LISTS:
        entries = spec[list_name]
        key = KEYS_BY_LIST[list_name]
        raw = data.get(key)
        live = parse_entries(raw if isinstance(raw, str) else None)
        if live is None:
            found.append(Finding("unreadable-key", key, (
                f"{key} of ConfigMap {CONFIG_MAP_NAME} is not a YAML list of plugins: "
                "Argo Rollouts cannot start with it")))
            continue
        found.extend(_entry_findings(list_name, key, list(entries), live))
    return found


def new_findings(
    current: list[Finding], reported: frozenset[tuple[str, str]] | None
) -> list[Finding]:
    """The findings not reported in the last pass (all of them when ``reported`` is None:
    a new generation of the RolloutManager or a new reconciler process)."""
    if reported is None:
        return list(current)
    return [f for f in current if f.key not in reported]
