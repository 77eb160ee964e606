"""Which CRDs a plane installs: ours, the upstream trees', and ``$ROLLGATE_CRDS_DIR``'s.

Ours (``manifests/crds``) behave like the real ones for every field rollgate reads or
writes; where an upstream source tree is there (Kargo's nine CRDs, argo-rollouts-manager's
RolloutManager) its CRD replaces ours of the same name, because the real controllers may
run on the plane and must meet their own CRDs; over both, the CRDs found in
``$ROLLGATE_CRDS_DIR`` (a cluster's ``kubectl get crd NAME -o yaml``), plus any other CRD
found there, so anyone can run the suites against the CRDs of their own cluster.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from harness.paths import REPO_ROOT
from harness.plane import PlaneError, objects_of
from harness.upstream import trees

OURS = REPO_ROOT / "manifests" / "crds"
# What the API server sets on a stored object; `kubectl get crd -o yaml` output carries
# it, and applying it back would fail (resourceVersion) or lie (status).
_SERVER_FIELDS = ("resourceVersion", "uid", "creationTimestamp", "generation",
                  "managedFields", "selfLink")


def from_dir(directory: Path) -> list[dict[str, Any]]:
    """Every CustomResourceDefinition in ``*.yaml``/``*.yml``/``*.json`` under
    ``directory`` (``List`` documents expanded), as applyable objects: files written by
    ``kubectl get crd NAME -o yaml`` lose their server-set fields and status."""
    if not directory.is_dir():
        raise PlaneError(f"ROLLGATE_CRDS_DIR={directory} is not a directory")
    found: list[dict[str, Any]] = []
    for path in sorted(directory.rglob("*")):
        if path.suffix not in (".yaml", ".yml", ".json") or not path.is_file():
            continue
        try:
            docs = objects_of(path.read_text())
        except yaml.YAMLError as err:
            raise PlaneError(f"{path}: not YAML: {err}") from err
        for doc in docs:
            items = doc.get("items") if doc.get("kind", "").endswith("List") else [doc]
            for item in items or []:
                if isinstance(item, dict) and item.get("kind") == "CustomResourceDefinition":
                    found.append(applyable(item))
    return found


def applyable(crd: dict[str, Any]) -> dict[str, Any]:
    """``crd`` without status, server-set metadata and kubectl's last-applied copy."""
    crd = {k: v for k, v in crd.items() if k != "status"}
    meta = dict(crd.get("metadata") or {})
    for key in _SERVER_FIELDS:
        meta.pop(key, None)
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k != "kubectl.kubernetes.io/last-applied-configuration"}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    crd["metadata"] = meta
    return crd


def ours() -> list[dict[str, Any]]:
    """The CRDs ``manifests/crds/kustomization.yaml`` lists (it has no transformers)."""
    kustomization = yaml.safe_load((OURS / "kustomization.yaml").read_text())
    found: list[dict[str, Any]] = []
    for name in kustomization["resources"]:
        found += [d for d in objects_of((OURS / name).read_text())
                  if d.get("kind") == "CustomResourceDefinition"]
    return found


def for_plane(*, tree_crds: bool = True,
              say: Callable[[str], None] = lambda _: None) -> list[dict[str, Any]]:
    """The CRDs a plane installs (see the module docstring); ``tree_crds=False`` keeps
    ours over the trees', so tests can show that ours behave like theirs."""
    crds = {c["metadata"]["name"]: c for c in ours()}
    from_trees = trees.tree_crds() if tree_crds else []
    if from_trees:
        say("CRDs from the upstream trees: "
            + ", ".join(sorted(c["metadata"]["name"] for c in from_trees)))
    crds.update({c["metadata"]["name"]: c for c in from_trees})
    directory = os.environ.get("ROLLGATE_CRDS_DIR")
    if directory:
        theirs = from_dir(Path(directory))
        if not theirs:
            raise PlaneError(f"ROLLGATE_CRDS_DIR={directory} holds no CRD")
        say("CRDs from ROLLGATE_CRDS_DIR: "
            + ", ".join(sorted(c["metadata"]["name"] for c in theirs)))
        crds.update({c["metadata"]["name"]: c for c in theirs})
    return list(crds.values())
