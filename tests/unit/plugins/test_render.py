"""The plugin renderer: what rollgate writes into ``argo-rollouts-config``.

The rendered text is parsed back with a YAML parser and compared with the spec using
the field names Argo Rollouts unmarshals (``name``, ``location``, ``sha256`` in lists
under ``trafficRouterPlugins`` / ``metricProviderPlugins``), because that is what the
Argo Rollouts controller will read.
"""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest
import yaml

from reconciler.plugins.decisions import keys_owned_by, unlisted_entries
from reconciler.plugins.render import (
    METRIC_KEY,
    TRAFFIC_KEY,
    InvalidPluginSpec,
    checksum,
    render_plugin_config,
)
from testkit import objects

SHA = "a" * 64
ARGO_FIELDS = {"name", "location", "sha256"}


def rm(plugins: Any = None, *, name: str = "rm", with_plugins: bool = True) -> dict[str, Any]:
    return objects.k8s_object("RolloutManager", name=name, namespace="argo-rollouts",
                              spec={"plugins": plugins} if with_plugins else {})


def gateway(**extra: Any) -> dict[str, Any]:
    return {
        "name": "argoproj-labs/gatewayAPI",
        "location": "https://github.com/argoproj-labs/gatewayapi/releases/v0.4.0/gw-linux-amd64",
        **extra,
    }


def prometheus(**extra: Any) -> dict[str, Any]:
    return {
        "name": "argoproj-labs/sample-prometheus",
        "location": "file:///plugins/metric-plugin",
        **extra,
    }


def parsed(data: dict[str, str], key: str) -> list[dict[str, Any]]:
    entries = yaml.safe_load(data[key])
    assert isinstance(entries, list)
    for entry in entries:
        assert set(entry) <= ARGO_FIELDS, entry
    return entries


# --- shapes -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "obj",
    [
        rm(with_plugins=False),
        rm(None),
        rm({}),
        rm({"trafficManagement": [], "metric": []}),
        rm({"trafficManagement": None, "metric": None}),
    ],
    ids=["no-plugins", "plugins-null", "plugins-empty", "empty-lists", "null-lists"],
)
def test_no_plugins_renders_no_keys(obj: dict[str, Any]) -> None:
    data, _ = render_plugin_config(obj)
    assert data == {}


def test_only_traffic_plugins_renders_only_traffic_key() -> None:
    data, _ = render_plugin_config(rm({"trafficManagement": [gateway(sha256=SHA)]}))
    assert set(data) == {TRAFFIC_KEY}
    assert parsed(data, TRAFFIC_KEY) == [gateway(sha256=SHA)]


def test_only_metric_plugins_renders_only_metric_key() -> None:
    data, _ = render_plugin_config(rm({"metric": [prometheus()], "trafficManagement": None}))
    assert set(data) == {METRIC_KEY}
    assert parsed(data, METRIC_KEY) == [prometheus()]


def test_both_lists_render_both_keys_with_argo_field_names() -> None:
    data, _ = render_plugin_config(
        rm({"trafficManagement": [gateway(sha256=SHA)], "metric": [prometheus()]})
    )
    assert set(data) == {TRAFFIC_KEY, METRIC_KEY}
    assert parsed(data, TRAFFIC_KEY) == [
        {"name": gateway()["name"], "location": gateway()["location"], "sha256": SHA}
    ]
    assert parsed(data, METRIC_KEY) == [
        {"name": prometheus()["name"], "location": prometheus()["location"]}
    ]


def test_order_is_the_spec_order() -> None:
    names = ["zeta/last", "alpha/first", "mid/dle"]
    metric = [{"name": n, "location": f"file:///plugins/{i}"} for i, n in enumerate(names)]
    data, _ = render_plugin_config(rm({"metric": metric}))
    assert [e["name"] for e in parsed(data, METRIC_KEY)] == names


def test_fields_render_in_a_fixed_order_regardless_of_input_order() -> None:
    entry = {"sha256": SHA, "location": gateway()["location"], "name": gateway()["name"]}
    data, _ = render_plugin_config(rm({"trafficManagement": [entry]}))
    lines = data[TRAFFIC_KEY].splitlines()
    assert lines[0].startswith("- name: ")
    assert lines[1].strip().startswith("location: ")
    assert lines[2].strip().startswith("sha256: ")


def test_rendered_text_is_block_yaml_list() -> None:
    data, _ = render_plugin_config(rm({"metric": [prometheus()]}))
    assert data[METRIC_KEY] == (
        "- name: argoproj-labs/sample-prometheus\n"
        "  location: file:///plugins/metric-plugin\n"
    )


# --- sha256 ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given",
    [SHA.upper(), f"  {SHA}  ", f"\t{SHA.upper()}\n", "A" * 32 + "a" * 32],
    ids=["upper", "spaces", "tab-newline-upper", "mixed"],
)
def test_sha256_is_lowercased_and_trimmed(given: str) -> None:
    data, _ = render_plugin_config(rm({"trafficManagement": [gateway(sha256=given)]}))
    assert parsed(data, TRAFFIC_KEY)[0]["sha256"] == SHA


@pytest.mark.parametrize("given", ["", "   ", None], ids=["empty", "blank", "null"])
def test_empty_sha256_is_omitted(given: str | None) -> None:
    data, _ = render_plugin_config(rm({"metric": [prometheus(sha256=given)]}))
    assert "sha256" not in parsed(data, METRIC_KEY)[0]
    assert "sha256" not in data[METRIC_KEY]


def test_sha256_casing_does_not_change_checksum() -> None:
    _, lower = render_plugin_config(rm({"metric": [prometheus(sha256=SHA)]}))
    _, upper = render_plugin_config(rm({"metric": [prometheus(sha256=f" {SHA.upper()} ")]}))
    assert lower == upper


# --- invalid specs -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("plugins", "field_prefix"),
    [
        ({"metric": [prometheus(name="no-slash")]}, "spec.plugins.metric[0].name"),
        (
            {"metric": [prometheus(), prometheus(location="file:///other")]},
            "spec.plugins.metric[1]",
        ),
        ({"trafficManagement": [gateway()], "metric": [gateway()]}, "spec.plugins.metric[0]"),
        (
            {"trafficManagement": [gateway(location="http://example.com/p")]},
            "spec.plugins.trafficManagement[0].location",
        ),
        (
            {"trafficManagement": [gateway(location="ftp://example.com/p")]},
            "spec.plugins.trafficManagement[0].location",
        ),
        (
            {"metric": [prometheus(location="file://relative/x")]},
            "spec.plugins.metric[0].location",
        ),
        ({"metric": [prometheus(sha256="b" * 40)]}, "spec.plugins.metric[0].sha256"),
        ({"metric": [prometheus(sha256="z" * 64)]}, "spec.plugins.metric[0].sha256"),
        ({"metric": [prometheus(name="argoproj-labs/..")]}, "spec.plugins.metric[0].name"),
    ],
    ids=[
        "bad-name",
        "duplicate",
        "in-both-lists",
        "http",
        "ftp",
        "file-not-absolute",
        "sha1-length",
        "sha-not-hex",
        "dotdot-name",
    ],
)
def test_invalid_spec_raises_with_findings(plugins: dict[str, Any], field_prefix: str) -> None:
    with pytest.raises(InvalidPluginSpec) as excinfo:
        render_plugin_config(rm(plugins))
    err = excinfo.value
    assert isinstance(err, ValueError)
    assert err.findings, "the exception must carry the findings"
    assert all(not f.warning for f in err.findings)
    assert any(f.field.startswith(field_prefix) for f in err.findings), [
        f.field for f in err.findings
    ]
    assert field_prefix.split("[")[0] in str(err)


def test_every_error_is_carried_at_once() -> None:
    plugins = {
        "trafficManagement": [gateway(location="ftp://x/y")],
        "metric": [prometheus(name="bad")],
    }
    with pytest.raises(InvalidPluginSpec) as excinfo:
        render_plugin_config(rm(plugins))
    fields = {f.field for f in excinfo.value.findings}
    assert "spec.plugins.trafficManagement[0].location" in fields
    assert "spec.plugins.metric[0].name" in fields


def test_http_location_is_allowed_with_the_flag() -> None:
    plugins = {"trafficManagement": [gateway(location="http://plugins.internal/gw")]}
    data, _ = render_plugin_config(rm(plugins), allow_http_plugins=True)
    assert parsed(data, TRAFFIC_KEY)[0]["location"] == "http://plugins.internal/gw"


def test_remote_location_without_sha256_is_only_a_warning() -> None:
    data, _ = render_plugin_config(rm({"trafficManagement": [gateway()]}))
    assert parsed(data, TRAFFIC_KEY) == [gateway()]


def test_input_is_not_mutated() -> None:
    obj = rm({"trafficManagement": [gateway(sha256=f" {SHA.upper()}")], "metric": None})
    before = copy.deepcopy(obj)
    render_plugin_config(obj)
    assert obj == before


# --- checksum --------------------------------------------------------------------------


def test_checksum_is_sha256_of_sorted_json_of_data() -> None:
    data, digest = render_plugin_config(
        rm({"trafficManagement": [gateway()], "metric": [prometheus()]})
    )
    blob = json.dumps(data, sort_keys=True, separators=(",", ":"))
    assert digest == hashlib.sha256(blob.encode()).hexdigest()
    assert digest == checksum(data)
    assert len(digest) == 64


def test_checksum_is_stable_across_dict_orderings() -> None:
    a = rm({"trafficManagement": [gateway(sha256=SHA)], "metric": [prometheus()]})
    b = rm(
        {
            "metric": [dict(reversed(list(prometheus().items())))],
            "trafficManagement": [dict(reversed(list(gateway(sha256=SHA).items())))],
        }
    )
    assert render_plugin_config(a) == render_plugin_config(b)
    assert checksum({TRAFFIC_KEY: "x", METRIC_KEY: "y"}) == checksum(
        {METRIC_KEY: "y", TRAFFIC_KEY: "x"}
    )


def test_checksum_ignores_unrelated_fields() -> None:
    a = rm({"metric": [prometheus()]})
    b = copy.deepcopy(a)
    b["metadata"]["labels"] = {"team": "platform"}
    b["spec"]["image"] = "quay.io/argoproj/argo-rollouts"
    assert render_plugin_config(a)[1] == render_plugin_config(b)[1]


@pytest.mark.parametrize(
    "changed",
    [
        {"metric": [prometheus(location="file:///plugins/other")]},
        {"metric": [prometheus(sha256=SHA)]},
        {"metric": [prometheus(name="argoproj-labs/renamed")]},
        {"metric": [prometheus()], "trafficManagement": [gateway()]},
        {"metric": []},
        {"trafficManagement": [prometheus()]},
    ],
    ids=["location", "sha256", "name", "added", "removed", "moved-list"],
)
def test_checksum_changes_when_rendered_content_changes(changed: dict[str, Any]) -> None:
    _, base = render_plugin_config(rm({"metric": [prometheus()]}))
    _, other = render_plugin_config(rm(changed))
    assert base != other


def test_checksum_changes_with_order() -> None:
    one = {"name": "a/one", "location": "file:///one"}
    two = {"name": "b/two", "location": "file:///two"}
    assert render_plugin_config(rm({"metric": [one, two]}))[1] != render_plugin_config(
        rm({"metric": [two, one]})
    )[1]


# --- unlisted entries (Warning event) ----------------------------------------------------


def test_unlisted_entries_names_hand_made_entries() -> None:
    desired, _ = render_plugin_config(rm({"metric": [prometheus()]}))
    existing = {
        METRIC_KEY: yaml.safe_dump([prometheus(location="file:///old"), {"name": "me/mine"}]),
        TRAFFIC_KEY: yaml.safe_dump([{"name": "hand/made", "location": "file:///x"}]),
        "metricProviders": "unrelated",
    }
    assert unlisted_entries(existing, desired) == [
        f"{TRAFFIC_KEY}: hand/made",
        f"{METRIC_KEY}: me/mine",
    ]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("{not: [valid", [f"{METRIC_KEY} (content that is not a YAML list of plugins)"]),
        ("just a string", [f"{METRIC_KEY} (content that is not a YAML list of plugins)"]),
        ("- 42\n- {location: x}\n", [f"{METRIC_KEY}[0] (entry without a name)",
                                     f"{METRIC_KEY}[1] (entry without a name)"]),
        ("", []),
        ("[]", []),
    ],
    ids=["broken-yaml", "scalar", "nameless", "empty", "empty-list"],
)
def test_unlisted_entries_tolerates_garbage(raw: str, expected: list[str]) -> None:
    assert unlisted_entries({METRIC_KEY: raw}, {}) == expected


def test_unlisted_entries_respects_keys_filter() -> None:
    existing = {METRIC_KEY: yaml.safe_dump([{"name": "old/plugin"}])}
    assert unlisted_entries(existing, {}, keys=()) == []
    assert unlisted_entries(None, {}) == []


def test_keys_owned_by_reads_managed_fields() -> None:
    cm = {
        "metadata": {
            "managedFields": [
                {"manager": "rollgate", "operation": "Apply",
                 "fieldsV1": {"f:data": {f"f:{METRIC_KEY}": {}}}},
                {"manager": "kubectl-edit", "operation": "Update",
                 "fieldsV1": {"f:data": {f"f:{TRAFFIC_KEY}": {}, "f:other": {}}}},
            ]
        }
    }
    assert keys_owned_by(cm, "rollgate") == {METRIC_KEY}
    assert keys_owned_by(cm, "kubectl-edit") == {TRAFFIC_KEY}
    assert keys_owned_by(None, "rollgate") == set()


@pytest.mark.parametrize("digest", ["0e" + "1" * 62, "1" * 64, "e" * 64], ids=["exp", "int", "e"])
def test_sha256_stays_a_string_for_any_yaml_resolver(digest: str) -> None:
    data, _ = render_plugin_config(rm({"metric": [prometheus(sha256=digest)]}))
    assert f"sha256: '{digest}'" in data[METRIC_KEY]
    assert parsed(data, METRIC_KEY)[0]["sha256"] == digest
