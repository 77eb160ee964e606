"""The template look-up of the offline CLI: the AnalysisTemplates and
ClusterAnalysisTemplates found in the files being checked.

Offline there is no cluster to ask, so a template that is not among the files is
unknown, not missing: the look-up raises ``LookupUnavailable`` and the checks then leave
out every cross-object warning of that Stage rather than guess. A Stage whose templates
(nested ones too) are all in the files gets the warnings the webhook would give: args
no template declares (with a did-you-mean), template args left without a value, metric
name collisions, cycles.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from schemas.constants import KIND_ANALYSIS_TEMPLATE, KIND_CLUSTER_ANALYSIS_TEMPLATE
from schemas.kinds import GROUP_ARGO
from schemas.lookups import LookupUnavailable

_KINDS = (KIND_ANALYSIS_TEMPLATE, KIND_CLUSTER_ANALYSIS_TEMPLATE)


def _meta(obj: dict[str, Any]) -> tuple[str, str]:
    metadata = obj.get("metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    name, namespace = metadata.get("name"), metadata.get("namespace")
    return (name if isinstance(name, str) else "",
            namespace if isinstance(namespace, str) else "")


def _is_template(obj: dict[str, Any]) -> bool:
    api_version = obj.get("apiVersion")
    group = api_version.partition("/")[0] if isinstance(api_version, str) else ""
    return obj.get("kind") in _KINDS and group in ("", GROUP_ARGO)


class FileTemplates:
    """``lookup(kind, namespace, name)`` over the templates among ``objects``.

    Manifests often leave the namespace to ``kubectl apply -n``, so a namespace that is
    not written matches any: a template in the Stage's namespace wins, then one with
    none written (or any, when the Stage has none written).
    """

    def __init__(self, objects: Iterable[dict[str, Any]]) -> None:
        self._by_name: dict[tuple[str, str], list[tuple[str, dict[str, Any]]]] = {}
        for obj in objects:
            if _is_template(obj):
                name, namespace = _meta(obj)
                if name:
                    self._by_name.setdefault((obj["kind"], name), []).append((namespace, obj))

    def __call__(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        candidates = self._by_name.get((kind, name), [])
        if kind == KIND_ANALYSIS_TEMPLATE and namespace:
            ranked = [o for ns, o in candidates if ns == namespace]
            ranked += [o for ns, o in candidates if not ns]
        else:
            ranked = [o for _, o in candidates]
        if not ranked:
            raise LookupUnavailable(f"{kind} {name} is not among the files checked")
        return ranked[0]
