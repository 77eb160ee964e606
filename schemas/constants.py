"""Names that rollgate shares between the webhook, the reconciler and the CLI.

They live in ``schemas`` (the package with no I/O and no heavy imports) so that the
validation rules (e.g. "labels rollgate reserves") and the code that sets those labels on
an AnalysisRun can never drift apart.
"""

from __future__ import annotations

from typing import Final

LABEL_STAGE: Final = "kargo.akuity.io/stage"
LABEL_FREIGHT_COLLECTION: Final = "kargo.akuity.io/freight-collection"
LABEL_ATTEMPT: Final = "rollgate.dev/attempt"
LABEL_MANAGED_BY: Final = "app.kubernetes.io/managed-by"
MANAGED_BY: Final = "rollgate"

ANNOTATION_FREIGHT: Final = "rollgate.dev/freight"
ANNOTATION_REVERIFY: Final = "kargo.akuity.io/reverify"
ANNOTATION_ABORT: Final = "kargo.akuity.io/abort"
# Kargo adds it to every Stage its controller reconciles (api/v1alpha1/labels.go).
KARGO_FINALIZER: Final = "kargo.akuity.io/finalizer"
# On a run rollgate started or aborted for a reverify/abort request: the request's value,
# so a restarted reconciler knows the request was already acted on.
ANNOTATION_REQUEST: Final = "rollgate.dev/request"
ANNOTATION_PLUGINS_CHECKSUM: Final = "rollgate.dev/plugins-checksum"

# Any key under this prefix is rollgate's to set; a user value would be overwritten.
RESERVED_LABEL_PREFIX: Final = "rollgate.dev/"
# The labels rollgate puts on every AnalysisRun it creates; it finds its runs by them,
# so a user-supplied value would either be overwritten or break adoption.
RESERVED_LABEL_KEYS: Final[frozenset[str]] = frozenset(
    {LABEL_STAGE, LABEL_FREIGHT_COLLECTION, LABEL_ATTEMPT, LABEL_MANAGED_BY}
)

# Kinds and API groups as they appear in objects (rollgate handles plain JSON).
KIND_STAGE: Final = "Stage"
KIND_ROLLOUT_MANAGER: Final = "RolloutManager"
KIND_ANALYSIS_TEMPLATE: Final = "AnalysisTemplate"
KIND_CLUSTER_ANALYSIS_TEMPLATE: Final = "ClusterAnalysisTemplate"
