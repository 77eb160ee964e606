"""Object builders for the tests and benchmarks: the shapes of the upstream projects at
the versions docs/development.md "Target versions" pins, stated apart from the code under test.

A webhook's JSON Patch is applied with the product's applier in its strict mode
(``schemas.pointer.apply_patch(..., strict=True)``), which refuses an op that does not
apply as the API server does.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from reconciler.verification.naming import freight_collection_id
from reconciler.verification.shards import LABEL_SHARD
from schemas.kinds import API_VERSION_KARGO, KINDS

# The apiVersion of each kind the tests build: the product's table of kinds, and Kargo's
# kinds the product never reads but tests make (a Project, its Warehouse, a Promotion).
API_VERSIONS = {kind: f"{k.group}/{k.version}" if k.group else k.version
                for kind, k in KINDS.items()}
API_VERSIONS |= dict.fromkeys(("Project", "Warehouse", "Promotion"), API_VERSION_KARGO)


def fresh_name() -> str:
    """A namespace (or Project) name no test has used: ``t-`` and 10 hex digits."""
    return f"t-{uuid.uuid4().hex[:10]}"


def k8s_object(
    kind: str,
    *,
    name: str,
    namespace: str | None = None,
    spec: dict[str, Any] | None = None,
    **metadata: Any,
) -> dict[str, Any]:
    """A fresh ``kind`` object as the API server holds it; ``namespace=None`` for a
    cluster-scoped one, ``metadata`` for further fields such as ``uid``."""
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    meta.update(metadata)
    return {
        "apiVersion": API_VERSIONS[kind],
        "kind": kind,
        "metadata": meta,
        "spec": spec if spec is not None else {},
    }


# --------------------------------------------------------------------------- Kargo

# A template reference: "name" is an AnalysisTemplate in the Stage's namespace, ("name",)
# a ClusterAnalysisTemplate.
TemplateRef = str | tuple[str]


def requested_freight(warehouse: str = "guestbook") -> list[dict[str, Any]]:
    """``spec.requestedFreight`` straight from one Warehouse (Kargo v1 requires one)."""
    return [{"origin": {"kind": "Warehouse", "name": warehouse}, "sources": {"direct": True}}]


def verification(*templates: TemplateRef, args: list[dict[str, Any]] | None = None,
                 run_metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """Kargo's ``spec.verification`` referring to ``templates``."""
    stanza: dict[str, Any] = {"analysisTemplates": [
        {"name": t} if isinstance(t, str) else {"name": t[0], "kind": "ClusterAnalysisTemplate"}
        for t in templates]}
    if args is not None:
        stanza["args"] = args
    if run_metadata is not None:
        stanza["analysisRunMetadata"] = run_metadata
    return stanza


def analysis(*templates: TemplateRef, args: list[dict[str, Any]] | None = None,
             run_metadata: dict[str, Any] | None = None) -> dict[str, Any]:
    """The older ``spec.analysis`` spelling (docs/validate.md "Migrating from spec.analysis")."""
    stanza: dict[str, Any] = {"templates": [
        {"templateName": t, "clusterScope": False} if isinstance(t, str)
        else {"templateName": t[0], "clusterScope": True} for t in templates]}
    if args is not None:
        stanza["args"] = args
    if run_metadata is not None:
        stanza["analysisRunMetadata"] = run_metadata
    return stanza


def stage(name: str = "prod", *, namespace: str | None = None,
          verification: dict[str, Any] | None = None, freight: bool = True,
          warehouse: str = "guestbook", spec: dict[str, Any] | None = None,
          status: dict[str, Any] | None = None, **metadata: Any) -> dict[str, Any]:
    """A Kargo v1 Stage: ``requestedFreight`` from ``warehouse`` unless ``freight=False``,
    ``verification`` if given; ``spec`` entries are added last (and replace those)."""
    body: dict[str, Any] = {"requestedFreight": requested_freight(warehouse)} if freight else {}
    if verification is not None:
        body["verification"] = verification
    body.update(spec or {})
    obj = k8s_object("Stage", name=name, namespace=namespace, spec=body, **metadata)
    if status is not None:
        obj["status"] = status
    return obj


def freight_collection(*names: str, warehouses: Sequence[str] | None = None,
                       history: list[dict[str, Any]] | None = None,
                       collection: str | None = None) -> dict[str, Any]:
    """A ``status.freightHistory`` entry as Kargo writes it, holding Freight ``names``,
    one per Warehouse (``warehouses``; by default ``w`` for one, ``w0``, ``w1``... for
    more); ``history`` its verificationHistory; ``collection`` an id other than Kargo's
    (``reconciler.verification.naming.freight_collection_id``)."""
    if warehouses is None:
        warehouses = ["w"] if len(names) == 1 else [f"w{i}" for i in range(len(names))]
    out: dict[str, Any] = {
        "id": collection or freight_collection_id(names),
        "items": {f"Warehouse/{w}": {"name": n, "origin": {"kind": "Warehouse", "name": w}}
                  for w, n in zip(warehouses, names, strict=True)},
    }
    if history is not None:
        out["verificationHistory"] = history
    return out


def freight(name: str, *, namespace: str | None = None, warehouse: str = "guestbook",
            alias: str | None = None, images: list[dict[str, str]] | None = None,
            commits: list[dict[str, str]] | None = None,
            **metadata: Any) -> dict[str, Any]:
    """A Freight from ``warehouse`` (its fields sit beside ``metadata``: no ``spec``)."""
    obj = k8s_object("Freight", name=name, namespace=namespace, **metadata)
    del obj["spec"]
    if alias is not None:
        obj["alias"] = alias
    obj["origin"] = {"kind": "Warehouse", "name": warehouse}
    if images is not None:
        obj["images"] = images
    if commits is not None:
        obj["commits"] = commits
    return obj


def project(name: str) -> dict[str, Any]:
    """A Kargo Project (cluster-scoped; Kargo makes its namespace). Kargo v1.11 keeps
    a Project's settings in ProjectConfig, so it has no ``spec``."""
    obj = k8s_object("Project", name=name)
    del obj["spec"]
    return obj


def warehouse(name: str = "w", *, namespace: str | None = None,
              repo: str = "registry.invalid/shop/web") -> dict[str, Any]:
    """A Warehouse subscribed to one image repository (never polled: the tests write
    their Freight themselves)."""
    return k8s_object("Warehouse", name=name, namespace=namespace,
                      spec={"subscriptions": [{"image": {"repoURL": repo}}]})


def promotion(name: str, *, stage: str, freight: str, namespace: str | None = None,
              owner: Mapping[str, Any] | None = None,
              steps: list[dict[str, Any]] | None = None, **metadata: Any) -> dict[str, Any]:
    """A Promotion of ``freight`` into ``stage``. With ``owner`` (the Stage object) and
    ``steps`` it is whole, as Kargo's webhook completes one (the Stage its controller
    owner, its shard label copied); without, it is a user's minimal one (``name`` ""
    with ``generateName`` in ``metadata``: Kargo's webhook names it)."""
    spec: dict[str, Any] = {"stage": stage, "freight": freight}
    if steps is not None:
        spec["steps"] = steps
    if owner is not None:
        shard = (owner["metadata"].get("labels") or {}).get(LABEL_SHARD)
        if shard:
            metadata["labels"] = {LABEL_SHARD: shard, **metadata.get("labels", {})}
        metadata["ownerReferences"] = [{
            "apiVersion": API_VERSION_KARGO, "kind": "Stage", "name": stage,
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}]
    obj = k8s_object("Promotion", name=name, namespace=namespace, spec=spec, **metadata)
    if not name:
        del obj["metadata"]["name"]
    return obj


# --------------------------------------------------------------------------- Argo Rollouts


def analysis_template(name: str, *, namespace: str | None = None, cluster: bool = False,
                      metrics: list[dict[str, Any]] | None = None,
                      **spec: Any) -> dict[str, Any]:
    """An AnalysisTemplate (a ClusterAnalysisTemplate with ``cluster``, no namespace)."""
    kind = "ClusterAnalysisTemplate" if cluster else "AnalysisTemplate"
    return k8s_object(kind, name=name, namespace=None if cluster else namespace,
                      spec={"metrics": metrics or [], **spec})


def analysis_run(name: str, *, namespace: str | None = None,
                 metrics: list[dict[str, Any]] | None = None,
                 spec: dict[str, Any] | None = None,
                 status: dict[str, Any] | None = None, **metadata: Any) -> dict[str, Any]:
    """An AnalysisRun measuring ``metrics``; ``spec`` entries are added last (and replace
    those)."""
    obj = k8s_object("AnalysisRun", name=name, namespace=namespace,
                     spec={"metrics": metrics or [], **(spec or {})}, **metadata)
    if status is not None:
        obj["status"] = status
    return obj


def rollout_manager(name: str = "argo-rollouts", *, namespace: str | None = None,
                    metric: list[Any] | None = None, traffic: list[Any] | None = None,
                    plugins: Any = None, spec: dict[str, Any] | None = None,
                    **metadata: Any) -> dict[str, Any]:
    """A RolloutManager; ``spec.plugins`` from ``plugins`` as given, else the lists
    given (``metric``, ``trafficManagement``); ``spec`` entries are added last (and
    replace those: ``spec={"plugins": None}``, say)."""
    if plugins is None:
        plugins = {}
        if traffic is not None:
            plugins["trafficManagement"] = traffic
        if metric is not None:
            plugins["metric"] = metric
    return k8s_object("RolloutManager", name=name, namespace=namespace,
                      spec={"plugins": plugins, **(spec or {})}, **metadata)


# --------------------------------------------------------------------------- core


def config_map(name: str, *, namespace: str | None = None,
               data: dict[str, str] | None = None, **metadata: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, **metadata}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data or {}}


def deployment(name: str = "argo-rollouts", *, namespace: str | None = None,
               image: str = "example.invalid/x", replicas: int = 1,
               **metadata: Any) -> dict[str, Any]:
    """A Deployment of one container, selected by ``app: <name>``."""
    labels = {"app": name}
    return k8s_object("Deployment", name=name, namespace=namespace, spec={
        "replicas": replicas,
        "selector": {"matchLabels": labels},
        "template": {"metadata": {"labels": labels},
                     "spec": {"containers": [{"name": "c", "image": image}]}}}, **metadata)
