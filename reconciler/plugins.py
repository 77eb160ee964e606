"""Render a RolloutManager's ``spec.plugins`` into the Argo Rollouts ConfigMap keys.

Pure functions only: the controller does the I/O. Keeping the rendering pure means the
exact bytes written to ``argo-rollouts-config`` (and therefore the checksum that decides
whether the Argo Rollouts controller is restarted) can be tested without a cluster.

Format, as Argo Rollouts parses it (argoproj/argo-rollouts ``utils/config/config.go`` and
``utils/plugin/types/types.go``): the ConfigMap keys ``trafficRouterPlugins`` and
``metricProviderPlugins`` each hold a YAML list that ``sigs.k8s.io/yaml`` unmarshals into
``[]types.PluginItem``; a ``PluginItem`` has the JSON/YAML fields ``name`` (validated
against ``^([a-zA-Z0-9\\-]+)\\/{1}([a-zA-Z0-9_\\-.]+)$``), ``location`` and ``sha256`` (an
empty sha256 means "do not verify" in its plugin downloader). A key that is missing
unmarshals as an empty list, which is why an empty list is rendered by leaving the key out.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

import schemas
from schemas.normalize import PluginList
from schemas.objects import meta_of

TRAFFIC_KEY = "trafficRouterPlugins"
METRIC_KEY = "metricProviderPlugins"
# Spec list name -> ConfigMap key, in the order the keys are rendered.
KEYS_BY_LIST: dict[PluginList, str] = {"trafficManagement": TRAFFIC_KEY, "metric": METRIC_KEY}
MANAGED_KEYS: tuple[str, ...] = (TRAFFIC_KEY, METRIC_KEY)
CONFIG_MAP_NAME = "argo-rollouts-config"


class InvalidPluginSpec(ValueError):
    """``spec.plugins`` has errors; nothing may be written to the ConfigMap.

    Carries the findings so the controller can put their field paths into the
    ``PluginsSynced`` condition instead of a generic message.
    """

    def __init__(self, findings: Iterable[schemas.Finding]) -> None:
        self.findings: list[schemas.Finding] = list(findings)
        super().__init__("; ".join(str(f) for f in self.findings) or "invalid spec.plugins")


class _Quoted(str):
    """A string always written single-quoted."""


class _Dumper(yaml.SafeDumper):
    pass


# A hex digest such as "0e123..." (digits only after one "e") is a float to YAML 1.1
# resolvers like Go's, but PyYAML leaves it unquoted; quoting every sha256 keeps it a
# string for any parser.
_Dumper.add_representer(
    _Quoted, lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, "'")
)


def _render_list(entries: Iterable[Mapping[str, Any]]) -> str:
    items: list[dict[str, str]] = []
    for entry in entries:
        # Field order is fixed (name, location, sha256) so the bytes, and thus the
        # checksum, do not depend on the order of keys in the submitted object.
        item = {"name": str(entry["name"]), "location": str(entry["location"])}
        sha = entry.get("sha256")
        if sha:
            item["sha256"] = _Quoted(sha)
        items.append(item)
    return yaml.dump(items, Dumper=_Dumper, sort_keys=False, default_flow_style=False)


def checksum(data: Mapping[str, str]) -> str:
    """Hex sha256 of ``data`` as JSON with sorted keys (DESIGN.md).

    Compact separators and sorted keys make it independent of dict ordering, so an
    unchanged plugin set always yields the same value and never restarts Argo Rollouts.
    """
    blob = json.dumps(dict(data), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def render_plugin_config(
    rollout_manager: Mapping[str, Any], *, allow_http_plugins: bool = False
) -> tuple[dict[str, str], str]:
    """Return ``(data, checksum)`` for the two ConfigMap keys rollgate owns.

    ``data`` leaves a key out when its list is empty, so that server-side apply of
    ``data`` removes the key. Raises ``InvalidPluginSpec`` when ``schemas`` finds errors,
    because a spec stored while the webhook was off must never reach Argo Rollouts.
    """
    found = schemas.errors(
        schemas.check_rollout_manager(
            dict(rollout_manager), allow_http_plugins=allow_http_plugins
        )
    )
    if found:
        raise InvalidPluginSpec(found)
    normalized = schemas.normalize_plugins(dict(rollout_manager))
    data: dict[str, str] = {}
    for list_name, key in KEYS_BY_LIST.items():
        entries = normalized.get(list_name) or []
        if entries:
            data[key] = _render_list(entries)
    return data, checksum(data)


def parse_entries(text: str | None) -> list[Any] | None:
    """Parse one managed key's YAML as Argo Rollouts would; None when it is not a list.

    Tolerant on purpose: the keys may hold anything a person typed, and a parse error
    must not stop rollgate from replacing it.
    """
    if text is None:
        return []
    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if parsed is None:
        return []
    return parsed if isinstance(parsed, list) else None


def _describe(key: str, index: int, entry: Any) -> str:
    if isinstance(entry, Mapping) and isinstance(entry.get("name"), str) and entry["name"]:
        return f"{key}: {entry['name']}"
    return f"{key}[{index}] (entry without a name)"


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
        raw = existing.get(key)
        if raw is None:
            continue
        current = parse_entries(raw if isinstance(raw, str) else None)
        if current is None:
            out.append(f"{key} (content that is not a YAML list of plugins)")
            continue
        wanted = parse_entries(desired.get(key)) or []
        wanted_names = {e.get("name") for e in wanted if isinstance(e, Mapping)}
        for index, entry in enumerate(current):
            if isinstance(entry, Mapping) and entry.get("name") in wanted_names:
                continue
            out.append(_describe(key, index, entry))
    return out


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
    meta = meta_of(config_map)
    for entry in meta.get("managedFields") or []:
        if not isinstance(entry, Mapping) or entry.get("manager") != manager:
            continue
        fields = ((entry.get("fieldsV1") or {}).get("f:data")) or {}
        owned.update(k for k in MANAGED_KEYS if f"f:{k}" in fields)
    return owned
