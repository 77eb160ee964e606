"""The rollout-plugins controller: ``spec.plugins`` -> ``argo-rollouts-config``; the I/O.

Work is per namespace, because the ConfigMap and the Argo Rollouts Deployment are per
namespace. ``decisions.plan`` says what a pass does there (docs/plugins.md,
"RolloutManager plugins"); this module reads the cache, calls the pure modules
(``render``, ``audit``, ``decisions``), runs the digest pre-flight (``digests``) and
writes:

- sync (auto: the ``argo-rollouts`` Deployment exists and no RolloutManager controls
  it): the oldest RolloutManager owns the two plugin keys; the others only get a
  ``PluginsSynced=False`` condition naming the owner. Before anything is written, the
  digests of remote plugins are proven by downloading them: a mismatch or a failed
  download writes nothing but the condition, because Argo Rollouts would exit at start.
- audit (auto: argo-rollouts-manager controls the Deployment): neither the ConfigMap nor
  the Deployment is written, and the RolloutManager's status only once, to remove a
  ``PluginsSynced`` condition an earlier rollgate wrote; differences between the spec
  and the operator's rendering, and failed digest pre-flights, become Warning events
  (each once per generation) and metrics.
- waiting (auto: no Deployment yet): nothing at all is written, status included, because
  the operator creates the Deployment after the RolloutManager: a condition written
  before would stay stale next to it forever. The Deployment is watched, so the
  namespace is decided again when it appears.

Writes are minimal on purpose. The ConfigMap is written with server-side apply of only
the two keys (field manager ``rollgate``, force), so every other key, label and
annotation stays whatever its owners made it, and a write happens only when the live
content differs from the rendered one: an unrelated RolloutManager change moves no
resourceVersion. The Argo Rollouts Deployment is touched only through its pod-template
annotation ``rollgate.dev/plugins-checksum`` and only when the rendered content changed,
so it rolls one pod at a time and an unchanged plugin set never restarts it.

Decisions are made from the cache, and re-made from a fresh GET before any write, so a
stale cache costs one read instead of a duplicate write or a duplicate Warning event.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from kubernetes.client.exceptions import ApiException

from kubekit.kinds import CONFIG_MAP, DEPLOYMENT, ROLLOUT_MANAGER, Resource
from kubekit.rest import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    is_not_found,
    namespace_terminating,
)
from reconciler.payloads import ConditionStatus
from reconciler.runtime.status import write_status
from reconciler.runtime.types import (
    Cache,
    Client,
    Context,
    Controller,
    Key,
    Requeue,
    Watch,
    object_key,
)
from schemas.objects import Obj, meta_of

from . import decisions
from .audit import REASONS, AuditMemory, compare_with_operator, digest_findings
from .digests import (
    DigestVerifier,
    PluginDigest,
    https_fetcher,
    preflight,
    problems,
)
from .metrics import PluginMetrics
from .options import PluginsOptions
from .render import CONFIG_MAP_NAME, InvalidPluginSpec, checksum, render_plugin_config

log = logging.getLogger("reconciler.rollout_plugins")


def with_kind(obj: Mapping[str, Any], resource: Resource) -> dict[str, Any]:
    """Objects from list responses lack apiVersion/kind; events need them."""
    return {"apiVersion": resource.api_version, "kind": resource.kind, **obj}


def _verifier(options: PluginsOptions) -> DigestVerifier:
    """The pre-flight's downloader, from the download flags."""
    return DigestVerifier(https_fetcher(
        ca_file=options.ca_file,
        limits=options.download_limits,
        allow_http=options.allow_http,
        arch=options.arch,
    ))


class RolloutPluginsController(Controller):
    """Keeps ``argo-rollouts-config`` and the Argo Rollouts Deployment in line with RMs.

    Only the ConfigMap and the Deployment it manages are watched (field selectors on
    their names), so the cache holds two objects per namespace instead of every
    ConfigMap and Deployment of the cluster, and RBAC can name them (resourceNames).
    """

    name = "rollout-plugins"
    primary = ROLLOUT_MANAGER

    def __init__(
        self,
        *,
        options: PluginsOptions | None = None,
        verifier: DigestVerifier | None = None,
        metrics: PluginMetrics | None = None,
    ) -> None:
        """Take the Deployment name, the mode and the download settings from the flags
        (the defaults without ``options``).

        The Deployment's name narrows its watch (so RBAC can name it too), which is why
        the watches are fixed here, from the flags.
        """
        options = options if options is not None else PluginsOptions()
        if options.mode not in decisions.FLAG_MODES:
            raise ValueError(f"--plugins-mode must be one of {', '.join(decisions.FLAG_MODES)}, "
                             f"not {options.mode!r}")
        self.options = options
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self.metrics = metrics or PluginMetrics()
        # The feature's metrics, for the runtime to serve on its ``/metrics``.
        self.collectors = self.metrics.collectors
        self._memory = AuditMemory()
        self.deployment_name = options.rollouts_deployment
        self.config_maps = CONFIG_MAP.named(CONFIG_MAP_NAME)
        self.deployments = DEPLOYMENT.named(self.deployment_name)
        self.watches = (
            Watch(ROLLOUT_MANAGER, self._rollout_manager_keys),
            Watch(self.config_maps, self._config_map_keys),
            Watch(self.deployments, self._deployment_keys),
        )
        self.verifier = verifier if verifier is not None else _verifier(options)

    # -- watches ----------------------------------------------------------------------

    def _rollout_manager_keys(self, old: Obj | None, rm: Obj, cache: Cache) -> list[Key]:
        """Every RM of the namespace: a create or delete can move ownership, and the RM's
        own key covers the last one going (reconcile then releases the keys)."""
        namespace = meta_of(rm).get("namespace") or ""
        rms = cache.list(ROLLOUT_MANAGER, namespace)
        return sorted({object_key(rm)} | {object_key(other) for other in rms})

    def _config_map_keys(self, old: Obj | None, cm: Obj, cache: Cache) -> list[Key]:
        # The informer selects this name already; the check keeps the mapping right for
        # any cache that does not (and says what is relevant).
        if meta_of(cm).get("name") != CONFIG_MAP_NAME:
            return []
        namespace = meta_of(cm).get("namespace") or ""
        owner = decisions.owner_of(cache.list(ROLLOUT_MANAGER, namespace))
        if owner is not None:
            return [object_key(owner)]
        if decisions.owned_keys(cm):
            # No RolloutManager left but rollgate still owns keys here: any key of the
            # namespace makes reconcile release them.
            return [Key(namespace, CONFIG_MAP_NAME)]
        return []

    def _deployment_keys(self, old: Obj | None, deployment: Obj, cache: Cache) -> list[Key]:
        """The namespace's owner: its mode follows the Deployment (auto mode writes
        nothing until it appears). With no RolloutManager left but keys rollgate still
        owns, the namespace's release key: the release waits for a Deployment too."""
        if meta_of(deployment).get("name") != self.deployment_name:
            return []
        namespace = meta_of(deployment).get("namespace") or ""
        owner = decisions.owner_of(cache.list(ROLLOUT_MANAGER, namespace))
        if owner is not None:
            return [object_key(owner)]
        if decisions.owned_keys(cache.get(self.config_maps, namespace, CONFIG_MAP_NAME)):
            return [Key(namespace, CONFIG_MAP_NAME)]
        return []

    def resync_keys(self, cache: Cache) -> Iterable[Key]:
        """Namespaces where rollgate still owns keys but no RolloutManager is left.

        The runtime resyncs primaries only; without this a release missed while the
        reconciler was down would never be retried.
        """
        keys: list[Key] = []
        for cm in cache.list(self.config_maps):
            meta = meta_of(cm)
            namespace = meta.get("namespace") or ""
            if (
                meta.get("name") == CONFIG_MAP_NAME
                and decisions.owned_keys(cm)
                and decisions.owner_of(cache.list(ROLLOUT_MANAGER, namespace)) is None
            ):
                keys.append(Key(namespace, CONFIG_MAP_NAME))
        return keys

    # -- reconcile --------------------------------------------------------------------

    def reconcile(self, key: Key, ctx: Context) -> None:
        """Reconcile the namespace of ``key``.

        Any key of a namespace syncs that namespace's owner, so a ConfigMap or Deployment
        event needs no RM name; a per-namespace lock keeps two workers from writing the
        same ConfigMap (and emitting the same event) at once.
        """
        with self._lock_for(key.namespace):
            try:
                self._reconcile(key, ctx, ctx.client)
            except ApiException as exc:
                if not namespace_terminating(exc):
                    raise
                # The namespace is going away with everything in it; retrying a write
                # there only fills the log until the RolloutManager's delete arrives.
                log.debug("namespace terminating, nothing to do", extra={"key": str(key)})

    def _lock_for(self, namespace: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(namespace, threading.Lock())

    def _reconcile(self, key: Key, ctx: Context, rest: Client) -> None:
        namespace = key.namespace
        rms = ctx.cache.list(ROLLOUT_MANAGER, namespace)
        deployment = self._cached_deployment(namespace, ctx)
        keyed = ctx.cache.get(ROLLOUT_MANAGER, namespace, key.name)
        step = decisions.plan(self.options.mode, rms, deployment, keyed)
        if step.owner is None:
            self._forget(namespace)
            if step.action == "release":
                self._release(namespace, ctx, rest)
            return
        self.metrics.set_mode(namespace, step.mode)
        owner = with_kind(step.owner, ROLLOUT_MANAGER)
        if step.action == "audit":
            self._remove_stale_conditions(rms, ctx, rest)
            self._audit(namespace, rms, deployment, owner, ctx)
            return
        self._forget_audit(namespace)
        if step.action == "wait":
            return  # nothing at all until the Deployment exists (its watch brings us back)
        if step.action == "not-owner" and keyed is not None:
            self._set_condition(
                with_kind(keyed, ROLLOUT_MANAGER), ctx, rest, status="False", reason="NotOwner",
                message=decisions.not_owner_message(meta_of(owner).get("name") or "", namespace),
                event_type="Warning",
            )
            return
        self._sync(owner, ctx, rest)

    def _forget_audit(self, namespace: str) -> None:
        self._memory.forget(namespace)
        self.metrics.set_findings(namespace, ())

    def _forget(self, namespace: str) -> None:
        """No RolloutManager left in the namespace: drop its state and series."""
        self._memory.forget(namespace)
        self.metrics.forget(namespace)

    # -- audit: next to argo-rollouts-manager, write nothing ---------------------------

    def _audit(
        self, namespace: str, rms: list[Obj], deployment: Obj | None, owner: Obj,
        ctx: Context,
    ) -> None:
        """Compare the operator's rendering with the spec and report what differs.

        Reads the cache only and writes nothing but Events: not the ConfigMap, not the
        Deployment, not the RolloutManager's status (the operator owns all three).
        """
        rm = with_kind(decisions.audited_manager(rms, deployment, owner) or owner, ROLLOUT_MANAGER)
        allow_http = self.options.allow_http
        config_map = ctx.cache.get(self.config_maps, namespace, CONFIG_MAP_NAME)
        findings = compare_with_operator(rm, config_map, allow_http_plugins=allow_http)
        digests = self._audit_preflight(namespace, rm, allow_http)
        findings.extend(digest_findings(problems(digests)))
        self.metrics.set_findings(namespace, [f.kind for f in findings])
        fresh = self._memory.fresh(namespace, rm, findings)
        for finding in fresh:
            ctx.events.emit(rm, type="Warning", reason=REASONS[finding.kind],
                            message=finding.message)
        if fresh:
            log.info(
                "plugins audit: differences from argo-rollouts-manager's rendering",
                extra={"namespace": namespace, "findings": [f.kind for f in findings]},
            )
        if any(d.check.outcome == "failed" for d in digests):
            raise Requeue(after=decisions.DOWNLOAD_RETRY_SECONDS, reason="plugin download failed")

    def _remove_stale_conditions(self, rms: list[Obj], ctx: Context, rest: Client) -> None:
        """Audit's one status write: remove, once, the ``PluginsSynced`` condition an
        earlier rollgate wrote on a RolloutManager the operator now renders.

        One merge patch of ``status.conditions`` with every other condition as it is and
        the resourceVersion it was computed from (a stale view is refused with 409 and
        reconciled again); a RolloutManager without the condition costs no write.
        """
        for rm in rms:
            wanted = decisions.without_condition(rm)
            if wanted is None or decisions.is_deleting(rm):
                continue
            if write_status(rest, ctx.cache, ROLLOUT_MANAGER, rm, wanted) is not None:
                log.info("plugins audit: removed the PluginsSynced condition an earlier "
                         "rollgate wrote", extra={"key": str(object_key(rm))})

    def _audit_preflight(self, namespace: str, rm: Obj, allow_http: bool) -> list[PluginDigest]:
        """Pre-flight once per generation of the RolloutManager while it passes; again on
        each pass while it does not (the verifier's cache paces the downloads)."""
        proven = self._memory.proven(namespace, rm)
        if proven is not None:
            return proven
        results = preflight(rm, self.verifier, allow_http=allow_http)
        self.metrics.count_checks(results)
        self._memory.remember_digests(namespace, rm, results)
        return results

    # -- sync -------------------------------------------------------------------------

    def _sync(self, rm: Obj, ctx: Context, rest: Client) -> None:
        namespace = meta_of(rm).get("namespace") or ""
        allow_http = self.options.allow_http
        try:
            data, digest = render_plugin_config(rm, allow_http_plugins=allow_http)
        except InvalidPluginSpec as err:
            self._set_condition(
                rm, ctx, rest, status="False", reason="InvalidSpec",
                message=decisions.invalid_spec_message(err.findings), event_type="Warning",
            )
            return
        cached_cm = ctx.cache.get(self.config_maps, namespace, CONFIG_MAP_NAME)
        deployment = self._cached_deployment(namespace, ctx)
        if decisions.write_pending(cached_cm, deployment, data, digest):
            # Only before a write: an unchanged plugin set restarts nothing, so there
            # is nothing to prove (and a restarted reconciler downloads nothing).
            checked = preflight(rm, self.verifier, allow_http=allow_http)
            self.metrics.count_checks(checked)
            if problems(checked):
                self._refuse(rm, problems(checked), ctx, rest)
                return
        if not decisions.in_sync(cached_cm, data):
            self._write_config_map(rm, namespace, data, ctx, rest)
        exists = self._restart_rollouts(rm, namespace, digest, ctx, rest)
        note = decisions.rollout_note(self.deployment_name, namespace, exists=exists)
        self._set_condition(rm, ctx, rest, status="True", reason="Synced",
                            message=decisions.synced_message(data, digest, note))

    def _refuse(self, rm: Obj, bad: list[PluginDigest], ctx: Context, rest: Client) -> None:
        """A digest could not be proven: write nothing but the condition saying why."""
        reason, message = decisions.refusal(bad, self.deployment_name)
        self._set_condition(rm, ctx, rest, status="False", reason=reason, message=message,
                            event_type="Warning")
        if reason == "DownloadFailed":
            raise Requeue(after=decisions.DOWNLOAD_RETRY_SECONDS, reason="plugin download failed")

    def _write_config_map(
        self, rm: Obj, namespace: str, data: dict[str, str], ctx: Context, rest: Client
    ) -> None:
        live = rest.get(CONFIG_MAP, namespace, CONFIG_MAP_NAME)
        if decisions.in_sync(live, data):
            return  # the cache was behind
        dropped = decisions.unlisted_entries(decisions.managed_values(live), data,
                                             keys=decisions.foreign_keys(live))
        result = rest.patch(
            CONFIG_MAP, namespace, CONFIG_MAP_NAME, decisions.apply_body(namespace, data),
            content_type=APPLY_PATCH, field_manager=decisions.FIELD_MANAGER, force=True,
        )
        leftover = decisions.leftover_keys(data, result)
        if leftover:
            rest.patch(
                CONFIG_MAP, namespace, CONFIG_MAP_NAME, decisions.removal_patch(result, leftover),
                content_type=JSON_PATCH, field_manager=decisions.FIELD_MANAGER,
            )
        log.info(
            "plugins written",
            extra={"namespace": namespace, "configmap": CONFIG_MAP_NAME, "dropped": dropped},
        )
        if dropped:
            ctx.events.emit(
                rm, type="Warning", reason="PluginEntriesDropped",
                message=(
                    f"ConfigMap {CONFIG_MAP_NAME} had plugin entries this RolloutManager does "
                    f"not list; they were replaced: {', '.join(dropped)}"
                ),
            )
        ctx.events.emit(
            rm, type="Normal", reason="PluginsSynced",
            message=f"ConfigMap {CONFIG_MAP_NAME} updated: {decisions.describe(data)}",
        )

    def _cached_deployment(self, namespace: str, ctx: Context) -> Obj | None:
        return ctx.cache.get(self.deployments, namespace, self.deployment_name)

    def _restart_rollouts(
        self, rm: Obj, namespace: str, digest: str, ctx: Context, rest: Client
    ) -> bool:
        """Roll the Argo Rollouts Deployment when the rendered content changed; whether
        the Deployment exists."""
        cached = self._cached_deployment(namespace, ctx)
        if cached is None:
            return False
        if decisions.pod_template_checksum(cached) == digest:
            return True
        live = rest.get(DEPLOYMENT, namespace, self.deployment_name)
        if live is None:
            return False
        if decisions.pod_template_checksum(live) != digest:
            self._patch_checksum(namespace, digest, rest)
            ctx.events.emit(
                rm, type="Normal", reason="RolloutsRestarted",
                message=(
                    f'plugin configuration changed: rolling restart of Deployment '
                    f'"{self.deployment_name}" (checksum {digest[:12]})'
                ),
            )
        return True

    # -- release: no RolloutManager left ----------------------------------------------

    def _release(self, namespace: str, ctx: Context, rest: Client) -> None:
        """No RolloutManager in the namespace: remove the keys rollgate wrote.

        Only keys rollgate owns are removed; keys it never wrote belong to whoever uses
        Argo Rollouts without a RolloutManager. The ConfigMap and its other keys stay.

        The keys go with the test-guarded JSON patch that ``_sync`` uses for leftovers,
        not with an apply of no keys: such an apply only gives up rollgate's share, so a
        key another field manager co-owns (the same value applied by, say, the
        argo-rollouts-manager operator) would stay and keep the plugins loaded. Removing
        while rollgate still owns the keys keeps this retryable: ownership is how both
        this method and ``resync_keys`` find the namespace again after a failure.
        """
        if not decisions.owned_keys(ctx.cache.get(self.config_maps, namespace, CONFIG_MAP_NAME)):
            return
        live = rest.get(CONFIG_MAP, namespace, CONFIG_MAP_NAME)
        owned = decisions.owned_keys(live)
        ops = decisions.removal_patch(live, owned) if live is not None else []
        if not ops:
            return  # the cache was behind: nothing of rollgate's is left
        result = self._remove_keys(namespace, ops, rest)
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
        self._annotate_deployment(namespace, checksum(left), rest)

    def _remove_keys(self, namespace: str, ops: list[dict[str, Any]], rest: Client) -> Obj | None:
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

    # -- the Deployment and the status ------------------------------------------------

    def _annotate_deployment(self, namespace: str, digest: str, rest: Client) -> None:
        deployment = rest.get(DEPLOYMENT, namespace, self.deployment_name)
        if deployment is None or decisions.pod_template_checksum(deployment) == digest:
            return
        self._patch_checksum(namespace, digest, rest)

    def _patch_checksum(self, namespace: str, digest: str, rest: Client) -> None:
        """Set the Deployment's pod-template checksum annotation (a rolling restart):
        a merge patch of that one annotation, nothing else is touched."""
        rest.patch(
            DEPLOYMENT, namespace, self.deployment_name, decisions.checksum_patch(digest),
            content_type=MERGE_PATCH, field_manager=decisions.FIELD_MANAGER,
        )

    def _set_condition(
        self,
        rm: Obj,
        ctx: Context,
        rest: Client,
        *,
        status: ConditionStatus,
        reason: str,
        message: str,
        event_type: str | None = None,
    ) -> None:
        """Write ``PluginsSynced`` when it changed, other conditions kept as they are.

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
