"""The webhook's ClusterRole grants exactly the API calls its look-ups make: templates
are fetched by name, RolloutManagers listed per namespace, nothing more."""

from __future__ import annotations

import yaml
from kubernetes import client as k8s

from kubekit.kinds import ANALYSIS_TEMPLATE, CLUSTER_ANALYSIS_TEMPLATE
from testkit import objects
from testkit.fakeapi import FakeApi
from testkit.paths import REPO_ROOT
from webhook.lookups import ClusterLookups

RBAC = REPO_ROOT / "manifests" / "webhook" / "rbac.yaml"
GROUP = ANALYSIS_TEMPLATE.group


def _granted() -> set[tuple[str, str]]:
    granted: set[tuple[str, str]] = set()
    for doc in yaml.safe_load_all(RBAC.read_text()):
        if doc and doc["kind"] == "ClusterRole":
            for rule in doc["rules"]:
                assert rule["apiGroups"] == [GROUP]
                granted |= {(verb, res) for verb in rule["verbs"] for res in rule["resources"]}
    return granted


def test_cluster_role_grants_exactly_the_lookups_calls():
    api = FakeApi()  # the look-ups' REST client is a real Rest answered by the fake
    api.put(ANALYSIS_TEMPLATE, objects.analysis_template("a", namespace="ns"))
    api.put(CLUSTER_ANALYSIS_TEMPLATE, objects.analysis_template("b", cluster=True))
    lookups = ClusterLookups(k8s.ApiClient(k8s.Configuration()))
    lookups._rest = api.rest()
    assert lookups.template("AnalysisTemplate", "ns", "a") is not None
    assert lookups.template("ClusterAnalysisTemplate", "", "b") is not None
    lookups.rollout_managers("ns")
    calls = {(r.verb, r.resource.plural) for r in api.requests}
    assert calls == {("get", "analysistemplates"), ("get", "clusteranalysistemplates"),
                     ("list", "rolloutmanagers")}
    assert {method for method, _, _ in api.wire} == {"GET"}
    assert _granted() == calls
