"""The alerts and the dashboard as files: promtool checks and unit-tests every alert
(tests/monitoring/alerts_test.yaml), the kustomize PrometheusRule carries the same
groups as the chart's file, and the dashboard is well formed. That every metric they
query is exported by the running processes is tests/e2e/install/test_monitoring.py."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from harness import chart

HERE = Path(__file__).parent
UNIT_TESTS = HERE / "alerts_test.yaml"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("promtool")
    if binary is None:
        pytest.fail("promtool not found: `apt-get install -y prometheus` (.ci/run does)",
                    pytrace=False)
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=120,
                          check=False)


def test_promtool_check_rules():
    out = promtool("check", "rules", str(chart.ALERTS))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(chart.alert_rules())} rules found" in out.stdout


def test_promtool_unit_tests_pass():
    out = promtool("test", "rules", str(UNIT_TESTS))
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_alert_has_a_unit_test_where_it_fires():
    fired = {case["alertname"] for test in yaml.safe_load(UNIT_TESTS.read_text())["tests"]
             for case in test.get("alert_rule_test", []) if case.get("exp_alerts")}
    assert fired == {r["alert"] for r in chart.alert_rules()}


def test_a_broken_rule_fails_the_unit_tests(tmp_path):
    """The unit tests can fail: with the leader alert never firing they do."""
    rules = yaml.safe_load(chart.ALERTS.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule["alert"] == "RollgateReconcilerNoLeader":
                rule["expr"] = "vector(0) > 1"
    (tmp_path / "alerts.yaml").write_text(yaml.safe_dump(rules))
    tests = yaml.safe_load(UNIT_TESTS.read_text())
    tests["rule_files"] = [str(tmp_path / "alerts.yaml")]
    (tmp_path / "t.yaml").write_text(yaml.safe_dump(tests))
    out = promtool("test", "rules", str(tmp_path / "t.yaml"))
    assert out.returncode != 0
    assert "RollgateReconcilerNoLeader" in out.stdout + out.stderr


def test_kustomize_prometheusrule_carries_the_chart_groups():
    rule = yaml.safe_load(chart.PROMETHEUS_RULE.read_text())
    assert rule["kind"] == "PrometheusRule"
    assert rule["spec"] == yaml.safe_load(chart.ALERTS.read_text())


def test_alerts_have_severity_and_summary():
    for rule in chart.alert_rules():
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]


def test_dashboard_is_grafana_json_with_a_query_per_panel():
    board = json.loads(chart.DASHBOARD.read_text())
    assert board["uid"] == "rollgate"
    graphs = [p for p in board["panels"] if p["type"] != "row"]
    assert graphs and all(p.get("targets") for p in graphs)
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    assert chart.metric_names(chart.dashboard_exprs()) >= {
        "rollgate_webhook_requests_total", "rollgate_reconciler_leader",
        "rollgate_verifications_finished_total", "rollgate_plugins_audit_findings"}


def test_metric_names_count_histogram_and_counter_suffixes():
    text = ("# HELP a_total x\n# TYPE a_total counter\n# HELP h x\n# TYPE h histogram\n"
            "h_bucket{le=\"1\"} 0\n# TYPE g gauge\n")
    names = chart.exported_names(text)
    assert {"a_total", "h_bucket", "h_sum", "h_count", "g"} <= names
    assert chart.metric_names(['sum(rate(rollgate_x_total[5m])) / up{job="j"}']) == {
        "rollgate_x_total", "up"}
