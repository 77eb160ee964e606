"""The real Kargo next to rollgate: a Project namespace, its Warehouse, Freight, Stages
and Promotions as a user creates them with ``kubectl``; the real Kargo controller
promotes and verifies, the real Argo Rollouts controller runs the AnalysisRuns.

Promotions are written whole (name ``<stage>.<ulid>.<freight[:7]>``, the Stage's steps,
a controller ownerReference to the Stage), which is what Kargo's own mutating webhook
fills in, so they work with and without Kargo's webhooks registered.
"""

from __future__ import annotations

import json
import os
import secrets
import time
import urllib.request
from typing import Any

import controlplane
import upstream
from verification_kit import Cluster, wait_for

# Kargo's steps that need no Argo CD (an `argocd-update` step fails with Argo CD
# integration off).
STEPS = [{"uses": "compose-output", "as": "out", "config": {"done": "yes"}}]
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


def ulid() -> str:
    """A ULID (48-bit milliseconds, 80 random bits, Crockford base32): Kargo sorts
    Promotions by the one in their names."""
    value = (int(time.time() * 1000) << 80) | secrets.randbits(80)
    return "".join(_CROCKFORD[(value >> (5 * i)) & 31] for i in reversed(range(26)))


def metric(proc: controlplane.ManagedProcess, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` with ``labels`` on a process's /metrics."""
    text = urllib.request.urlopen(proc.url + "/metrics", timeout=5).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith(name + ("{" if labels else ""))
               and all(f'{k}="{v}"' in line for k, v in labels.items()))


def writers(obj: dict[str, Any]) -> set[str]:
    """The field managers that have written ``obj``."""
    return {m.get("manager", "") for m in obj.get("metadata", {}).get("managedFields") or []}


# The field manager of rollgate's reconciler: the official client's user agent.
ROLLGATE_MANAGERS = ("OpenAPI-Generator", "rollgate")


class KargoProject(Cluster):
    """One Kargo Project namespace on the plane, with a Warehouse ``w``."""

    def __init__(self, plane: controlplane.ControlPlane, namespace: str) -> None:
        super().__init__(plane, namespace)
        plane.project_namespace(namespace)
        self.apply({"apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Warehouse",
                    "metadata": {"name": "w"},
                    "spec": {"subscriptions": [{"image": {
                        "repoURL": "registry.invalid/shop/web"}}]}})
        self.freight_names: dict[str, str] = {}

    def freight(self, *aliases: str, warehouse: str = "w") -> None:
        """Freight by alias; with Kargo's webhook the name becomes Kargo's id."""
        for alias in aliases:
            obj = {"apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Freight",
                   "metadata": {"name": f"f-{alias}", "namespace": self.ns}, "alias": alias,
                   "origin": {"kind": "Warehouse", "name": warehouse},
                   "images": [{"repoURL": "registry.invalid/shop/web", "tag": alias,
                               "digest": "sha256:" + os.urandom(32).hex()}]}
            out = self.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(obj))
            self.freight_names[alias] = json.loads(out.stdout)["metadata"]["name"]

    def stage(self, name: str, *, verdict: str = "pass", templates: tuple[str, ...] = (
            "verdict",), labels: dict[str, str] | None = None, shard: str = "") -> None:
        verification: dict[str, Any] = {
            "analysisTemplates": [{"name": t} for t in templates],
            "args": [{"name": "verdict", "value": verdict}],
        }
        spec: dict[str, Any] = {
            "requestedFreight": [{"origin": {"kind": "Warehouse", "name": "w"},
                                  "sources": {"direct": True}}],
            "promotionTemplate": {"spec": {"steps": STEPS}},
            "verification": verification,
        }
        metadata: dict[str, Any] = {"name": name}
        if shard:
            spec["shard"] = shard
            # Kargo's webhook keeps the label equal to spec.shard; written here too so
            # the Stage is sharded also when that webhook is not registered.
            metadata["labels"] = {upstream.SHARD_LABEL: shard}
        if labels:
            verification["analysisRunMetadata"] = {"labels": labels}
        self.apply({"apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Stage",
                    "metadata": metadata, "spec": spec})

    def promote(self, stage: str, alias: str) -> str:  # type: ignore[override]
        """A Promotion of Freight ``alias`` into ``stage``, as Kargo's CLI and its
        webhook make it; returns its name."""
        freight = self.freight_names[alias]
        owner = self.get("stage", stage) or {}
        name = f"{stage}.{ulid()}.{freight[:7]}".lower()
        # Kargo's webhook gives a Promotion its Stage's shard label; a sharded controller
        # caches only the Promotions that carry it.
        shard = (owner["metadata"].get("labels") or {}).get(upstream.SHARD_LABEL)
        self.apply({
            "apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Promotion",
            "metadata": {"name": name, **({"labels": {upstream.SHARD_LABEL: shard}}
                                          if shard else {}), "ownerReferences": [{
                "apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Stage", "name": stage,
                "uid": owner["metadata"]["uid"], "controller": True,
                "blockOwnerDeletion": True}]},
            "spec": {"stage": stage, "freight": freight, "steps": STEPS},
        })
        return name

    def wait_promoted(self, stage: str, alias: str) -> dict[str, Any]:
        """Until Kargo has recorded the promotion of ``alias``: freightHistory[0] holds it."""
        freight = self.freight_names[alias]

        def check() -> dict[str, Any] | None:
            obj = self.get("stage", stage) or {}
            history = (obj.get("status") or {}).get("freightHistory") or []
            items = (history[0].get("items") or {}).values() if history else []
            return history[0] if any(i.get("name") == freight for i in items) else None

        try:
            return wait_for(f"Kargo to promote {alias} into {stage}", check)
        except BaseException:
            print("Promotions:", json.dumps(self.promotions(stage), indent=1))
            raise

    def promotions(self, stage: str) -> list[dict[str, Any]]:
        """Name, phase and message of each Promotion into ``stage`` (for failures)."""
        return [{"name": p["metadata"]["name"], **{k: v for k, v in (p.get("status") or {})
                 .items() if k in ("phase", "message")}}
                for p in self.list("promotions") if p["spec"].get("stage") == stage]

    def wait_verified(self, stage: str, *, timeout: float = 90) -> dict[str, Any]:
        return wait_for(f"Kargo to set Verified=True on {stage}", lambda: (
            c := self.condition(stage)).get("status") == "True" and c, timeout=timeout)

    def rollgate_warnings(self) -> list[dict[str, Any]]:
        return [e for e in self.list("events")
                if e.get("source", {}).get("component") == "rollgate-reconciler"
                or e.get("reportingComponent") == "rollgate-reconciler"]

    def rollgate_writes(self) -> dict[str, set[str]]:
        """Every Stage, Freight and AnalysisRun of the namespace that a rollgate field
        manager has written, with those managers."""
        found = {}
        for kind in ("stages", "freights", "analysisruns"):
            for obj in self.list(kind):
                mine = {w for w in writers(obj) if w.startswith(ROLLGATE_MANAGERS)}
                if mine:
                    found[f"{kind}/{obj['metadata']['name']}"] = mine
        return found
