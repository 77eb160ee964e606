"""Helpers shared by the unit and HTTP tests (and the bench, through tests/http/reviews.py).

On the import path as ``helpers`` (pyproject: ``[tool.pytest.ini_options] pythonpath``).
They state the contract independently of the code under test: object shapes of the
upstream projects at the versions README "Target versions" pins, and a JSON Patch
applier that is not ``schemas.pointer``'s.
"""

from __future__ import annotations

import copy
from typing import Any

# The apiVersion of each kind the tests build (the CRDs in manifests/crds).
API_VERSIONS = {
    "Stage": "kargo.akuity.io/v1alpha1",
    "Freight": "kargo.akuity.io/v1alpha1",
    "AnalysisTemplate": "argoproj.io/v1alpha1",
    "ClusterAnalysisTemplate": "argoproj.io/v1alpha1",
    "AnalysisRun": "argoproj.io/v1alpha1",
    "RolloutManager": "argoproj.io/v1alpha1",
}


def k8s_object(
    kind: str,
    *,
    name: str,
    namespace: str | None = None,
    spec: dict[str, Any] | None = None,
    **metadata: Any,
) -> dict[str, Any]:
    """A fresh ``kind`` object as the API server holds it; ``namespace=None`` for a
    cluster-scoped one, ``metadata`` for further fields such as ``uid``."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(metadata)
    return {
        "apiVersion": API_VERSIONS[kind],
        "kind": kind,
        "metadata": meta,
        "spec": spec if spec is not None else {},
    }


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def apply_patch(obj: Any, ops: list[dict[str, Any]]) -> Any:
    """A small RFC 6902 applier (add/replace/remove/test) on a copy of ``obj``: what the
    API server does with a mutating webhook's answer. Independent of ``schemas``' own,
    so it can check the patches ``schemas`` makes; ``replace`` of a missing member and
    a failed ``test`` are assertion errors."""
    doc = copy.deepcopy(obj)
    for op in ops:
        parts = _pointer(op["path"])
        parent: Any = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        if op["op"] == "test":
            current = parent[int(last)] if isinstance(parent, list) else parent[last]
            assert current == op["value"], op
        elif op["op"] in ("add", "replace"):
            if isinstance(parent, list):
                if last == "-":
                    parent.append(op["value"])
                elif op["op"] == "add":
                    parent.insert(int(last), op["value"])
                else:
                    assert int(last) < len(parent), op
                    parent[int(last)] = op["value"]
            else:
                if op["op"] == "replace":
                    assert last in parent, op
                parent[last] = op["value"]
        elif op["op"] == "remove":
            if isinstance(parent, list):
                del parent[int(last)]
            else:
                del parent[last]
        else:
            raise AssertionError(f"unexpected op {op}")
    return doc
