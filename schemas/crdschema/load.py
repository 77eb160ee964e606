"""CRD documents as the schemas ``validate`` checks objects against.

The bundled CRDs (``crds/``, package data, byte-equal to ``manifests/crds/``: a unit
test and ``make crds-data`` keep them so) are read once per process. ``--crds DIR``
adds a cluster's own (``kubectl get crd NAME -o yaml``, one CRD or a ``List``), which
win over the bundled ones for the kinds they define, as kubeconform tries its schema
locations in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

import yaml

from schemas.crdschema.compiled import Node, compile_schema
from schemas.objects import as_dict

BUNDLED_FILES = ("kargo_stages.yaml", "argoproj_rolloutmanagers.yaml")


@dataclass(frozen=True, slots=True)
class VersionSchema:
    """One served version of one CRD: its ``openAPIV3Schema`` and whether it has a
    status subresource (then the API server ignores ``status`` on create and update,
    except for strict decoding's unknown fields)."""

    schema: Mapping[str, Any]
    status_subresource: bool
    root: Node = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Compiled once, with the CRD: every object of this kind reuses it.
        object.__setattr__(self, "root", compile_schema(self.schema))


@dataclass(frozen=True, slots=True)
class CrdSchemas:
    """``(group, kind)`` -> ``version`` -> schema, for every CRD read."""

    kinds: Mapping[tuple[str, str], Mapping[str, VersionSchema]] = field(default_factory=dict)

    def lookup(self, group: str, kind: str) -> Mapping[str, VersionSchema] | None:
        return self.kinds.get((group, kind))

    def over(self, fallback: CrdSchemas) -> CrdSchemas:
        """These schemas first, ``fallback`` for the kinds they do not define."""
        return CrdSchemas({**fallback.kinds, **self.kinds})


def _crds(document: object) -> Iterable[dict[str, Any]]:
    if not isinstance(document, dict):
        return
    if document.get("kind") == "CustomResourceDefinition":
        yield document
    elif isinstance(document.get("items"), list):  # kubectl get crd A B -o yaml
        for item in document["items"]:
            yield from _crds(item)


def _versions(crd: dict[str, Any]) -> dict[str, VersionSchema]:
    spec = as_dict(crd.get("spec"))
    out: dict[str, VersionSchema] = {}
    for version in spec.get("versions") or []:
        if not isinstance(version, dict) or not version.get("served", True):
            continue
        schema = as_dict(version.get("schema")).get("openAPIV3Schema")
        if isinstance(schema, dict) and isinstance(version.get("name"), str):
            status = "status" in (version.get("subresources") or {})
            out[version["name"]] = VersionSchema(schema, status)
    return out


def schemas_from_documents(documents: Iterable[tuple[str, object]]) -> CrdSchemas:
    """The CRDs among ``(source name, parsed document)`` pairs; other documents are
    ignored. A CRD without a served version with a schema adds nothing."""
    kinds: dict[tuple[str, str], dict[str, VersionSchema]] = {}
    for _source, document in documents:
        for crd in _crds(document):
            spec = as_dict(crd.get("spec"))
            names = as_dict(spec.get("names"))
            group, kind = spec.get("group"), names.get("kind")
            versions = _versions(crd)
            if isinstance(group, str) and isinstance(kind, str) and versions:
                kinds[(group, kind)] = versions
    return CrdSchemas(kinds)


def bundled_text(name: str) -> str:
    """One bundled CRD file as shipped (package data; works from a wheel)."""
    return resources.files("schemas.crdschema").joinpath("crds", name).read_text(
        encoding="utf-8")


@lru_cache(maxsize=1)
def bundled_schemas() -> CrdSchemas:
    """The pinned CRDs rollgate ships, read once per process."""
    return schemas_from_documents(
        (f"bundled {name}", yaml.safe_load(bundled_text(name))) for name in BUNDLED_FILES)
