"""The upstream source trees the real Kargo and argo-rollouts-manager are built from.

Their Go modules are not served by the module proxy (every dependency is), so
``hack/k8s/build.sh`` builds them from source trees at the pinned tags:

- ``ROLLGATE_KARGO_SRC`` (default ``../shared/upstream/kargo-<KARGO_VERSION>`` beside
  the repository): ``kargo`` from ``cmd/controlplane``, whose subcommands
  ``controller``, ``kubernetes-webhooks-server`` and ``management-controller`` the
  harness runs;
- ``ROLLGATE_ROLLOUTS_MANAGER_SRC`` (default
  ``../shared/upstream/argo-rollouts-manager-<version>``): ``argo-rollouts-manager``
  from ``./cmd``.

A user gets the trees with ``git clone --depth 1 --branch <tag>`` (docs/development.md, "Quick
start"). This module finds the trees and the binaries built from them, and reads the
CRDs the trees ship; ``harness.upstream.kargo_chart`` renders Kargo's chart from its
tree, ``harness.upstream.kargo`` and ``harness.upstream.operator`` run them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import yaml

from harness import versions
from harness.paths import REPO_ROOT, BinaryMissing, binary
from harness.process import ProcessError
from schemas.kinds import GROUP_KARGO

KARGO = "kargo"
ROLLOUTS_MANAGER = "argo-rollouts-manager"
KARGO_NAMESPACE = "kargo"
# Logged by controller-runtime once the Stage controller's workers run.
KARGO_READY_LINE = re.compile(rb"Starting workers.*\"Stage\"")
# The label Kargo's Project webhook and management controller put on a Project's
# namespace; Kargo's validators admit nothing in a namespace without it.
PROJECT_LABEL = f"{GROUP_KARGO}/project"


class UpstreamMissing(ProcessError):
    """A source tree or a binary built from it is missing; the message says what to do."""


def _default_tree(name: str) -> Path:
    return REPO_ROOT.parent / "shared" / "upstream" / name


def kargo_src() -> Path:
    return Path(os.environ.get("ROLLGATE_KARGO_SRC")
                or _default_tree(f"kargo-{versions.kargo()}"))


def rollouts_manager_src() -> Path:
    return Path(os.environ.get("ROLLGATE_ROLLOUTS_MANAGER_SRC")
                or _default_tree(f"argo-rollouts-manager-{versions.argo_rollouts_manager()}"))


def _tree_hint(variable: str, tree: Path, tag: str, project: str) -> str:
    return (f"{variable}={tree}: no such source tree; get it with `git clone --depth 1 "
            f"--branch {tag} https://github.com/{project} DIR` and set {variable}=DIR")


def require_kargo_src() -> Path:
    tree = kargo_src()
    if not (tree / "go.mod").is_file():
        raise UpstreamMissing(_tree_hint("ROLLGATE_KARGO_SRC", tree, versions.kargo(),
                                         "akuity/kargo"))
    return tree


def require_rollouts_manager_src() -> Path:
    tree = rollouts_manager_src()
    if not (tree / "go.mod").is_file():
        raise UpstreamMissing(_tree_hint(
            "ROLLGATE_ROLLOUTS_MANAGER_SRC", tree, versions.argo_rollouts_manager(),
            "argoproj-labs/argo-rollouts-manager"))
    return tree


def _binary(name: str, directory: str) -> Path:
    try:
        return binary(name, directory)
    except BinaryMissing as err:
        raise UpstreamMissing(str(err)) from err


def kargo_binary() -> Path:
    require_kargo_src()
    return _binary(KARGO, f"kargo-{versions.kargo()}")


def rollouts_manager_binary() -> Path:
    require_rollouts_manager_src()
    return _binary(ROLLOUTS_MANAGER, f"argo-rollouts-manager-{versions.argo_rollouts_manager()}")


# --------------------------------------------------------------------------- CRDs


def _crds_in(paths: list[Path]) -> list[dict[str, Any]]:
    found = []
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                found.append(doc)
    return found


def kargo_crds() -> list[dict[str, Any]]:
    """All nine CRDs of Kargo's chart (``charts/kargo/resources/crds``)."""
    directory = require_kargo_src() / "charts" / "kargo" / "resources" / "crds"
    return _crds_in(sorted(directory.glob("*.yaml")))


def rollouts_manager_crds() -> list[dict[str, Any]]:
    """Only the RolloutManager CRD: ``config/crd/bases`` also holds older copies of Argo
    Rollouts' own CRDs, which must not replace the pinned ones."""
    path = (require_rollouts_manager_src() / "config" / "crd" / "bases"
            / "argoproj.io_rolloutmanagers.yaml")
    return _crds_in([path])


def tree_crds() -> list[dict[str, Any]]:
    """The CRDs of the trees that are there (none when neither is)."""
    crds: list[dict[str, Any]] = []
    if (kargo_src() / "go.mod").is_file():
        crds += kargo_crds()
    if (rollouts_manager_src() / "go.mod").is_file():
        crds += rollouts_manager_crds()
    return crds


def exprcheck_binary() -> Path:
    """hack/exprcheck: expr-lang as Kargo uses it, the oracle of the expression tests."""
    return _binary("exprcheck", f"exprcheck-{versions.expr_lang()}")
