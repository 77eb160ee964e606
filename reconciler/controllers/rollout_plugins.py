"""RolloutManager plugins controller: ``spec.plugins`` -> ``argo-rollouts-config``.

Work is per namespace, because the ConfigMap and the Argo Rollouts Deployment are per
namespace. What happens there depends on ``--plugins-mode`` (``plugin_audit``):

- sync (auto: the ``argo-rollouts`` Deployment exists and no RolloutManager controls
  it): the oldest RolloutManager (creationTimestamp, then name) owns the two plugin
  keys; the others only get a ``PluginsSynced=False`` condition naming the owner.
  Before anything is written, the digests of remote plugins are proven by downloading
  them (``plugin_digests``): a mismatch or a failed download writes nothing but the
  condition, because Argo Rollouts would exit at start.
- audit (auto: argo-rollouts-manager controls the Deployment): nothing is written at all,
  not even status; differences between the spec and the operator's rendering, and
  failed digest pre-flights, become Warning events (each once per generation) and
  metrics.
- waiting (auto: no Deployment yet): only ``PluginsSynced=Unknown``, because the
  operator creates the Deployment after the RolloutManager and writing first would
  start a fight with it.

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
from kubekit.rest import APPLY_PATCH, JSON_PATCH, MERGE_PATCH, is_not_found, status_of
from reconciler.conditions import set_condition
from reconciler.payloads import ConditionStatus
from reconciler.plugin_audit import (
    FLAG_MODES,
    REASONS,
    Finding,
    Mode,
    audited_manager,
    compare_with_operator,
    namespace_mode,
    new_findings,
)
from reconciler.plugin_digests import (
    DigestVerifier,
    DownloadLimits,
    PluginDigest,
    https_fetcher,
    preflight,
    problems,
)
from reconciler.plugin_metrics import PluginMetrics
from reconciler.plugins import (
    CONFIG_MAP_NAME,
    MANAGED_KEYS,
    METRIC_KEY,
    TRAFFIC_KEY,
    InvalidPluginSpec,
    checksum,
    keys_owned_by,
    managed_values,
    parse_entries,
    render_plugin_config,
    unlisted_entries,
)
from reconciler.runtime.status import write_status
from reconciler.runtime.types import Cache, Client, Context, Key, Requeue, Watch, object_key
from schemas.constants import ANNOTATION_PLUGINS_CHECKSUM
from schemas.objects import Obj, as_dict, as_list, meta_of
from schemas.plugins import manager_age_key

log = logging.getLogger("reconciler.rollout_plugins")

FIELD_MANAGER = "rollgate"
CONDITION = "PluginsSynced"
DEFAULT_DEPLOYMENT = "argo-rollouts"
# The checksum of "no plugins": a Deployment without the annotation has loaded none,
# so it must not be restarted just to record that nothing is configured.
EMPTY_CHECKSUM = checksum({})
# A failed download is retried this much later (the server may be back); a mismatch
# waits for a spec change or the periodic resync.
DOWNLOAD_RETRY_SECONDS = 60.0


# --- pure helpers ------------------------------------------------------------------------


def is_deleting(obj: Mapping[str, Any]) -> bool:
    return bool(meta_of(obj).get("deletionTimestamp"))


def owner_of(rollout_managers: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The RolloutManager that owns the namespace's plugin keys: the oldest one.

    ``schemas.plugins.manager_age_key`` orders them (the webhook's "second RolloutManager"
    warning uses the same key, so it names this owner). RolloutManagers being deleted are
    out of the running, so ownership moves on at once.
    """
    live = [rm for rm in rollout_managers if not is_deleting(rm)]
    if not live:
        return None
    return min(live, key=manager_age_key)


def pod_template_checksum(deployment: Mapping[str, Any] | None) -> str:
    annotations = (
        ((deployment or {}).get("spec") or {}).get("template", {}).get("metadata") or {}
    ).get("annotations") or {}
    return annotations.get(ANNOTATION_PLUGINS_CHECKSUM) or EMPTY_CHECKSUM


def in_sync(config_map: Mapping[str, Any] | None, data: Mapping[str, str]) -> bool:
    """True when the ConfigMap already holds exactly ``data`` in the managed keys.

    Ownership counts too: a key with the right value that rollgate does not own would
    survive a later apply that drops it, so taking it over is still a pending write.
    No ConfigMap and nothing to write is in sync (no empty ConfigMap gets created).
    """
    if config_map is None:
        return not data
    return managed_values(config_map) == dict(data) and set(data) <= keys_owned_by(
        config_map, FIELD_MANAGER
    )


def apply_body(namespace: str, data: Mapping[str, str]) -> dict[str, Any]:
    """The server-side apply configuration: identity plus only the keys rollgate owns."""
    body: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP_NAME, "namespace": namespace},
    }
    if data:
        body["data"] = dict(data)
    return body


def removal_patch(config_map: Mapping[str, Any], keys: Iterable[str]) -> list[dict[str, Any]]:
    """JSON patch removing ``keys``, guarded by a test of the value rollgate decided on.

    Needed when another manager co-owns a key that the spec no longer lists: apply only
    gives up rollgate's claim, and RolloutManager is the source of truth for these keys.
    """
    data = config_map.get("data") or {}
    ops: list[dict[str, Any]] = []
    for key in keys:
        if key in data:
            ops.append({"op": "test", "path": f"/data/{key}", "value": data[key]})
            ops.append({"op": "remove", "path": f"/data/{key}"})
    return ops


def describe(data: Mapping[str, str]) -> str:
    """Human summary of rendered data, e.g. "1 traffic router plugin, 2 metric plugins"."""

    def count(key: str, noun: str) -> str:
        n = len(parse_entries(data.get(key)) or [])
        return f"{n} {noun} plugin{'s' if n != 1 else ''}"

    return f"{count(TRAFFIC_KEY, 'traffic router')}, {count(METRIC_KEY, 'metric')}"


def namespace_terminating(exc: ApiException) -> bool:
    """A 403 because the namespace is being deleted (cause ``NamespaceTerminating``)."""
    if exc.status != 403:
        return False
    causes = as_list(as_dict(status_of(exc).get("details")).get("causes"))
    return any(c.get("reason") == "NamespaceTerminating" for c in causes if isinstance(c, dict))


def with_kind(obj: Mapping[str, Any], resource: Resource) -> dict[str, Any]:
    """Objects from list responses lack apiVersion/kind; events need them."""
    return {"apiVersion": resource.api_version, "kind": resource.kind, **obj}


# --- controller ------------------------------------------------------------------------


class RolloutPluginsController:
    """Keeps ``argo-rollouts-config`` and the Argo Rollouts Deployment in line with RMs.

    Only the ConfigMap and the Deployment it manages are watched (field selectors on
    their names), so the cache holds two objects per namespace instead of every
    ConfigMap and Deployment of the cluster, and RBAC can name them (resourceNames).
    """

    name = "rollout-plugins"
    primary = ROLLOUT_MANAGER

    def __init__(
        self,
        options: Mapping[str, Any] | None = None,
        *,
        verifier: DigestVerifier | None = None,
        metrics: PluginMetrics | None = None,
    ) -> None:
        """Take the Deployment name, the mode and the download settings from the flags.

        The Deployment's name narrows its watch (so RBAC can name it too), which is why
        the watches are fixed here, from the flags.
        """
        options = options or {}
        mode = str(options.get("plugins_mode") or "auto")
        if mode not in FLAG_MODES:
            raise ValueError(f"--plugins-mode must be one of {', '.join(FLAG_MODES)}, not {mode!r}")
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self.metrics = metrics or PluginMetrics()
        self._registries: set[int] = set()  # registries that serve self.metrics
        # Audit mode, per namespace: (RolloutManager uid, generation) and what was
        # reported for it / the pre-flight results for it. Memory only; a new process
        # reports each finding once more.
        self._reported: dict[str, tuple[tuple[str, Any], frozenset[tuple[str, str]]]] = {}
        self._audit_digests: dict[str, tuple[tuple[str, Any], list[PluginDigest]]] = {}
        self.deployment_name = str(options.get("rollouts_deployment") or DEFAULT_DEPLOYMENT)
        self.config_maps = CONFIG_MAP.named(CONFIG_MAP_NAME)
        self.deployments = DEPLOYMENT.named(self.deployment_name)
        self.watches: tuple[Watch, ...] = (
            Watch(ROLLOUT_MANAGER, self._rollout_manager_keys),
            Watch(self.config_maps, self._config_map_keys),
            Watch(self.deployments, self._deployment_keys),
        )
        defaults = DownloadLimits()
        limits = DownloadLimits(
            max_bytes=int(options.get("plugins_max_download_bytes") or defaults.max_bytes),
            timeout=float(options.get("plugins_download_timeout") or defaults.timeout),
        )
        if verifier is None:
            verifier = DigestVerifier(https_fetcher(
                ca_file=options.get("plugins_ca_file") or None,
                limits=limits,
                allow_http=bool(options.get("allow_http_plugins")),
            ))
        self.verifier = verifier

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
        owner = owner_of(cache.list(ROLLOUT_MANAGER, namespace))
        if owner is not None:
            return [object_key(owner)]
        if keys_owned_by(cm, FIELD_MANAGER):
            # No RolloutManager left but rollgate still owns keys here: any key of the
            # namespace makes reconcile release them.
            return [Key(namespace, CONFIG_MAP_NAME)]
        return []

    def _deployment_keys(self, old: Obj | None, deployment: Obj, cache: Cache) -> list[Key]:
        if meta_of(deployment).get("name") != self.deployment_name:
            return []
        owner = owner_of(cache.list(ROLLOUT_MANAGER, meta_of(deployment).get("namespace") or ""))
        return [object_key(owner)] if owner is not None else []

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
                and keys_owned_by(cm, FIELD_MANAGER)
                and owner_of(cache.list(ROLLOUT_MANAGER, namespace)) is None
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
        self._serve_metrics(ctx)
        with self._lock_for(key.namespace):
            try:
                self._reconcile(key, ctx, ctx.client)
            except ApiException as exc:
                if not namespace_terminating(exc):
                    raise
                # The namespace is going away with everything in it; retrying a write
                # there only fills the log until the RolloutManager's delete arrives.
                log.debug("namespace terminating, nothing to do", extra={"key": str(key)})

    def _serve_metrics(self, ctx: Context) -> None:
        """Add this controller's metrics to the runtime's registry (once), so they are
        on the same /metrics."""
        registry = getattr(ctx.metrics, "registry", None)
        if registry is None or id(registry) in self._registries:
            return
        with self._locks_guard:
            if id(registry) not in self._registries:
                for collector in self.metrics.collectors:
                    registry.register(collector)
                self._registries.add(id(registry))

    def _lock_for(self, namespace: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(namespace, threading.Lock())

    def _mode(self, namespace: str, ctx: Context) -> tuple[Mode, Obj | None]:
        deployment = ctx.cache.get(self.deployments, namespace, self.deployment_name)
        flag = str(ctx.options.get("plugins_mode") or "auto")
        return namespace_mode(flag, deployment), deployment

    def _reconcile(self, key: Key, ctx: Context, rest: Client) -> None:
        rms = ctx.cache.list(ROLLOUT_MANAGER, key.namespace)
        owner = owner_of(rms)
        mode, deployment = self._mode(key.namespace, ctx)
        if owner is None:
            self._forget(key.namespace)
            if mode != "audit":
                self._release(key.namespace, ctx, rest)
            return
        self.metrics.set_mode(key.namespace, mode)
        owner = with_kind(owner, ROLLOUT_MANAGER)
        if mode == "audit":
            self._audit(key.namespace, rms, deployment, owner, ctx)
            return
        self._forget_audit(key.namespace)
        owner_name = meta_of(owner).get("name")
        rm = ctx.cache.get(ROLLOUT_MANAGER, key.namespace, key.name)
        if rm is not None and not is_deleting(rm) and key.name != owner_name:
            self._set_condition(
                with_kind(rm, ROLLOUT_MANAGER), ctx, rest,
                status="False",
                reason="NotOwner",
                message=(
                    f'RolloutManager "{owner_name}" is the oldest in namespace '
                    f'"{key.namespace}" and owns the plugin configuration; the plugins of '
                    "this one are not synced"
                ),
                event_type="Warning",
            )
            return
        if mode == "waiting":
            self._set_condition(
                owner, ctx, rest,
                status="Unknown",
                reason="WaitingForDeployment",
                message=(
                    f'Deployment "{self.deployment_name}" does not exist in namespace '
                    f'"{key.namespace}" yet; nothing is written until it does. If '
                    "argo-rollouts-manager creates it (controlled by a RolloutManager), "
                    "rollgate only audits the plugins there and writes nothing, this "
                    "condition included; otherwise it syncs them"
                ),
            )
            return
        self._sync(owner, ctx, rest)

    def _forget_audit(self, namespace: str) -> None:
        self._reported.pop(namespace, None)
        self._audit_digests.pop(namespace, None)
        self.metrics.set_findings(namespace, ())

    def _forget(self, namespace: str) -> None:
        """No RolloutManager left in the namespace: drop its state and series."""
        self._reported.pop(namespace, None)
        self._audit_digests.pop(namespace, None)
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
        rm = with_kind(audited_manager(rms, deployment, owner) or owner, ROLLOUT_MANAGER)
        allow_http = bool(ctx.options.get("allow_http_plugins"))
        config_map = ctx.cache.get(self.config_maps, namespace, CONFIG_MAP_NAME)
        findings = compare_with_operator(rm, config_map, allow_http_plugins=allow_http)
        digests = self._audit_preflight(namespace, rm, allow_http)
        findings.extend(
            Finding(
                "digest-mismatch" if d.check.outcome == "mismatch" else "download-failed",
                f"{d.path} {d.check.location} {d.check.expected}",
                f"{d.describe()}: Argo Rollouts exits at start when it loads this plugin",
            )
            for d in problems(digests)
        )
        self.metrics.set_findings(namespace, [f.kind for f in findings])
        self._report(namespace, rm, findings, ctx)
        if any(d.check.outcome == "failed" for d in digests):
            raise Requeue(after=DOWNLOAD_RETRY_SECONDS, reason="plugin download failed")

    def _audit_preflight(self, namespace: str, rm: Obj, allow_http: bool) -> list[PluginDigest]:
        """Pre-flight once per generation of the RolloutManager while it passes; again on
        each pass while it does not (the verifier's cache paces the downloads)."""
        meta = meta_of(rm)
        ident = (str(meta.get("uid") or ""), meta.get("generation"))
        last = self._audit_digests.get(namespace)
        if last is not None and last[0] == ident and not problems(last[1]):
            return last[1]
        results = preflight(rm, self.verifier, allow_http=allow_http)
        self.metrics.count_checks(results)
        self._audit_digests[namespace] = (ident, results)
        return results

    def _report(self, namespace: str, rm: Obj, findings: list[Finding], ctx: Context) -> None:
        """A Warning event for each finding not reported for this generation yet."""
        meta = meta_of(rm)
        ident = (str(meta.get("uid") or ""), meta.get("generation"))
        last = self._reported.get(namespace)
        reported = last[1] if last is not None and last[0] == ident else None
        fresh = new_findings(findings, reported)
        for finding in fresh:
            ctx.events.emit(rm, type="Warning", reason=REASONS[finding.kind],
                            message=finding.message)
        if fresh:
            log.info(
                "plugins audit: differences from argo-rollouts-manager's rendering",
                extra={"namespace": namespace, "findings": [f.kind for f in findings]},
            )
        self._reported[namespace] = (ident, frozenset(f.key for f in findings))

    # -- sync -------------------------------------------------------------------------

    def _sync(self, rm: Obj, ctx: Context, rest: Client) -> None:
        namespace = meta_of(rm).get("namespace") or ""
        allow_http = bool(ctx.options.get("allow_http_plugins"))
        try:
            data, digest = render_plugin_config(rm, allow_http_plugins=allow_http)
        except InvalidPluginSpec as err:
            self._set_condition(
                rm, ctx, rest,
                status="False",
                reason="InvalidSpec",
                message=(
                    f"spec.plugins is invalid; ConfigMap {CONFIG_MAP_NAME} was not changed: "
                    + "; ".join(str(f) for f in err.findings)
                ),
                event_type="Warning",
            )
            return

        if self._write_pending(namespace, data, digest, ctx):
            # Only before a write: an unchanged plugin set restarts nothing, so there
            # is nothing to prove (and a restarted reconciler downloads nothing).
            checked = preflight(rm, self.verifier, allow_http=allow_http)
            self.metrics.count_checks(checked)
            if problems(checked):
                self._refuse(rm, problems(checked), ctx, rest)
                return
        self._write_config_map(rm, namespace, data, ctx, rest)
        rollout_note = self._restart_rollouts(rm, namespace, digest, ctx, rest)
        self._set_condition(
            rm, ctx, rest,
            status="True",
            reason="Synced",
            message=(
                f"ConfigMap {CONFIG_MAP_NAME} holds {describe(data)} "
                f"(checksum {digest[:12]}); {rollout_note}"
            ),
        )

    def _write_pending(
        self, namespace: str, data: dict[str, str], digest: str, ctx: Context
    ) -> bool:
        """Whether this pass would write the ConfigMap or roll the Deployment."""
        if not in_sync(ctx.cache.get(self.config_maps, namespace, CONFIG_MAP_NAME), data):
            return True
        deployment = ctx.cache.get(self.deployments, namespace, self.deployment_name)
        return deployment is not None and pod_template_checksum(deployment) != digest

    def _refuse(self, rm: Obj, bad: list[PluginDigest], ctx: Context, rest: Client) -> None:
        """A digest could not be proven: write nothing but the condition saying why."""
        mismatch = any(d.check.outcome == "mismatch" for d in bad)
        self._set_condition(
            rm, ctx, rest,
            status="False",
            reason="DigestMismatch" if mismatch else "DownloadFailed",
            message=(
                "; ".join(d.describe() for d in bad)
                + f". ConfigMap {CONFIG_MAP_NAME} and Deployment \"{self.deployment_name}\" "
                "were left as they were: Argo Rollouts exits at start when a plugin's "
                "digest does not match"
            ),
            event_type="Warning",
        )
        if not mismatch:
            raise Requeue(after=DOWNLOAD_RETRY_SECONDS, reason="plugin download failed")

    def _write_config_map(
        self, rm: Obj, namespace: str, data: dict[str, str], ctx: Context, rest: Client
    ) -> None:
        if in_sync(ctx.cache.get(self.config_maps, namespace, CONFIG_MAP_NAME), data):
            return
        live = rest.get(CONFIG_MAP, namespace, CONFIG_MAP_NAME)
        if in_sync(live, data):
            return  # the cache was behind
        # Entries rollgate did not write itself are someone's hand-made configuration;
        # entries in keys rollgate owns were its own (a plugin removed from the spec).
        foreign = [k for k in MANAGED_KEYS if k not in keys_owned_by(live, FIELD_MANAGER)]
        dropped = unlisted_entries(managed_values(live), data, keys=foreign)
        result = rest.patch(
            CONFIG_MAP, namespace, CONFIG_MAP_NAME, apply_body(namespace, data),
            content_type=APPLY_PATCH, field_manager=FIELD_MANAGER, force=True,
        )
        leftover = [k for k in MANAGED_KEYS if k not in data and k in managed_values(result)]
        if leftover:
            rest.patch(
                CONFIG_MAP, namespace, CONFIG_MAP_NAME, removal_patch(result, leftover),
                content_type=JSON_PATCH, field_manager=FIELD_MANAGER,
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
            message=f"ConfigMap {CONFIG_MAP_NAME} updated: {describe(data)}",
        )

    def _restart_rollouts(
        self, rm: Obj, namespace: str, digest: str, ctx: Context, rest: Client
    ) -> str:
        """Roll the Argo Rollouts Deployment when the rendered content changed.

        Returns the part of the condition message about the Deployment.
        """
        name = self.deployment_name
        not_found = (
            f'Deployment "{name}" not found in namespace "{namespace}": '
            "the plugins will load when it starts"
        )
        # The same words whether this pass rolled it or an earlier one did: a condition
        # message that changes on the pass after a rollout is a status write for nothing
        # (the RolloutsRestarted event tells when it rolled).
        loaded = f'Deployment "{name}" has this plugin configuration in its pod template'
        cached = ctx.cache.get(self.deployments, namespace, name)
        if cached is None:
            return not_found
        if pod_template_checksum(cached) == digest:
            return loaded
        live = rest.get(DEPLOYMENT, namespace, name)
        if live is None:
            return not_found
        if pod_template_checksum(live) != digest:
            self._patch_checksum(namespace, digest, rest)
            ctx.events.emit(
                rm, type="Normal", reason="RolloutsRestarted",
                message=(
                    f'plugin configuration changed: rolling restart of Deployment "{name}" '
                    f"(checksum {digest[:12]})"
                ),
            )
        return loaded

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
        if not keys_owned_by(ctx.cache.get(self.config_maps, namespace, CONFIG_MAP_NAME),
                             FIELD_MANAGER):
            return
        live = rest.get(CONFIG_MAP, namespace, CONFIG_MAP_NAME)
        owned = [k for k in MANAGED_KEYS if k in keys_owned_by(live, FIELD_MANAGER)]
        ops = removal_patch(live, owned) if live is not None else []
        if not ops:
            return  # the cache was behind: nothing of rollgate's is left
        try:
            # A JSON patch never creates, so a ConfigMap deleted meanwhile stays deleted;
            # a value changed since the read fails the test and is re-read on retry.
            result = rest.patch(
                CONFIG_MAP, namespace, CONFIG_MAP_NAME, ops,
                content_type=JSON_PATCH, field_manager=FIELD_MANAGER,
            )
        except ApiException as exc:
            if is_not_found(exc):
                return
            raise
        left = managed_values(result)
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

    def _annotate_deployment(self, namespace: str, digest: str, rest: Client) -> None:
        deployment = rest.get(DEPLOYMENT, namespace, self.deployment_name)
        if deployment is None or pod_template_checksum(deployment) == digest:
            return
        self._patch_checksum(namespace, digest, rest)

    def _patch_checksum(self, namespace: str, digest: str, rest: Client) -> None:
        """Set the Deployment's pod-template checksum annotation (a rolling restart).

        A merge patch of one pod-template annotation: the Deployment's own rolling
        update strategy replaces pods one at a time; nothing else is touched.
        """
        patch = {
            "spec": {"template": {"metadata": {"annotations": {
                ANNOTATION_PLUGINS_CHECKSUM: digest,
            }}}}
        }
        rest.patch(
            DEPLOYMENT, namespace, self.deployment_name, patch,
            content_type=MERGE_PATCH, field_manager=FIELD_MANAGER,
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
        meta = meta_of(rm)
        current = list((rm.get("status") or {}).get("conditions") or [])
        updated = set_condition(
            current,
            type=CONDITION,
            status=status,
            reason=reason,
            message=message,
            observed_generation=meta.get("generation"),
            now=datetime.now(UTC),
        )
        if updated == current:
            return
        written = write_status(rest, ctx.cache, ROLLOUT_MANAGER, rm, {"conditions": updated})
        if written is not None and event_type:
            ctx.events.emit(rm, type=event_type, reason=reason, message=message)
