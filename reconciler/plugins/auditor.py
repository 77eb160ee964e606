"""Audit mode (auto: argo-rollouts-manager controls the Deployment): next to the operator,
write nothing of its. Neither the ConfigMap nor the Deployment is written, and the
RolloutManager's status only once, to remove a ``PluginsSynced`` condition an earlier
rollgate wrote; differences between the spec and the operator's rendering, and failed
digest pre-flights, become Warning events (each once per generation) and metrics."""

from __future__ import annotations

import logging

from kubekit.kinds import ROLLOUT_MANAGER
from reconciler.runtime.status import write_status
from reconciler.runtime.types import Client, Context, Requeue, object_key
from schemas.objects import Obj

from . import decisions
from .audit import REASONS, AuditMemory, compare_with_operator, digest_findings
from .digests import DigestVerifier, PluginDigest, preflight, problems
from .metrics import PluginMetrics
from .targets import Targets, with_kind

log = logging.getLogger("reconciler.rollout_plugins")


class Auditor:
    """Audit mode for the namespaces the operator renders; remembers per namespace what
    it reported (and proved) for which generation."""

    def __init__(self, *, targets: Targets, verifier: DigestVerifier, metrics: PluginMetrics,
                 allow_http: bool) -> None:
        self.targets = targets
        self.verifier = verifier
        self.metrics = metrics
        self.allow_http = allow_http
        self.memory = AuditMemory()

    def forget(self, namespace: str) -> None:
        self.memory.forget(namespace)

    def run(self, namespace: str, rms: list[Obj], deployment: Obj | None, owner: Obj,
            ctx: Context, rest: Client) -> None:
        """The pass of a namespace the operator renders."""
        self._remove_stale_conditions(rms, ctx, rest)
        self._audit(namespace, rms, deployment, owner, ctx)

    def _audit(self, namespace: str, rms: list[Obj], deployment: Obj | None, owner: Obj,
               ctx: Context) -> None:
        """Compare the operator's rendering with the spec and report what differs.

        Reads the cache only and writes nothing but Events: not the ConfigMap, not the
        Deployment, not the RolloutManager's status (the operator owns all three).
        """
        rm = with_kind(decisions.audited_manager(rms, deployment, owner) or owner, ROLLOUT_MANAGER)
        config_map = self.targets.config_map(ctx.cache, namespace)
        findings = compare_with_operator(rm, config_map, allow_http_plugins=self.allow_http)
        digests = self._preflight(namespace, rm)
        findings.extend(digest_findings(problems(digests)))
        self.metrics.set_findings(namespace, [f.kind for f in findings])
        fresh = self.memory.fresh(namespace, rm, findings)
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

    def _preflight(self, namespace: str, rm: Obj) -> list[PluginDigest]:
        """Pre-flight once per generation of the RolloutManager while it passes; again on
        each pass while it does not (the verifier's cache paces the downloads)."""
        proven = self.memory.proven(namespace, rm)
        if proven is not None:
            return proven
        results = preflight(rm, self.verifier, allow_http=self.allow_http)
        self.metrics.count_checks(results)
        self.memory.remember_digests(namespace, rm, results)
        return results
