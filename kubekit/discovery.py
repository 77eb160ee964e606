"""Which custom resources the API server serves now.

A reconciler controller whose custom resource is not served (its CRD is not installed:
Argo Rollouts from argo-helm's chart ships no RolloutManager CRD, a cluster without Kargo
has no Stage CRD) waits for it without holding the others (docs/operating.md,
"Controllers and missing CRDs"), and ``rollgate selftest`` skips the check of a kind
that is not served. Both ask the API server's discovery
(``GET /apis/<group>/<version>``), which every authenticated client may read (the
``system:discovery`` role) and which lists a CRD's resource as soon as it is Established.
Built-in kinds (core, apps, coordination) are always served and never asked for.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from kubernetes.client.exceptions import ApiException

from kubekit.kinds import Resource
from kubekit.rest import Rest

# The groups of the kinds rollgate reads that ship with Kubernetes itself.
BUILT_IN_GROUPS = frozenset({"", "apps", "coordination.k8s.io", "events.k8s.io"})


class Discovery(Protocol):
    """The plurals the API server serves in one group/version (empty when none)."""

    def served(self, group: str, version: str) -> frozenset[str]: ...


class RestDiscovery:
    """``Discovery`` over the API: a 404 means the group/version is not served at all."""

    def __init__(self, rest: Rest) -> None:
        self.rest = rest

    def served(self, group: str, version: str) -> frozenset[str]:
        try:
            listed = self.rest.raw("GET", f"/apis/{group}/{version}", timeout=(5.0, 10.0))
        except ApiException as exc:
            if exc.status == 404:
                return frozenset()
            raise
        # Subresources are listed as "<plural>/<sub>"; only the resources themselves count.
        return frozenset(r["name"] for r in (listed or {}).get("resources") or []
                         if "/" not in r.get("name", "/"))


def crd_name(resource: Resource) -> str:
    """The CustomResourceDefinition's name for ``resource``: ``<plural>.<group>``."""
    return f"{resource.plural}.{resource.group}"


def custom(resources: Iterable[Resource]) -> list[Resource]:
    """The resources among ``resources`` that a CRD provides, each once, in order."""
    out: list[Resource] = []
    for r in resources:
        if r.group not in BUILT_IN_GROUPS and crd_name(r) not in map(crd_name, out):
            out.append(r)
    return out


def missing_crds(discovery: Discovery, resources: Sequence[Resource]) -> list[str]:
    """The CRD names of ``resources`` the API server does not serve now, asking once per
    group/version. A discovery error is raised: the caller cannot tell a missing CRD from
    an API server that did not answer."""
    answers: dict[tuple[str, str], frozenset[str]] = {}
    missing: list[str] = []
    for r in custom(resources):
        gv = (r.group, r.version)
        if gv not in answers:
            answers[gv] = discovery.served(*gv)
        if r.plural not in answers[gv]:
            missing.append(crd_name(r))
    return missing
