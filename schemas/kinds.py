"""The kinds rollgate reads or writes, as plain facts: API group, version, plural, scope.

The one table of them. It lives here, in the lowest layer, because ``schemas`` needs the
groups (a Stage of another API group is someone else's resource); ``kubekit.kinds``
builds its ``Resource`` values from it for the webhook and the reconciler.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from schemas.constants import (
    KIND_ANALYSIS_TEMPLATE,
    KIND_CLUSTER_ANALYSIS_TEMPLATE,
    KIND_ROLLOUT_MANAGER,
    KIND_STAGE,
)

GROUP_KARGO: Final = "kargo.akuity.io"
GROUP_ARGO: Final = "argoproj.io"


class Kind(NamedTuple):
    group: str  # "" for the core group
    version: str
    plural: str
    namespaced: bool = True


KINDS: Final[dict[str, Kind]] = {
    KIND_STAGE: Kind(GROUP_KARGO, "v1alpha1", "stages"),
    "Freight": Kind(GROUP_KARGO, "v1alpha1", "freights"),
    KIND_ANALYSIS_TEMPLATE: Kind(GROUP_ARGO, "v1alpha1", "analysistemplates"),
    KIND_CLUSTER_ANALYSIS_TEMPLATE: Kind(
        GROUP_ARGO, "v1alpha1", "clusteranalysistemplates", namespaced=False),
    "AnalysisRun": Kind(GROUP_ARGO, "v1alpha1", "analysisruns"),
    KIND_ROLLOUT_MANAGER: Kind(GROUP_ARGO, "v1alpha1", "rolloutmanagers"),
    "ConfigMap": Kind("", "v1", "configmaps"),
    "Deployment": Kind("apps", "v1", "deployments"),
    "Event": Kind("", "v1", "events"),
    "Lease": Kind("coordination.k8s.io", "v1", "leases"),
}
