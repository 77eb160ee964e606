"""Audit findings: spec.plugins against what argo-rollouts-manager v0.0.9 rendered.

The ConfigMap texts below are written the way the operator writes them
(controllers/configmap.go at v0.0.9: gopkg.in/yaml.v2 of []pluginItem, entries sorted by
name, ``sha256: ""`` when empty, argoproj-labs/openshift always added to the traffic
router plugins, the sha256 of traffic router plugins dropped, an empty list as ``[]``).
"""

from __future__ import annotations

from typing import Any

from reconciler.plugins.audit import (
    OPENSHIFT_PLUGIN,
    Finding,
    compare_with_operator,
    new_findings,
)
from reconciler.plugins.decisions import audited_manager, controller_reference, namespace_mode
from schemas.kinds import API_VERSION_ARGO
from testkit import objects

SHA_GW = "4b3aafd8f48b3cf1bd4b5ea4e2f0cc1a3f43d24e8b24c4d4a6e2b3b3c8e3a1f0"
SHA_PROM = "0e1f" * 16
GW_URL = "https://plugins.example.com/gatewayapi-plugin-linux-amd64"
PROM_URL = "https://plugins.example.com/prometheus-plugin-linux-amd64"
OPENSHIFT_URL = ("https://github.com/argoproj-labs/rollouts-plugin-trafficrouter-openshift/"
                 "releases/download/commit-8d0b3c6c5c18341f9f019cf1015b56b0d0c6085b/"
                 "rollouts-plugin-trafficrouter-openshift-linux-amd64")

SPEC = {
    "trafficManagement": [{"name": "argoproj-labs/gatewayAPI", "location": GW_URL,
                           "sha256": SHA_GW}],
    "metric": [{"name": "argoproj-labs/sample-prometheus", "location": PROM_URL,
                "sha256": SHA_PROM}],
}

# What the operator renders for SPEC.
OPERATOR_TRAFFIC = f"""- name: argoproj-labs/gatewayAPI
  location: {GW_URL}
  sha256: ""
- name: argoproj-labs/openshift
  location: {OPENSHIFT_URL}
  sha256: ""
"""
OPERATOR_METRIC = f"""- name: argoproj-labs/sample-prometheus
  location: {PROM_URL}
  sha256: "{SHA_PROM}"
"""


def rm(plugins: Any = SPEC, **meta: Any) -> dict[str, Any]:
    return objects.rollout_manager("rollouts", namespace="ns", spec={"plugins": plugins}, **meta)


def cm(**data: str) -> dict[str, Any]:
    return {"metadata": {"name": "argo-rollouts-config", "namespace": "ns"}, "data": data}


def rendered(traffic: str = OPERATOR_TRAFFIC, metric: str = OPERATOR_METRIC) -> dict[str, Any]:
    return cm(trafficRouterPlugins=traffic, metricProviderPlugins=metric)


def kinds(findings: list[Finding]) -> list[tuple[str, str]]:
    return [(f.kind, f.subject) for f in findings]


def test_the_operator_rendering_differs_only_by_the_dropped_traffic_digest() -> None:
    found = compare_with_operator(rm(), rendered())
    assert kinds(found) == [("digest-dropped", "argoproj-labs/gatewayAPI")]
    message = found[0].message
    assert message.startswith("spec.plugins.trafficManagement[0].sha256: "
                              "argo-rollouts-manager drops the sha256 of traffic router plugins")
    assert GW_URL in message and SHA_GW in message


def test_a_spec_without_digests_matches_the_operator_exactly() -> None:
    plugins = {"trafficManagement": [{"name": "argoproj-labs/gatewayAPI", "location": GW_URL}],
               "metric": []}
    assert compare_with_operator(rm(plugins), rendered(metric="[]\n")) == []


def test_sorting_and_the_openshift_plugin_are_not_differences() -> None:
    plugins = {"trafficManagement": [
        {"name": "zz/last", "location": "https://x.example/z"},
        {"name": "aa/first", "location": "https://x.example/a"},
    ]}
    traffic = (
        "- name: aa/first\n  location: https://x.example/a\n  sha256: \"\"\n"
        f"- name: {OPENSHIFT_PLUGIN}\n  location: {OPENSHIFT_URL}\n  sha256: \"\"\n"
        "- name: zz/last\n  location: https://x.example/z\n  sha256: \"\"\n"
    )
    assert compare_with_operator(rm(plugins), rendered(traffic, "[]\n")) == []


def test_missing_unlisted_and_changed_entries_are_each_named() -> None:
    traffic = (
        f"- name: {OPENSHIFT_PLUGIN}\n  location: {OPENSHIFT_URL}\n  sha256: \"\"\n"
        "- name: hand/made\n  location: https://x.example/h\n  sha256: \"\"\n"
    )
    metric = (f"- name: argoproj-labs/sample-prometheus\n  location: https://moved.example/p\n"
              f"  sha256: \"{'f' * 64}\"\n")
    found = compare_with_operator(rm(), rendered(traffic, metric))
    assert kinds(found) == [
        ("missing", "argoproj-labs/gatewayAPI"),
        ("unlisted", "trafficRouterPlugins/hand/made"),
        ("location-differs", "argoproj-labs/sample-prometheus"),
        ("digest-differs", "argoproj-labs/sample-prometheus"),
    ]
    assert found[0].message.startswith("spec.plugins.trafficManagement[0] "
                                       "(argoproj-labs/gatewayAPI) is not in")


def test_a_metric_digest_the_config_map_lacks_is_dropped_too() -> None:
    metric = f"- name: argoproj-labs/sample-prometheus\n  location: {PROM_URL}\n  sha256: \"\"\n"
    found = compare_with_operator(rm(), rendered(metric=metric))
    assert kinds(found) == [("digest-dropped", "argoproj-labs/gatewayAPI"),
                            ("digest-dropped", "argoproj-labs/sample-prometheus")]
    assert "the ConfigMap has no sha256" in found[1].message


def test_digests_compare_as_argo_rollouts_reads_them() -> None:
    """An upper-case digest in the spec (the mutating webhook missed it) is the same one."""
    plugins = {"metric": [{"name": "argoproj-labs/sample-prometheus", "location": PROM_URL,
                           "sha256": SHA_PROM.upper()}]}
    traffic = f"- name: {OPENSHIFT_PLUGIN}\n  location: {OPENSHIFT_URL}\n  sha256: \"\"\n"
    assert compare_with_operator(rm(plugins), rendered(traffic)) == []


def test_no_config_map_and_unreadable_keys() -> None:
    assert kinds(compare_with_operator(rm(), None)) == [("config-map-missing", "")]
    found = compare_with_operator(rm(), rendered(traffic="{not: a list}"))
    assert kinds(found) == [("unreadable-key", "trafficRouterPlugins")]


def test_what_the_operator_refuses_and_invalid_specs_are_findings() -> None:
    plugins = {"trafficManagement": [{"name": OPENSHIFT_PLUGIN, "location": GW_URL}],
               "metric": [{"name": "bad", "location": "file:///p"}]}
    found = compare_with_operator(rm(plugins), None)
    assert [f.kind for f in found] == ["invalid-spec", "operator-refuses"]
    assert "spec.plugins.metric[0].name" in found[0].message
    assert found[1].message.startswith(
        f"spec.plugins.trafficManagement[0]: argo-rollouts-manager refuses a plugin named "
        f"{OPENSHIFT_PLUGIN}")
    assert "nothing is rendered" in found[1].message


def test_a_refused_spec_is_one_finding_whatever_the_config_map_still_holds() -> None:
    """The operator errors before it writes: an edited RolloutManager keeps the rendering
    of its earlier spec, which is no rendering of this one (no entry-by-entry findings:
    not the new plugin "missing", not the openshift entry's location or digest)."""
    plugins = {"trafficManagement": [
        *SPEC["trafficManagement"],
        {"name": "new/plugin", "location": "https://x.example/new"},
        {"name": OPENSHIFT_PLUGIN, "location": GW_URL, "sha256": SHA_GW},
    ], "metric": SPEC["metric"]}
    found = compare_with_operator(rm(plugins), rendered())
    assert kinds(found) == [("operator-refuses", OPENSHIFT_PLUGIN)]
    assert "trafficManagement[2]" in found[0].message
    assert "keeps what it held before" in found[0].message


def test_the_operators_openshift_entry_is_never_a_finding_wherever_it_points() -> None:
    """Its location comes from the operator's OPENSHIFT_ROUTE_PLUGIN_LOCATION (tests run it
    with a file:// binary) or a github.com URL: neither is a difference the user made."""
    for location in (OPENSHIFT_URL, "file:///usr/local/bin/openshift-plugin"):
        traffic = OPERATOR_TRAFFIC.replace(OPENSHIFT_URL, location)
        assert kinds(compare_with_operator(rm(), rendered(traffic))) == [
            ("digest-dropped", "argoproj-labs/gatewayAPI")]


def test_each_finding_of_the_operators_rendering() -> None:
    """The dropped traffic digest, an entry the spec does not list and a location that
    differs, as the operator v0.0.9 would have them in the ConfigMap."""
    traffic = (
        f"- name: argoproj-labs/gatewayAPI\n  location: https://moved.example/gw\n"
        "  sha256: \"\"\n"
        f"- name: {OPENSHIFT_PLUGIN}\n  location: {OPENSHIFT_URL}\n  sha256: \"\"\n"
        "- name: someone/else\n  location: https://x.example/else\n  sha256: \"\"\n"
    )
    found = compare_with_operator(rm(), rendered(traffic))
    assert kinds(found) == [
        ("location-differs", "argoproj-labs/gatewayAPI"),
        ("digest-dropped", "argoproj-labs/gatewayAPI"),
        ("unlisted", "trafficRouterPlugins/someone/else"),
    ]
    assert "https://moved.example/gw" in found[0].message and GW_URL in found[0].message


def test_new_findings_are_the_ones_not_reported_for_this_generation() -> None:
    a, b = Finding("missing", "x/a", "a"), Finding("unlisted", "k/x/b", "b")
    assert new_findings([a, b], None) == [a, b]
    assert new_findings([a, b], frozenset({a.key})) == [b]
    assert new_findings([a], frozenset({a.key, b.key})) == []


# --- which mode a namespace is in ---------------------------------------------------------


def deployment(*refs: dict[str, Any]) -> dict[str, Any]:
    return objects.deployment(namespace="ns", ownerReferences=list(refs))


RM_REF = {"apiVersion": API_VERSION_ARGO, "kind": "RolloutManager", "name": "rollouts",
          "uid": "u-1", "controller": True, "blockOwnerDeletion": True}


def test_auto_mode_follows_the_deployment_and_its_controller() -> None:
    assert namespace_mode("auto", None) == "waiting"
    assert namespace_mode("auto", deployment()) == "sync"
    assert namespace_mode("auto", deployment(RM_REF)) == "audit"
    # An owner that is not the controller, or a controller of another kind or group.
    assert namespace_mode("auto", deployment({**RM_REF, "controller": False})) == "sync"
    assert namespace_mode("auto", deployment({**RM_REF, "kind": "Application"})) == "sync"
    assert namespace_mode("auto", deployment({**RM_REF, "apiVersion": "other.io/v1"})) == "sync"


def test_an_explicit_mode_wins() -> None:
    assert namespace_mode("sync", deployment(RM_REF)) == "sync"
    assert namespace_mode("sync", None) == "sync"
    assert namespace_mode("audit", deployment()) == "audit"
    assert namespace_mode("audit", None) == "audit"


def test_the_audited_rollout_manager_is_the_deployments_controller() -> None:
    older = rm(uid="u-0", creationTimestamp="2026-01-01T00:00:00Z")
    older["metadata"]["name"] = "older"
    controlling = rm(uid="u-1", creationTimestamp="2026-01-01T00:00:09Z")
    assert controller_reference(deployment(RM_REF)) == RM_REF
    assert audited_manager([older, controlling], deployment(RM_REF), older) is controlling
    assert audited_manager([older], deployment(RM_REF), older) is older, "controller gone"
    assert audited_manager([older, controlling], deployment(), older) is older
