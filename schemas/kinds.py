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
# Kargo v1.11 and Argo Rollouts v1.9 serve their kinds at one version each; harness, tests
# and benches write objects with these rather than spelling the apiVersion out.
VERSION_KARGO: Final = "v1alpha1"
VERSION_ARGO: Final = "v1alpha1"
API_VERSION_KARGO: Final = f"{GROUP_KARGO}/{VERSION_KARGO}"
API_VERSION_ARGO: Final = f"{GROUP_ARGO}/{VERSION_ARGO}"


class Kind(NamedTuple):
    group: str  # "" for the core group
    version: str
    plural: str
    namespaced: bool = True


KINDS: Final[dict[str, Kind]] = {
    KIND_STAGE: Kind(GROUP_KARGO, VERSION_KARGO, "stages"),
    "Freight": Kind(GROUP_KARGO, VERSION_KARGO, "freights"),
    KIND_ANALYSIS_TEMPLATE: Kind(GROUP_ARGO, VERSION_ARGO, "analysistemplates"),
    KIND_CLUSTER_ANALYSIS_TEMPLATE: Kind(
        GROUP_ARGO, VERSION_ARGO, "clusteranalysistemplates", namespaced=False),
    "AnalysisRun": Kind(GROUP_ARGO, VERSION_ARGO, "analysisruns"),
    KIND_ROLLOUT_MANAGER: Kind(GROUP_ARGO, VERSION_ARGO, "rolloutmanagers"),
    "ConfigMap": Kind("", "v1", "configmaps"),
    "Deployment": Kind("apps", "v1", "deployments"),
    "Event": Kind("", "v1", "events"),
    "Lease": Kind("coordination.k8s.io", "v1", "leases"),
}
