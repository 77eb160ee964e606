"""Builders for AdmissionReviews and objects used by the HTTP tests and the bench.

Plain functions returning fresh dicts, so a test can change one field without
affecting another test.
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

API_VERSION = "admission.k8s.io/v1"

GVK = {
    "Stage": {"group": "kargo.akuity.io", "version": "v1alpha1", "kind": "Stage"},
    "RolloutManager": {"group": "argoproj.io", "version": "v1alpha1", "kind": "RolloutManager"},
    "Freight": {"group": "kargo.akuity.io", "version": "v1alpha1", "kind": "Freight"},
}
RESOURCE = {"Stage": "stages", "RolloutManager": "rolloutmanagers", "Freight": "freights"}

SHA256 = "4e1243bd22c66e76c2ba9eddc1f91394e57f9f83c5e0e8e1b1a0bcc1b2c3d4e5"


def stage(spec: dict[str, Any] | None = None, *, name: str = "prod",
          namespace: str = "guestbook") -> dict[str, Any]:
    return {
        "apiVersion": "kargo.akuity.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec if spec is not None else {},
    }


def valid_stage(**kwargs: Any) -> dict[str, Any]:
    """A typical Stage: two templates, two args, run metadata; already defaulted."""
    return stage({
        "subscriptions": {"upstreamStages": [{"name": "staging"}]},
        "analysis": {
            "templates": [
                {"templateName": "success-rate", "clusterScope": False},
                {"templateName": "latency", "clusterScope": True},
            ],
            "args": [
                {"name": "service-name", "value": "guestbook-svc.default.svc.cluster.local"},
                {"name": "api-token",
                 "valueFrom": {"secretKeyRef": {"name": "prom", "key": "token"}}},
            ],
            "analysisRunMetadata": {"labels": {"team": "web"},
                                    "annotations": {"example.com/note": "x"}},
        },
    }, **kwargs)


def invalid_stage(**kwargs: Any) -> dict[str, Any]:
    """Two errors: an unquoted number and a duplicate arg name."""
    obj = valid_stage(**kwargs)
    obj["spec"]["analysis"]["args"] = [
        {"name": "port", "value": 8080},
        {"name": "port", "value": "8080"},
    ]
    return obj


def rollout_manager(plugins: dict[str, Any] | None = None, *, name: str = "argo-rollouts",
                    namespace: str = "argo-rollouts") -> dict[str, Any]:
    return {
        "apiVersion": "argoproj.io/v1alpha1",
        "kind": "RolloutManager",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"plugins": plugins} if plugins is not None else {},
    }


def valid_rollout_manager(**kwargs: Any) -> dict[str, Any]:
    return rollout_manager({
        "trafficManagement": [{
            "name": "argoproj-labs/gatewayAPI",
            "location": "https://github.com/argoproj-labs/rollouts-plugin-trafficrouter-gatewayapi"
                        "/releases/download/v0.4.0/gatewayapi-plugin-linux-amd64",
            "sha256": SHA256,
        }],
        "metric": [{"name": "argoproj-labs/sample-prometheus",
                    "location": "file:///plugins/metric-plugin"}],
    }, **kwargs)


def invalid_rollout_manager(**kwargs: Any) -> dict[str, Any]:
    """Three errors: no namespace in the name, http://, a SHA-1-length digest."""
    return rollout_manager({
        "trafficManagement": [{"name": "gatewayAPI", "location": "file:///plugins/gw"}],
        "metric": [{"name": "argoproj-labs/sample-prometheus",
                    "location": "http://example.com/metric-plugin",
                    "sha256": "dac10cbf57633c9832a17f8c27d2ca34aa97dd3d"}],
    }, **kwargs)


def review(obj: dict[str, Any] | None, *, operation: str = "CREATE", uid: str = "uid-1",
           old: dict[str, Any] | None = None, kind: str | None = None,
           sub_resource: str | None = None, dry_run: bool = False) -> dict[str, Any]:
    source = obj or old or {}
    kind = kind or source.get("kind", "Stage")
    meta = source.get("metadata", {})
    request: dict[str, Any] = {
        "uid": uid,
        "kind": GVK[kind],
        "resource": {"group": GVK[kind]["group"], "version": "v1alpha1",
                     "resource": RESOURCE[kind]},
        "requestKind": GVK[kind],
        "name": meta.get("name", ""),
        "namespace": meta.get("namespace", ""),
        "operation": operation,
        "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
        "object": copy.deepcopy(obj),
        "oldObject": copy.deepcopy(old),
        "dryRun": dry_run,
        "options": None,
    }
    if sub_resource:
        request["subResource"] = sub_resource
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "request": request}


def decode_patch(response: dict[str, Any]) -> list[dict[str, Any]]:
    assert response.get("patchType") == "JSONPatch"
    return json.loads(base64.b64decode(response["patch"]))


def _pointer(path: str) -> list[str]:
    return [p.replace("~1", "/").replace("~0", "~") for p in path.split("/")[1:]]


def apply_patch(obj: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """A small RFC 6902 applier (add/replace/remove/test): what the API server does
    with a mutating webhook's answer."""
    doc = copy.deepcopy(obj)
    for op in ops:
        parts = _pointer(op["path"])
        parent: Any = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent[part]
        last = parts[-1]
        if op["op"] == "test":
            current = parent[int(last)] if isinstance(parent, list) else parent[last]
            assert current == op["value"], op
        elif op["op"] in ("add", "replace"):
            if isinstance(parent, list):
                if last == "-":
                    parent.append(op["value"])
                elif op["op"] == "add":
                    parent.insert(int(last), op["value"])
                else:
                    parent[int(last)] = op["value"]
            else:
                if op["op"] == "replace":
                    assert last in parent, op
                parent[last] = op["value"]
        elif op["op"] == "remove":
            if isinstance(parent, list):
                del parent[int(last)]
            else:
                del parent[last]
        else:
            raise AssertionError(f"unexpected op {op}")
    return doc
