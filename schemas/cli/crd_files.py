"""``validate --crds DIR``: a cluster's CRDs (``kubectl get crd NAME -o yaml`` output,
one CRD or a ``List`` per file) in front of the bundled ones, as kubeconform tries its
schema locations in order."""

from __future__ import annotations

from collections.abc import Sequence

from schemas.cli.manifests import read_sources
from schemas.crdschema import CrdSchemas, bundled_schemas, schemas_from_documents


def read_crds(paths: Sequence[str]) -> tuple[CrdSchemas, list[str]]:
    """The schemas to check against (those in ``paths`` over the bundled ones) and a
    message for each path that cannot be read or holds no CRD with a schema."""
    if not paths:
        return bundled_schemas(), []
    sources, problems = read_sources(paths, recursive=False)
    found = schemas_from_documents(
        (source.path, document.data) for source in sources for document in source.documents)
    if not found.kinds and not problems:
        problems.append(f"--crds {' '.join(paths)}: no CustomResourceDefinition with an "
                        "openAPIV3Schema found (save them with `kubectl get crd NAME -o yaml`)")
    return found.over(bundled_schemas()), problems
