"""AdmissionReviews, and the typical valid and invalid objects they carry, for the HTTP
tests and the bench.

Plain functions returning fresh dicts, so a test can change one field without
affecting another test. The objects are built by support/testkit/objects.py.
"""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

from schemas.kinds import GROUP_ARGO, GROUP_KARGO, VERSION_ARGO, VERSION_KARGO
from testkit import objects

API_VERSION = "admission.k8s.io/v1"

GVK = {
    "Stage": {"group": GROUP_KARGO, "version": VERSION_KARGO, "kind": "Stage"},
    "RolloutManager": {"group": GROUP_ARGO, "version": VERSION_ARGO, "kind": "RolloutManager"},
    "Freight": {"group": GROUP_KARGO, "version": VERSION_KARGO, "kind": "Freight"},
}
RESOURCE = {"Stage": "stages", "RolloutManager": "rolloutmanagers", "Freight": "freights"}

SHA256 = "4e1243bd22c66e76c2ba9eddc1f91394e57f9f83c5e0e8e1b1a0bcc1b2c3d4e5"


def valid_stage(*, name: str = "prod", namespace: str = "guestbook") -> dict[str, Any]:
    """A typical Stage: two templates, two args, run metadata; already defaulted."""
    return objects.stage(name, namespace=namespace, freight=False, spec={
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
    })


def invalid_stage(*, name: str = "prod", namespace: str = "guestbook") -> dict[str, Any]:
    """Two errors: an unquoted number and a duplicate arg name."""
    obj = valid_stage(name=name, namespace=namespace)
    obj["spec"]["analysis"]["args"] = [
        {"name": "port", "value": 8080},
        {"name": "port", "value": "8080"},
    ]
    return obj


def valid_rollout_manager(*, name: str = "argo-rollouts",
                          namespace: str = "argo-rollouts") -> dict[str, Any]:
    return objects.rollout_manager(name, namespace=namespace, plugins={
        "trafficManagement": [{
            "name": "argoproj-labs/gatewayAPI",
            "location": "https://github.com/argoproj-labs/rollouts-plugin-trafficrouter-gatewayapi"
                        "/releases/download/v0.4.0/gatewayapi-plugin-linux-amd64",
            "sha256": SHA256,
        }],
        "metric": [{"name": "argoproj-labs/sample-prometheus",
                    "location": "file:///plugins/metric-plugin"}],
    })


def invalid_rollout_manager(*, name: str = "argo-rollouts",
                            namespace: str = "argo-rollouts") -> dict[str, Any]:
    """Three errors: no namespace in the name, http://, a SHA-1-length digest."""
    return objects.rollout_manager(name, namespace=namespace, plugins={
        "trafficManagement": [{"name": "gatewayAPI", "location": "file:///plugins/gw"}],
        "metric": [{"name": "argoproj-labs/sample-prometheus",
                    "location": "http://example.com/metric-plugin",
                    "sha256": "dac10cbf57633c9832a17f8c27d2ca34aa97dd3d"}],
    })


def review(obj: dict[str, Any] | None, *, operation: str = "CREATE", uid: str = "uid-1",
           old: dict[str, Any] | None = None, kind: str | None = None,
           sub_resource: str | None = None, dry_run: bool = False) -> dict[str, Any]:
    source = obj or old or {}
    kind = kind or source.get("kind", "Stage")
    meta = source.get("metadata", {})
    request: dict[str, Any] = {
        "uid": uid,
        "kind": GVK[kind],
        "resource": {"group": GVK[kind]["group"], "version": GVK[kind]["version"],
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
    ops: list[dict[str, Any]] = json.loads(base64.b64decode(response["patch"]))
    return ops
