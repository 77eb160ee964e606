"""The rollout-plugins controller: ``spec.plugins`` -> ``argo-rollouts-config``; the I/O.

Work is per namespace, because the ConfigMap and the Argo Rollouts Deployment are per
namespace. ``decisions.plan`` says what a pass does there (docs/plugins.md,
"RolloutManager plugins"): this module reads the cache, takes that decision and hands
the namespace to its mode, one module each, as verification splits its engine and its
observer:

- sync (``syncer``; auto: the ``argo-rollouts`` Deployment exists and no RolloutManager
  controls it): the oldest RolloutManager's plugins are written, after their digests
  are proven; the others get a ``PluginsSynced=False`` condition naming the owner;
- audit (``auditor``; auto: argo-rollouts-manager controls the Deployment): nothing of
  the operator's is written; differences become Warning events and metrics;
- waiting (auto: no Deployment yet): nothing at all is written, status included, because
  the operator creates the Deployment after the RolloutManager: a condition written
  before would stay stale next to it forever. The Deployment is watched, so the
  namespace is decided again when it appears;
- release (``releaser``; no RolloutManager left): rollgate's keys are removed.

What they share (the ConfigMap and the Deployment by name, the condition) is in
``targets``. Decisions are made from the cache, and re-made from a fresh GET before any
write, so a stale cache costs one read instead of a duplicate write or a duplicate
Warning event.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable

from kubernetes.client.exceptions import ApiException

from kubekit.kinds import ROLLOUT_MANAGER
from kubekit.rest import namespace_terminating
from reconciler.runtime.types import (
    Cache,
    Client,
    Context,
    Controller,
    Key,
    Watch,
    object_key,
)
from schemas.objects import Obj, meta_of

from . import decisions
from .auditor import Auditor
from .digests import DigestVerifier, https_fetcher
from .metrics import PluginMetrics
from .options import PluginsOptions
from .releaser import release
from .render import CONFIG_MAP_NAME
from .syncer import Syncer
from .targets import Targets, with_kind

log = logging.getLogger("reconciler.rollout_plugins")


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
        self.targets = Targets(options.rollouts_deployment)
        self.deployment_name = options.rollouts_deployment
        self.config_maps = self.targets.config_maps
        self.deployments = self.targets.deployments
        self.watches = (
            Watch(ROLLOUT_MANAGER, self._rollout_manager_keys),
            Watch(self.config_maps, self._config_map_keys),
            Watch(self.deployments, self._deployment_keys),
        )
        verifier = verifier if verifier is not None else _verifier(options)
        self.auditor = Auditor(targets=self.targets, verifier=verifier, metrics=self.metrics,
                               allow_http=options.allow_http)
        self.syncer = Syncer(targets=self.targets, verifier=verifier, metrics=self.metrics,
                             allow_http=options.allow_http)

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
        if decisions.owned_keys(self.targets.config_map(cache, namespace)):
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
        """Decide the namespace's mode and hand it over."""
        namespace = key.namespace
        rms = ctx.cache.list(ROLLOUT_MANAGER, namespace)
        deployment = self.targets.deployment(ctx.cache, namespace)
        keyed = ctx.cache.get(ROLLOUT_MANAGER, namespace, key.name)
        step = decisions.plan(self.options.mode, rms, deployment, keyed)
        if step.owner is None:
            self._forget(namespace)
            if step.action == "release":
                release(self.targets, namespace, ctx, rest)
            return
        self.metrics.set_mode(namespace, step.mode)
        owner = with_kind(step.owner, ROLLOUT_MANAGER)
        if step.action == "audit":
            self.auditor.run(namespace, rms, deployment, owner, ctx, rest)
            return
        self._forget_audit(namespace)
        if step.action == "wait":
            return  # nothing at all until the Deployment exists (its watch brings us back)
        if step.action == "not-owner" and keyed is not None:
            self.syncer.not_owner(keyed, owner, ctx, rest)
            return
        self.syncer.sync(owner, ctx, rest)

    def _forget_audit(self, namespace: str) -> None:
        self.auditor.forget(namespace)
        self.metrics.set_findings(namespace, ())

    def _forget(self, namespace: str) -> None:
        """No RolloutManager left in the namespace: drop its state and series."""
        self.auditor.forget(namespace)
        self.metrics.forget(namespace)
