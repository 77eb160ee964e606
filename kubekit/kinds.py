"""``Resource``: a kind as the API addresses it, and one value for each kind rollgate
uses, built from the one table of facts (``schemas.kinds``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from schemas.kinds import KINDS


@dataclass(frozen=True, slots=True)
class Resource:
    """A Kubernetes resource handled as plain JSON.

    ``field_selector`` and ``label_selector`` narrow what an informer lists and watches
    (``fieldSelector`` / ``labelSelector`` on both requests). A controller that needs
    one object by name declares it with ``named``: the cache then holds only that
    object, and RBAC can be limited to it with ``resourceNames`` (the API server
    authorizes a list/watch whose field selector is ``metadata.name=<x>`` as a request
    for ``<x>``). The selector is part of equality
    on purpose: a narrowed resource is a different cache, so asking the cache for the
    unnarrowed one fails loudly instead of silently answering from a subset, and two
    controllers that select differently get separate informers. ``labelled`` narrows by
    labels the same way (a Kargo shard's Stages).
    """

    group: str  # "" for the core group
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    field_selector: str | None = None
    label_selector: str | None = None

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def named(self, name: str) -> Resource:
        """This resource narrowed to objects called ``name`` (in any watched namespace)."""
        return replace(self, field_selector=f"metadata.name={name}")

    def labelled(self, selector: str) -> Resource:
        """This resource narrowed to objects whose labels match ``selector``."""
        return replace(self, label_selector=selector)


def of_kind(kind: str) -> Resource:
    facts = KINDS[kind]
    return Resource(facts.group, facts.version, facts.plural, kind, facts.namespaced)


STAGE = of_kind("Stage")
FREIGHT = of_kind("Freight")
ANALYSIS_TEMPLATE = of_kind("AnalysisTemplate")
CLUSTER_ANALYSIS_TEMPLATE = of_kind("ClusterAnalysisTemplate")
ANALYSIS_RUN = of_kind("AnalysisRun")
ROLLOUT_MANAGER = of_kind("RolloutManager")
CONFIG_MAP = of_kind("ConfigMap")
DEPLOYMENT = of_kind("Deployment")
EVENT = of_kind("Event")
LEASE = of_kind("Lease")
