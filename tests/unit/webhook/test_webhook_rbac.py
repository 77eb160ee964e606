"""The webhook's ClusterRole grants exactly the API calls its look-ups make: templates
are fetched by name, RolloutManagers listed per namespace, nothing more."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from kubernetes import client as k8s

from kubekit.kinds import ANALYSIS_TEMPLATE, Resource
from kubekit.rest import Rest
from webhook.lookups import ClusterLookups

RBAC = Path(__file__).resolve().parents[3] / "manifests" / "webhook" / "rbac.yaml"
GROUP = ANALYSIS_TEMPLATE.group


class RecordingRest(Rest):
    """Stands in for the look-ups' REST client: records (verb, plural) of every call."""

    def __init__(self) -> None:
        super().__init__(k8s.ApiClient(k8s.Configuration()))
        self.calls: set[tuple[str, str]] = set()

    def get(self, resource: Resource, namespace: str, name: str, **kw: Any) -> Any:
        self.calls.add(("get", resource.plural))
        return {"spec": {}}

    def list(self, resource: Resource, namespace: str | None = None, **kw: Any) -> Any:
        self.calls.add(("list", resource.plural))
        return {"items": []}


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
    api = RecordingRest()
    lookups._rest = api
    lookups.template("AnalysisTemplate", "ns", "a")
    lookups.template("ClusterAnalysisTemplate", "", "b")
    lookups.rollout_managers("ns")
    assert api.calls == {("get", "analysistemplates"), ("get", "clusteranalysistemplates"),
                         ("list", "rolloutmanagers")}
    assert _granted() == api.calls
