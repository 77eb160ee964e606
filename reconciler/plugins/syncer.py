"""Sync mode (auto: the ``argo-rollouts`` Deployment exists and no RolloutManager controls
it): the oldest RolloutManager owns the two plugin keys; the others only get a
``PluginsSynced=False`` condition naming the owner. Before anything is written, the
digests of remote plugins are proven by downloading them: a mismatch or a failed
download writes nothing but the condition, because Argo Rollouts would exit at start.

Writes are minimal on purpose. The ConfigMap is written with server-side apply of only
the two keys (field manager ``rollgate``, force), so every other key, label and
annotation stays whatever its owners made it, and a write happens only when the live
content differs from the rendered one: an unrelated RolloutManager change moves no
resourceVersion. The Argo Rollouts Deployment is touched only through its pod-template
annotation ``rollgate.dev/plugins-checksum`` and only when the rendered content changed,
so it rolls one pod at a time and an unchanged plugin set never restarts it. Each write
is decided again from a fresh GET, so a stale cache costs one read, not a duplicate
write or Event.
"""

from __future__ import annotations

import logging

from kubekit.kinds import CONFIG_MAP, DEPLOYMENT, ROLLOUT_MANAGER
from kubekit.rest import APPLY_PATCH, JSON_PATCH
from reconciler.runtime.types import Client, Context, Requeue
from schemas.objects import Obj, meta_of

from . import decisions
from .digests import DigestVerifier, PluginDigest, preflight, problems
from .metrics import PluginMetrics
from .render import CONFIG_MAP_NAME, InvalidPluginSpec, render_plugin_config
from .targets import Targets, set_condition, with_kind

log = logging.getLogger("reconciler.rollout_plugins")


class Syncer:
    """Sync mode: the owner's plugins into the ConfigMap, the Deployment rolled when they
    changed, ``PluginsSynced`` on every RolloutManager of the namespace."""

    def __init__(self, *, targets: Targets, verifier: DigestVerifier, metrics: PluginMetrics,
                 allow_http: bool) -> None:
        self.targets = targets
        self.verifier = verifier
        self.metrics = metrics
        self.allow_http = allow_http

    def not_owner(self, rm: Obj, owner: Obj, ctx: Context, rest: Client) -> None:
        """A RolloutManager that is not its namespace's owner: only the condition."""
        namespace = meta_of(rm).get("namespace") or ""
        set_condition(
            with_kind(rm, ROLLOUT_MANAGER), ctx, rest, status="False", reason="NotOwner",
            message=decisions.not_owner_message(meta_of(owner).get("name") or "", namespace),
            event_type="Warning",
        )

    def sync(self, rm: Obj, ctx: Context, rest: Client) -> None:
        """The owner's pass: render, prove the digests before a write, write what differs,
        then the condition."""
        namespace = meta_of(rm).get("namespace") or ""
        try:
            data, digest = render_plugin_config(rm, allow_http_plugins=self.allow_http)
        except InvalidPluginSpec as err:
            set_condition(rm, ctx, rest, status="False", reason="InvalidSpec",
                          message=decisions.invalid_spec_message(err.findings),
                          event_type="Warning")
            return
        cached_cm = self.targets.config_map(ctx.cache, namespace)
        deployment = self.targets.deployment(ctx.cache, namespace)
        if decisions.write_pending(cached_cm, deployment, data, digest):
            # Only before a write: an unchanged plugin set restarts nothing, so there
            # is nothing to prove (and a restarted reconciler downloads nothing).
            checked = preflight(rm, self.verifier, allow_http=self.allow_http)
            self.metrics.count_checks(checked)
            if problems(checked):
                self._refuse(rm, problems(checked), ctx, rest)
                return
        if not decisions.in_sync(cached_cm, data):
            self._write_config_map(rm, namespace, data, ctx, rest)
        exists = self._restart_rollouts(rm, namespace, digest, ctx, rest)
        note = decisions.rollout_note(self.targets.deployment_name, namespace, exists=exists)
        set_condition(rm, ctx, rest, status="True", reason="Synced",
                      message=decisions.synced_message(data, digest, note))

    def _refuse(self, rm: Obj, bad: list[PluginDigest], ctx: Context, rest: Client) -> None:
        """A digest could not be proven: write nothing but the condition saying why."""
        reason, message = decisions.refusal(bad, self.targets.deployment_name)
        set_condition(rm, ctx, rest, status="False", reason=reason, message=message,
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

    def _restart_rollouts(
        self, rm: Obj, namespace: str, digest: str, ctx: Context, rest: Client
    ) -> bool:
        """Roll the Argo Rollouts Deployment when the rendered content changed; whether
        the Deployment exists."""
        cached = self.targets.deployment(ctx.cache, namespace)
        if cached is None:
            return False
        if decisions.pod_template_checksum(cached) == digest:
            return True
        name = self.targets.deployment_name
        live = rest.get(DEPLOYMENT, namespace, name)
        if live is None:
            return False
        if decisions.pod_template_checksum(live) != digest:
            self.targets.patch_checksum(namespace, digest, rest)
            ctx.events.emit(
                rm, type="Normal", reason="RolloutsRestarted",
                message=(
                    f'plugin configuration changed: rolling restart of Deployment '
                    f'"{name}" (checksum {digest[:12]})'
                ),
            )
        return True
