"""Release (no RolloutManager left in a namespace): remove the plugin keys rollgate wrote.

Only keys rollgate owns are removed; keys it never wrote belong to whoever uses Argo
Rollouts without a RolloutManager. The ConfigMap and its other keys stay.

The keys go with the test-guarded JSON patch that sync mode uses for leftovers, not with
an apply of no keys: such an apply only gives up rollgate's share, so a key another field
manager co-owns (the same value applied by, say, the argo-rollouts-manager operator) would
stay and keep the plugins loaded. Removing while rollgate still owns the keys keeps this
retryable: ownership is how both the release and the controller's ``resync_keys`` find
the namespace again after a failure.
"""

from __future__ import annotations

from typing import Any

from kubernetes.client.exceptions import ApiException

from kubekit.kinds import CONFIG_MAP, DEPLOYMENT
from kubekit.rest import JSON_PATCH, is_not_found
from reconciler.runtime.types import Client, Context
from schemas.objects import Obj

from . import decisions
from .render import CONFIG_MAP_NAME, checksum
from .targets import Targets, with_kind


def release(targets: Targets, namespace: str, ctx: Context, rest: Client) -> None:
    """Remove rollgate's keys from the namespace's ConfigMap, then roll the Deployment
    only if what the ConfigMap still configures changed."""
    if not decisions.owned_keys(targets.config_map(ctx.cache, namespace)):
        return
    live = rest.get(CONFIG_MAP, namespace, CONFIG_MAP_NAME)
    owned = decisions.owned_keys(live)
    ops = decisions.removal_patch(live, owned) if live is not None else []
    if not ops:
        return  # the cache was behind: nothing of rollgate's is left
    result = _remove_keys(namespace, ops, rest)
    if result is None:
        return  # the ConfigMap was deleted meanwhile
    left = decisions.managed_values(result)
    removed = [k for k in owned if k not in left]
    if removed:
        ctx.events.emit(
            with_kind(result, CONFIG_MAP), type="Normal", reason="PluginsRemoved",
            message=(
                "no RolloutManager left in the namespace: rollgate's plugin keys "
                f"removed: {', '.join(removed)}"
            ),
        )
    # The checksum of what the ConfigMap still configures (normally nothing), so the
    # Argo Rollouts controller restarts only if its plugin set really changed.
    deployment = rest.get(DEPLOYMENT, namespace, targets.deployment_name)
    if deployment is not None and decisions.pod_template_checksum(deployment) != checksum(left):
        targets.patch_checksum(namespace, checksum(left), rest)


def _remove_keys(namespace: str, ops: list[dict[str, Any]], rest: Client) -> Obj | None:
    """The guarded removal; None when the ConfigMap is gone.

    A JSON patch never creates, so a ConfigMap deleted meanwhile stays deleted; a
    value changed since the read fails the test and is re-read on retry.
    """
    try:
        return rest.patch(
            CONFIG_MAP, namespace, CONFIG_MAP_NAME, ops,
            content_type=JSON_PATCH, field_manager=decisions.FIELD_MANAGER,
        )
    except ApiException as exc:
        if is_not_found(exc):
            return None
        raise
