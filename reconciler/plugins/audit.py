"""Plugins next to argo-rollouts-manager: what differs between the spec and its rendering.

argo-rollouts-manager (v0.0.9, ``controllers/configmap.go``) renders ``spec.plugins`` into
``argo-rollouts-config`` itself: both keys replaced wholesale, entries sorted by name,
``argoproj-labs/openshift`` always added to the traffic router plugins, and the
``sha256`` of traffic router plugins dropped (only metric plugins keep theirs). It owns
the ``argo-rollouts`` Deployment through a controller ownerReference. Where it runs,
rollgate writing the same keys would start a fight (each reverts the other and Argo
Rollouts restarts in a loop), so rollgate only compares and reports (docs/plugins.md,
"RolloutManager plugins"): pure functions and the memory of what was reported here, the
controller turns the findings into Warning events and metrics.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import schemas
from schemas.normalize import PLUGIN_LISTS, normalize_sha256
from schemas.objects import meta_of
from schemas.plugins import OPERATOR_OWN_PLUGIN

from .render import CONFIG_MAP_NAME, KEYS_BY_LIST, parse_entries

if TYPE_CHECKING:
    from .digests import PluginDigest

OPERATOR = "argo-rollouts-manager"
# Added by the operator to every rendering (controllers/default.go); never a finding.
OPENSHIFT_PLUGIN = OPERATOR_OWN_PLUGIN


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
    "not-executable": "NotExecutable",
}


def _by_name(entries: list[Any]) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for entry in entries:
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str):
            out.setdefault(entry["name"], entry)
    return out


def _digest_finding(
    list_name: str, key: str, where: str, plugin: Mapping[str, Any], got: Mapping[str, Any]
) -> Finding | None:
    name, location = str(plugin["name"]), str(plugin["location"])
    want = normalize_sha256(plugin.get("sha256"))
    have = normalize_sha256(got.get("sha256"))
    if want and not have:
        why = (f"{OPERATOR} drops the sha256 of traffic router plugins"
               if list_name == "trafficManagement" else "the ConfigMap has no sha256")
        return Finding("digest-dropped", name, (
            f"{where}.sha256: {why}, so Argo Rollouts downloads {name} from "
            f"{location:.300} without checking it (spec sha256 {want})"))
    if want != have:
        return Finding("digest-differs", name, (
            f"{where}.sha256: {key} of ConfigMap {CONFIG_MAP_NAME} has sha256 "
            f"{have or '(none)'}, the spec {want or '(none)'}"))
    return None


def _listed_findings(
    list_name: str, key: str, index: int, plugin: Mapping[str, Any],
    got: Mapping[str, Any] | None,
) -> list[Finding]:
    """What differs for one spec entry; ``got`` is the rendered entry of that name."""
    name, location = str(plugin["name"]), str(plugin["location"])
    where = f"spec.plugins.{list_name}[{index}]"
    if got is None:
        return [Finding("missing", name, (
            f"{where} ({name}) is not in {key} of ConfigMap {CONFIG_MAP_NAME}: "
            "Argo Rollouts does not load it"))]
    found: list[Finding] = []
    if str(got.get("location") or "") != location:
        found.append(Finding("location-differs", name, (
            f"{where} ({name}): {key} of ConfigMap {CONFIG_MAP_NAME} has location "
            f"{got.get('location')!s:.300}, the spec {location:.300}")))
    digest = _digest_finding(list_name, key, where, plugin, got)
    if digest is not None:
        found.append(digest)
    return found


def _entry_findings(
    list_name: str, key: str, spec_entries: list[Mapping[str, Any]], live: list[Any]
) -> list[Finding]:
    live_by_name = _by_name(live)
    found: list[Finding] = []
    for index, plugin in enumerate(spec_entries):
        found.extend(_listed_findings(list_name, key, index, plugin,
                                      live_by_name.get(str(plugin["name"]))))
    listed = {str(plugin["name"]) for plugin in spec_entries}
    if list_name == "trafficManagement":
        listed.add(OPENSHIFT_PLUGIN)  # the operator's own entry
    found.extend(
        Finding("unlisted", f"{key}/{name}", (
            f"{key} of ConfigMap {CONFIG_MAP_NAME} has plugin {name}, which "
            f"spec.plugins.{list_name} does not list: Argo Rollouts loads it"))
        for name in live_by_name if name not in listed
    )
    return found


def _refused(spec_traffic: Sequence[Mapping[str, Any]],
             config_map: Mapping[str, Any] | None) -> Finding | None:
    """The spec names the plugin the operator adds itself: the operator's reconcile
    returns an error before it writes the ConfigMap or the Deployment, so nothing of
    this spec is rendered."""
    index = next((i for i, p in enumerate(spec_traffic) if p.get("name") == OPENSHIFT_PLUGIN),
                 None)
    if index is None:
        return None
    if config_map is None:
        outcome = (f"nothing is rendered: ConfigMap {CONFIG_MAP_NAME} does not exist (and a "
                   "new RolloutManager gets no argo-rollouts Deployment)")
    else:
        outcome = (f"ConfigMap {CONFIG_MAP_NAME} keeps what it held before (the rendering "
                   "of an earlier spec), which Argo Rollouts goes on loading")
    return Finding("operator-refuses", OPENSHIFT_PLUGIN, (
        f"spec.plugins.trafficManagement[{index}]: {OPERATOR} refuses a plugin named "
        f"{OPENSHIFT_PLUGIN} (it adds that one itself) and renders none of this spec; "
        f"{outcome}"))


def _rendering_findings(
    spec: Mapping[str, Any], config_map: Mapping[str, Any] | None
) -> list[Finding]:
    """The ConfigMap's two keys against the spec's two lists."""
    if config_map is None:
        return [Finding("config-map-missing", "", (
            f"ConfigMap {CONFIG_MAP_NAME} does not exist: {OPERATOR} has not rendered "
            "spec.plugins"))]
    data = config_map.get("data") or {}
    found: list[Finding] = []
    for list_name in PLUGIN_LISTS:
        key = KEYS_BY_LIST[list_name]
        raw = data.get(key)
        live = parse_entries(raw if isinstance(raw, str) else None)
        if live is None:
            found.append(Finding("unreadable-key", key, (
                f"{key} of ConfigMap {CONFIG_MAP_NAME} is not a YAML list of plugins: "
                "Argo Rollouts cannot start with it")))
            continue
        found.extend(_entry_findings(list_name, key, list(spec[list_name]), live))
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
    router plugin's digest) is. A spec the operator refuses (it names
    ``argoproj-labs/openshift``) is that one finding: the ConfigMap then holds no
    rendering of this spec (nothing, or an earlier spec's), so comparing its entries
    would only report the refusal again, entry by entry.
    """
    rm = dict(rollout_manager)
    spec = schemas.normalize_plugins(rm)
    found: list[Finding] = []
    errors = schemas.errors(
        schemas.check_rollout_manager(rm, allow_http_plugins=allow_http_plugins,
                                      served=True))
    if errors:
        found.append(Finding("invalid-spec", "", (
            f"spec.plugins is invalid and {OPERATOR} renders it anyway: "
            + "; ".join(str(f) for f in errors))))
    refused = _refused(spec["trafficManagement"], config_map)
    if refused is not None:
        return [*found, refused]
    return found + _rendering_findings(spec, config_map)


def digest_findings(problems: Iterable[PluginDigest]) -> list[Finding]:
    """A failed digest pre-flight as findings (audit mode writes no condition)."""
    kinds = {"mismatch": "digest-mismatch", "not-executable": "not-executable"}
    return [
        Finding(
            kinds.get(d.check.outcome, "download-failed"),
            f"{d.path} {d.check.location} {d.check.expected}",
            f"{d.describe()}: " + ("Argo Rollouts could not start it when a Rollout or an "
                                   "AnalysisRun used it" if d.check.outcome == "not-executable"
                                   else "Argo Rollouts exits at start when it loads this plugin"),
        )
        for d in problems
    ]


def new_findings(
    current: list[Finding], reported: frozenset[tuple[str, str]] | None
) -> list[Finding]:
    """The findings not reported in the last pass (all of them when ``reported`` is None:
    a new generation of the RolloutManager or a new reconciler process)."""
    if reported is None:
        return list(current)
    return [f for f in current if f.key not in reported]


def generation_of(rm: Mapping[str, Any]) -> tuple[str, Any]:
    """(uid, generation): what "once per generation" is counted against."""
    meta = meta_of(rm)
    return (str(meta.get("uid") or ""), meta.get("generation"))


class AuditMemory:
    """What audit mode reported and proved, per namespace, for one RolloutManager
    generation. Memory only: a new process reports each finding once more."""

    def __init__(self) -> None:
        self._reported: dict[str, tuple[tuple[str, Any], frozenset[tuple[str, str]]]] = {}
        self._digests: dict[str, tuple[tuple[str, Any], list[PluginDigest]]] = {}

    def proven(self, namespace: str, rm: Mapping[str, Any]) -> list[PluginDigest] | None:
        """The pre-flight results of this generation when every digest passed (then
        nothing is downloaded again); None when the pre-flight is due."""
        last = self._digests.get(namespace)
        if last is None or last[0] != generation_of(rm):
            return None
        if any(not d.check.ok for d in last[1]):
            return None
        return last[1]

    def remember_digests(self, namespace: str, rm: Mapping[str, Any],
                         results: list[PluginDigest]) -> None:
        self._digests[namespace] = (generation_of(rm), results)

    def fresh(self, namespace: str, rm: Mapping[str, Any],
              findings: list[Finding]) -> list[Finding]:
        """The findings not reported for this generation yet; remembers all of them."""
        ident = generation_of(rm)
        last = self._reported.get(namespace)
        reported = last[1] if last is not None and last[0] == ident else None
        self._reported[namespace] = (ident, frozenset(f.key for f in findings))
        return new_findings(findings, reported)

    def forget(self, namespace: str) -> None:
        self._reported.pop(namespace, None)
        self._digests.pop(namespace, None)
