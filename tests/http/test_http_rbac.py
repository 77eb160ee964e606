"""The webhook's ClusterRole grants exactly the API calls its look-ups make: templates
are fetched by name, RolloutManagers listed per namespace, nothing more."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s

from webhook.lookups import GROUP, ClusterLookups

RBAC = Path(__file__).resolve().parents[2] / "manifests" / "webhook" / "rbac.yaml"
PLURALS = ("analysistemplates", "clusteranalysistemplates", "rolloutmanagers")


class RecordingApi:
    """Stands in for CustomObjectsApi: records (verb, plural) of every call."""

    def __init__(self) -> None:
        self.calls: set[tuple[str, str]] = set()

    def __getattr__(self, method: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            plural = next(a for a in args if a in PLURALS)
            self.calls.add((method.split("_", 1)[0], plural))
            return {"items": []} if method.startswith("list_") else {"spec": {}}

        return call


def _granted() -> set[tuple[str, str]]:
    granted: set[tuple[str, str]] = set()
    for doc in yaml.safe_load_all(RBAC.read_text()):
        if doc and doc["kind"] == "ClusterRole":
            for rule in doc["rules"]:
                assert rule["apiGroups"] == [GROUP]
                granted |= {(verb, res) for verb in rule["verbs"] for res in rule["resources"]}
    return granted


def test_cluster_role_grants_exactly_the_lookups_calls():
    lookups = ClusterLookups(k8s.ApiClient(k8s.Configuration()))
    api = RecordingApi()
    lookups._api = api  # type: ignore[assignment]
    lookups.template("AnalysisTemplate", "ns", "a")
    lookups.template("ClusterAnalysisTemplate", "", "b")
    lookups.rollout_managers("ns")
    assert api.calls == {("get", "analysistemplates"), ("get", "clusteranalysistemplates"),
                         ("list", "rolloutmanagers")}
    assert _granted() == api.calls
