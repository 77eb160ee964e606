"""What every mode of the plugins controller reads and writes in a namespace: the
ConfigMap ``argo-rollouts-config``, the Argo Rollouts Deployment (by the name the flags
give) and a RolloutManager's ``PluginsSynced`` condition."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from kubekit.kinds import CONFIG_MAP, DEPLOYMENT, ROLLOUT_MANAGER, Resource
from kubekit.rest import MERGE_PATCH
from reconciler.payloads import ConditionStatus
from reconciler.runtime.status import write_status
from reconciler.runtime.types import Cache, Client, Context
from schemas.objects import Obj

from . import decisions
from .render import CONFIG_MAP_NAME


def with_kind(obj: Mapping[str, Any], resource: Resource) -> dict[str, Any]:
    """Objects from list responses lack apiVersion/kind; events need them."""
    return {"apiVersion": resource.api_version, "kind": resource.kind, **obj}


@dataclass(frozen=True)
class Targets:
    """The ConfigMap and the Deployment by name (the informers select only these, so the
    cache holds two objects per namespace and RBAC can name them), and the writes the
    modes share."""

    deployment_name: str

    @property
    def config_maps(self) -> Resource:
        return CONFIG_MAP.named(CONFIG_MAP_NAME)

    @property
    def deployments(self) -> Resource:
        return DEPLOYMENT.named(self.deployment_name)

    def config_map(self, cache: Cache, namespace: str) -> Obj | None:
        return cache.get(self.config_maps, namespace, CONFIG_MAP_NAME)

    def deployment(self, cache: Cache, namespace: str) -> Obj | None:
        return cache.get(self.deployments, namespace, self.deployment_name)

    def patch_checksum(self, namespace: str, digest: str, rest: Client) -> None:
        """Set the Deployment's pod-template checksum annotation (a rolling restart):
        a merge patch of that one annotation, nothing else is touched."""
        rest.patch(
            DEPLOYMENT, namespace, self.deployment_name, decisions.checksum_patch(digest),
            content_type=MERGE_PATCH, field_manager=decisions.FIELD_MANAGER,
        )


def set_condition(rm: Obj, ctx: Context, rest: Client, *, status: ConditionStatus,
                  reason: str, message: str, event_type: str | None = None) -> None:
    """Write ``PluginsSynced`` when it changed, other conditions kept as they are (and,
    with ``event_type``, an Event saying the same once written).

    Through the runtime's status helper: one merge patch of ``status.conditions``
    carrying the resourceVersion, so a write from a stale view is refused (409) and
    the runtime reconciles again from the newer object instead of overwriting it.
    """
    updated = decisions.updated_conditions(rm, status=status, reason=reason, message=message,
                                           now=datetime.now(UTC))
    if updated is None:
        return
    written = write_status(rest, ctx.cache, ROLLOUT_MANAGER, rm, {"conditions": updated})
    if written is not None and event_type:
        ctx.events.emit(rm, type=event_type, reason=reason, message=message)
