"""Render a RolloutManager's ``spec.plugins`` into the Argo Rollouts ConfigMap keys.

Pure functions only (no Kubernetes client, no runtime): the controller does the I/O.
Keeping the rendering pure means the exact bytes written to ``argo-rollouts-config``
(and therefore the checksum that decides whether the Argo Rollouts controller is
restarted) can be tested without a cluster.

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
    """Hex sha256 of ``data`` as JSON with sorted keys (docs/plugins.md, "RolloutManager plugins").

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
            dict(rollout_manager), allow_http_plugins=allow_http_plugins, served=True
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
