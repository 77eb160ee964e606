"""The real Kargo next to rollgate: a Project namespace, its Warehouse, Freight, Stages
and Promotions as a user creates them with ``kubectl``; the real Kargo controller
promotes and verifies, the real Argo Rollouts controller runs the AnalysisRuns.

With Kargo's webhooks (``running_kargo(..., webhooks=True)``), as Kargo's chart registers
them, they gate every namespace: a Stage, Freight, Promotion or Warehouse is admitted only
in a Project's namespace, so tests make those with Kargo ``Project`` objects
(``kargo_project``, ``fresh_project``), and delete them before Kargo stops.

Promotions are written whole (name ``<stage>.<ulid>.<freight[:7]>``, the Stage's steps,
a controller ownerReference to the Stage), which is what Kargo's own mutating webhook
fills in, so they work with and without Kargo's webhooks registered.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import ssl
import threading
import time
import urllib.request
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from harness.kits.plane import namespaces_left
from harness.kits.verification import Cluster
from harness.plane import ControlPlane
from harness.process import ManagedProcess
from harness.upstream import kargo
from reconciler.verification.shards import LABEL_SHARD
from schemas.kinds import GROUP_KARGO, VERSION_KARGO
from testkit import objects
from testkit.net import send_json
from testkit.waits import wait_for

# Kargo's steps that need no Argo CD (an `argocd-update` step fails with Argo CD
# integration off).
STEPS = [{"uses": "compose-output", "as": "out", "config": {"done": "yes"}}]
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


@contextmanager
def running_kargo(plane: ControlPlane, *, name: str = "kargo-controller",
                  webhooks: bool = False) -> Iterator[ManagedProcess]:
    """The real Kargo controller; with ``webhooks``, also Kargo's own admission webhooks
    and its management controller, as Kargo's chart runs them by default and ``make dev``
    does. All stopped afterwards, once every Project is gone and no namespace is still
    being deleted (a deleted namespace's Stages wait for Kargo to remove its finalizer:
    a Kargo stopped first would leave them, and their namespace, Terminating for good).
    A missing Kargo tree raises ``UpstreamMissing``, whose message says how to get it:
    the test fails (these tests never skip)."""
    server = management = controller = None
    try:
        if webhooks:
            server = kargo.start_webhooks(plane)
            management = kargo.start_management_controller(plane)
        controller = kargo.start_controller(plane, name=name)
        yield controller
    finally:
        try:
            if management is not None:
                kargo.delete_projects(plane)
            namespaces_left(plane)  # what stays is reported by the session's check
        finally:
            for proc in (controller, management):
                if proc is not None:
                    plane.stop_process(proc)
            if server is not None:
                kargo.stop_webhooks(plane, server)


@contextmanager
def fresh_project(plane: ControlPlane) -> Iterator[str]:
    """A new Kargo Project as a user creates one, where Kargo's webhooks and management
    controller run (``running_kargo(..., webhooks=True)``): its namespace's name, once
    Kargo made the namespace and says the Project is Ready. Deleted afterwards as a user
    deletes one, and waited for until its namespace is gone."""
    name = objects.fresh_name()
    try:
        yield kargo.create_project(plane, name)
    finally:
        kargo.delete_project(plane, name)


@contextmanager
def kargo_project(plane: ControlPlane) -> Iterator[KargoProject]:
    """``fresh_project`` with a Warehouse ``w``: the Kargo Project a test of living next to
    Kargo's webhooks works in."""
    with fresh_project(plane) as name:
        yield KargoProject(plane, name)


def ulid() -> str:
    """A ULID (48-bit milliseconds, 80 random bits, Crockford base32): Kargo sorts
    Promotions by the one in their names."""
    value = (int(time.time() * 1000) << 80) | secrets.randbits(80)
    return "".join(_CROCKFORD[(value >> (5 * i)) & 31] for i in reversed(range(26)))


def metric(proc: ManagedProcess, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` with ``labels`` on a process's /metrics."""
    text = urllib.request.urlopen(proc.url + "/metrics", timeout=5).read().decode()
    return sample_sum(text, name, **labels)


def sample_sum(exposition: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` with ``labels`` in a /metrics text."""
    return sum(float(line.rsplit(" ", 1)[1]) for line in exposition.splitlines()
               if line.startswith(name + ("{" if labels else ""))
               and all(f'{k}="{v}"' in line for k, v in labels.items()))


def writers(obj: dict[str, Any]) -> set[str]:
    """The field managers that have written ``obj``."""
    return {m.get("manager", "") for m in obj.get("metadata", {}).get("managedFields") or []}


# The field manager of rollgate's reconciler: the official client's user agent.
ROLLGATE_MANAGERS = ("OpenAPI-Generator", "rollgate")


class KargoProject(Cluster):
    """One Kargo Project namespace on the plane, with a Warehouse ``w``: made by
    ``kargo_project`` where Kargo's webhooks run, by ``labelled`` where they do not."""

    def __init__(self, plane: ControlPlane, namespace: str) -> None:
        """``namespace``: a Project's namespace already."""
        super().__init__(plane, namespace)
        self.apply(objects.warehouse("w"))
        self.freight_names: dict[str, str] = {}

    @classmethod
    def labelled(cls, plane: ControlPlane, namespace: str) -> KargoProject:
        """Namespace ``namespace`` as a Project's where Kargo's webhooks are not
        registered (``running_kargo`` without ``webhooks``): labelled as Kargo labels
        one, since nothing there would turn a Project object into a namespace
        (``harness.upstream.kargo.label_as_project``)."""
        kargo.label_as_project(plane, namespace)
        return cls(plane, namespace)

    def freight(self, *aliases: str, warehouse: str = "w") -> None:
        """Freight by alias; with Kargo's webhook the name becomes Kargo's id."""
        for alias in aliases:
            obj = objects.freight(
                f"f-{alias}", namespace=self.ns, alias=alias, warehouse=warehouse,
                images=[{"repoURL": "registry.invalid/shop/web", "tag": alias,
                         "digest": "sha256:" + os.urandom(32).hex()}])
            out = self.kubectl("create", "-o", "json", "-f", "-", input=json.dumps(obj))
            self.freight_names[alias] = json.loads(out.stdout)["metadata"]["name"]

    def stage(self, name: str, *, verdict: str = "pass", templates: tuple[str, ...] = (
            "verdict",), labels: dict[str, str] | None = None, shard: str = "") -> None:
        spec: dict[str, Any] = {"promotionTemplate": {"spec": {"steps": STEPS}}}
        metadata: dict[str, Any] = {}
        if shard:
            spec["shard"] = shard
            # Kargo's webhook keeps the label equal to spec.shard; written here too so
            # the Stage is sharded also when that webhook is not registered.
            metadata["labels"] = {LABEL_SHARD: shard}
        self.apply(objects.stage(name, warehouse="w", spec=spec, **metadata,
                                 verification=objects.verification(
                                     *templates, args=[{"name": "verdict", "value": verdict}],
                                     run_metadata={"labels": labels} if labels else None)))

    def promote(self, stage: str, alias: str) -> str:  # type: ignore[override]
        """A Promotion of Freight ``alias`` into ``stage``, as Kargo's CLI and its
        webhook make it; returns its name."""
        freight = self.freight_names[alias]
        owner = self.get("stage", stage) or {}
        name = f"{stage}.{ulid()}.{freight[:7]}".lower()
        # Whole, with the Stage's shard label: a sharded controller caches only the
        # Promotions that carry it.
        self.apply(objects.promotion(name, stage=stage, freight=freight, owner=owner,
                                     steps=STEPS))
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
                for p in self.items("promotions") if p["spec"].get("stage") == stage]

    def promote_and_verify(self, stage: str, alias: str) -> dict[str, Any]:
        """Promote ``alias`` into ``stage``; once Kargo has recorded and verified it, its
        verification entry."""
        self.promote(stage, alias)
        self.wait_promoted(stage, alias)
        self.wait_verified(stage)
        return self.history(stage)[0]

    def wait_verified(self, stage: str, *, timeout: float = 90) -> dict[str, Any]:
        def verified() -> dict[str, Any] | None:
            condition = self.condition(stage)
            return condition if condition.get("status") == "True" else None
        try:
            return wait_for(f"Kargo to set Verified=True on {stage}", verified,
                            timeout=timeout)
        except BaseException:
            print("Stage conditions:", json.dumps(self.condition_list(stage), indent=1))
            print("AnalysisRuns:", json.dumps(self.analysis_runs(), indent=1))
            raise

    def condition_list(self, stage: str) -> list[dict[str, Any]]:
        """Every condition of ``stage`` (for failures)."""
        conditions: list[dict[str, Any]] = ((self.get("stage", stage) or {}).get("status")
                                            or {}).get("conditions") or []
        return conditions

    def analysis_runs(self) -> list[dict[str, Any]]:
        """Name, phase and message of each AnalysisRun of the namespace (for failures)."""
        return [{"name": r["metadata"]["name"], **{k: v for k, v in (r.get("status") or {})
                 .items() if k in ("phase", "message")}} for r in self.items("analysisruns")]

    def rollgate_warnings(self) -> list[dict[str, Any]]:
        return [e for e in self.items("events")
                if e.get("source", {}).get("component") == "rollgate-reconciler"
                or e.get("reportingComponent") == "rollgate-reconciler"]

    def rollgate_writes(self) -> dict[str, set[str]]:
        """Every Stage, Freight and AnalysisRun of the namespace that a rollgate field
        manager has written, with those managers."""
        found = {}
        for kind in ("stages", "freights", "analysisruns"):
            for obj in self.items(kind):
                mine = {w for w in writers(obj) if w.startswith(ROLLGATE_MANAGERS)}
                if mine:
                    found[f"{kind}/{obj['metadata']['name']}"] = mine
        return found


@contextmanager
def slow_stage_status(plane: ControlPlane, namespace: str, *, seconds: float,
                      only: Collection[str] = ()) -> Iterator[list[str]]:
    """Every write of a Stage's status in ``namespace`` (of the Stages named in ``only``,
    when given) held ``seconds`` before the API server stores it, by a validating webhook
    on ``stages/status`` that allows after a pause: what a loaded API server does to
    Kargo's status write. Yields the names of the Stages whose writes were held (dry runs
    pass at once)."""
    held: list[str] = []
    calls: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            request = review["request"]
            calls.append(request["name"])
            if not request.get("dryRun") and (not only or request["name"] in only):
                held.append(request["name"])
                time.sleep(seconds)
            send_json(self, 200, {"apiVersion": "admission.k8s.io/v1",
                                  "kind": "AdmissionReview",
                                  "response": {"uid": request["uid"], "allowed": True}})

        def log_message(self, *args: Any) -> None:
            pass

    work = plane.root / f"slow-status-{namespace}"
    work.mkdir(parents=True, exist_ok=True)
    cert, key = plane.ca.issue(common_name="slow-status", sans=["127.0.0.1"], server=True)
    (work / "tls.crt").write_bytes(cert)
    (work / "tls.key").write_bytes(key)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(work / "tls.crt", work / "tls.key")
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    name = f"slow-status-{namespace}"
    plane.apply_objects([{
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "slow-status.rollgate.test", "admissionReviewVersions": ["v1"],
            "sideEffects": "None", "failurePolicy": "Ignore", "timeoutSeconds": 15,
            "clientConfig": {"url": f"https://127.0.0.1:{server.server_address[1]}/",
                             "caBundle": base64.b64encode(plane.ca.pem).decode()},
            "rules": [{"apiGroups": [GROUP_KARGO], "apiVersions": [VERSION_KARGO],
                       "resources": ["stages/status"], "operations": ["UPDATE"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
        }],
    }])
    probe = objects.stage("slow-status-probe", namespace=namespace, warehouse="w")
    try:
        # The API server calls a new webhook only after a moment: a dry run shows when.
        plane.kubectl("apply", "-f", "-", input=json.dumps(probe))

        def reached() -> bool:
            plane.kubectl("patch", "stage", "slow-status-probe", "-n", namespace,
                          "--subresource=status", "--type=merge", "--dry-run=server",
                          "-p", json.dumps({"status": {"freightSummary": "probe"}}),
                          check=False)
            return "slow-status-probe" in calls

        wait_for("the slow-status webhook to be called", reached, timeout=30)
        plane.kubectl("delete", "stage", "slow-status-probe", "-n", namespace)
        yield held
    finally:
        plane.kubectl("delete", "validatingwebhookconfiguration", name, "--ignore-not-found")
        server.shutdown()
        server.server_close()
