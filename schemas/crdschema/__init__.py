"""Whole Stages and RolloutManagers against the OpenAPI v3 schemas of their CRDs, as the
API server checks them before any webhook sees the object (docs/validate.md
"``rollgate validate``", "Whole objects: the CRD schemas").

Only ``python -m schemas validate`` uses this: the webhook never sees an object the API
server's schema stage refused, so repeating the checks there would only cost time.

- ``load``: CRD documents -> :class:`CrdSchemas` (the bundled copies in ``crds/``,
  package data equal to ``manifests/crds/``, or a cluster's ``kubectl get crd -o yaml``);
- ``structural``: the walk (strict decoding's unknown fields, pruned nulls, types,
  enums, patterns, bounds, required fields, list-map keys) with the API server's wording;
- ``cel``: the subset of ``x-kubernetes-validations`` rules evaluated faithfully;
- ``patterns``: Go RE2 patterns as Python regular expressions;
- ``replaced``: the Kargo v0 fields whose unknown-field error names their v1 replacement.
"""

from __future__ import annotations

from schemas.crdschema.load import CrdSchemas, bundled_schemas, schemas_from_documents
from schemas.crdschema.structural import check_against_crds, declares

__all__ = ["CrdSchemas", "bundled_schemas", "check_against_crds", "declares",
           "schemas_from_documents"]
