"""One normalized shape for each stanza, whatever spelling or defaults the user wrote.

The reconciler builds AnalysisRuns and ConfigMap entries from these shapes, so it never
has to know that ``spec.analysis`` and ``spec.verification`` say the same thing or that
a sha256 may arrive padded and upper-case. Both functions assume a valid object (call
the checks first); on garbage they skip what is not a dict/list rather than raise.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict, TypeVar, cast

from schemas.constants import KIND_CLUSTER_ANALYSIS_TEMPLATE
from schemas.objects import as_dict, as_list

Spelling = Literal["analysis", "verification"]
T = TypeVar("T")
PluginList = Literal["trafficManagement", "metric"]
PLUGIN_LISTS: tuple[PluginList, PluginList] = ("trafficManagement", "metric")


class TemplateRef(TypedDict):
    name: str
    clusterScope: bool


class AnalysisArg(TypedDict):
    name: str
    value: NotRequired[str]
    valueFrom: NotRequired[dict[str, Any]]


class RunMetadata(TypedDict):
    labels: dict[str, str]
    annotations: dict[str, str]


class AnalysisSpec(TypedDict):
    spelling: Spelling
    templates: list[TemplateRef]
    args: list[AnalysisArg]
    analysisRunMetadata: RunMetadata


class PluginEntry(TypedDict):
    name: str
    location: str
    sha256: NotRequired[str]


class PluginsSpec(TypedDict):
    trafficManagement: list[PluginEntry]
    metric: list[PluginEntry]


def _valid(kind: type[T], value: object) -> T:
    """``value`` as the type a valid object has there (see the module docstring: the
    caller checked the object first); not converted, so garbage stays what it was."""
    return cast(T, value)


def stanza(stage: object) -> tuple[Spelling, dict[str, Any]] | None:
    """The Stage's analysis stanza and its spelling; ``spec.analysis`` wins if both."""
    spec = as_dict(as_dict(stage).get("spec"))
    for spelling in ("analysis", "verification"):
        value = spec.get(spelling)
        if value is not None:
            return spelling, as_dict(value)
    return None


def _template_ref(spelling: Spelling, entry: dict[str, Any]) -> TemplateRef:
    if spelling == "analysis":
        return {
            "name": _valid(str, entry.get("templateName")),
            "clusterScope": entry.get("clusterScope") is True,
        }
    return {
        "name": _valid(str, entry.get("name")),
        "clusterScope": entry.get("kind") == KIND_CLUSTER_ANALYSIS_TEMPLATE,
    }


def _arg(entry: dict[str, Any]) -> AnalysisArg:
    arg: AnalysisArg = {"name": _valid(str, entry.get("name"))}
    # Exactly one of the two is set in a valid stanza; null counts as absent.
    if entry.get("valueFrom") is not None:
        arg["valueFrom"] = entry["valueFrom"]
    else:
        arg["value"] = _valid(str, entry.get("value"))
    return arg


def template_refs(spelling: Spelling, body: dict[str, Any]) -> list[TemplateRef]:
    """The stanza's template references (``body``: the stanza, as :func:`stanza` gives
    it)."""
    list_field = "templates" if spelling == "analysis" else "analysisTemplates"
    return [_template_ref(spelling, entry) for entry in as_list(body.get(list_field))
            if isinstance(entry, dict)]


def analysis_args(body: dict[str, Any]) -> list[AnalysisArg]:
    """The stanza's args (``body``: the stanza, as :func:`stanza` gives it)."""
    return [_arg(entry) for entry in as_list(body.get("args")) if isinstance(entry, dict)]


def normalize_analysis(stage: object) -> AnalysisSpec | None:
    """The Stage's analysis stanza as ``AnalysisSpec``; None when it has none."""
    found = stanza(stage)
    if found is None:
        return None
    spelling, body = found
    metadata = as_dict(body.get("analysisRunMetadata"))
    return {
        "spelling": spelling,
        "templates": template_refs(spelling, body),
        "args": analysis_args(body),
        "analysisRunMetadata": {
            "labels": dict(as_dict(metadata.get("labels"))),
            "annotations": dict(as_dict(metadata.get("annotations"))),
        },
    }


def normalize_sha256(value: object) -> str:
    """sha256 as Argo Rollouts compares it: trimmed, lower-case; "" means absent."""
    return value.strip().lower() if isinstance(value, str) else ""


def _plugin(entry: dict[str, Any]) -> PluginEntry:
    out: PluginEntry = {"name": _valid(str, entry.get("name")),
                        "location": _valid(str, entry.get("location"))}
    digest = normalize_sha256(entry.get("sha256"))
    if digest:
        out["sha256"] = digest
    return out


def normalize_plugins(rm: object) -> PluginsSpec:
    """``spec.plugins`` as two lists of ``{name, location, sha256?}``, in spec order."""
    plugins = as_dict(as_dict(as_dict(rm).get("spec")).get("plugins"))
    return {
        "trafficManagement": [
            _plugin(e) for e in as_list(plugins.get("trafficManagement")) if isinstance(e, dict)
        ],
        "metric": [_plugin(e) for e in as_list(plugins.get("metric")) if isinstance(e, dict)],
    }
