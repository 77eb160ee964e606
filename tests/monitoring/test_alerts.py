"""The alerts and the dashboard as files: promtool checks and unit-tests every alert
(tests/monitoring/alerts_test.yaml, certificate_alerts_test.yaml: each fires on trouble
and stays quiet on a healthy series), the kustomize PrometheusRule carries the same
groups as the chart's file and its overlay ships the scrape its rules read, every alert
names a safe action and a runbook section of docs/operating.md that exists, the
certificate alerts' CronJob keeps its failed runs, and the dashboard is well formed.
That every metric they query is exported by the running processes is
tests/e2e/install/test_monitoring.py; that the runbook anchors exist in the built docs
site is tests/e2e/tooling/test_docs_site.py."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import chart, versions
from harness.paths import binary
from testkit.paths import REPO_ROOT

HERE = Path(__file__).parent
# The certificate alerts' own file is evaluated hourly (their scale is days).
UNIT_TESTS = (HERE / "alerts_test.yaml", HERE / "certificate_alerts_test.yaml")
OVERLAY = REPO_ROOT / "manifests" / "monitoring"
RUNBOOK_PAGE = "docs/operating.md"
# What the certificate alerts tell whoever is paged to run: the chart's renewal CronJob,
# once, now (`rollgate certs renew` decides from what it observes, so an extra run is safe).
RENEW_NOW = "kubectl -n rollgate-system create job --from=cronjob/rollgate-certs-renew"
OVERDUE = "RollgateWebhookCertificateRenewalOverdue"


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
    out = promtool("test", "rules", *map(str, UNIT_TESTS))
    assert out.returncode == 0, out.stdout + out.stderr


def unit_cases() -> list[dict[str, Any]]:
    return [case for path in UNIT_TESTS for test in yaml.safe_load(path.read_text())["tests"]
            for case in test.get("alert_rule_test", [])]


def test_every_alert_has_a_unit_test_where_it_fires_and_one_where_it_is_quiet():
    alerts = {r["alert"] for r in chart.alert_rules()}
    fired = {case["alertname"] for case in unit_cases() if case.get("exp_alerts")}
    quiet = {case["alertname"] for case in unit_cases() if case.get("exp_alerts") == []}
    assert (fired, quiet) == (alerts, alerts)


@pytest.mark.parametrize(("alert", "find", "broken"), [
    ("RollgateReconcilerNoLeader", None, "vector(0) > 1"),  # never fires
    (OVERDUE, "2 / 3", "1 / 2"),  # a renewal point too early: fires on a healthy one
    # an abort pages again
    ("RollgateVerificationFailed", "Inconclusive", "Inconclusive|Aborted"),
])
def test_a_broken_rule_fails_the_unit_tests(tmp_path, alert, find, broken):
    """The unit tests can fail: with each of these rules broken they do."""
    rules = yaml.safe_load(chart.ALERTS.read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule["alert"] == alert:
                assert find is None or find in rule["expr"]
                rule["expr"] = broken if find is None else rule["expr"].replace(find, broken)
    (tmp_path / "alerts.yaml").write_text(yaml.safe_dump(rules))
    copies = []
    for path in UNIT_TESTS:
        tests = yaml.safe_load(path.read_text())
        tests["rule_files"] = [str(tmp_path / "alerts.yaml")]
        copies.append(tmp_path / path.name)
        copies[-1].write_text(yaml.safe_dump(tests))
    out = promtool("test", "rules", *map(str, copies))
    assert out.returncode != 0
    assert alert in out.stdout + out.stderr


def test_kustomize_prometheusrule_carries_the_chart_groups():
    rule = yaml.safe_load(chart.PROMETHEUS_RULE.read_text())
    assert rule["kind"] == "PrometheusRule"
    assert rule["spec"] == yaml.safe_load(chart.ALERTS.read_text())


def test_alerts_have_severity_and_summary():
    for rule in chart.alert_rules():
        assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
        assert rule["annotations"]["summary"], rule["alert"]


def slug(heading: str) -> str:
    """A heading's anchor as mkdocs (Python-Markdown's toc) and GitHub make it."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def runbook_anchors() -> dict[str, str]:
    """Each alert's runbook_url anchor, after checking the URL is the repository's page."""
    home = yaml.safe_load((chart.CHART / "Chart.yaml").read_text())["home"]
    anchors = {}
    for rule in chart.alert_rules():
        url, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert url == f"{home}/blob/main/{RUNBOOK_PAGE}", rule["alert"]
        anchors[rule["alert"]] = anchor
    return anchors


def test_every_alert_has_a_runbook_section_that_exists():
    page = (REPO_ROOT / RUNBOOK_PAGE).read_text()
    headings = {slug(h) for h in re.findall(r"^#{2,6} (.+?)\s*$", page, re.MULTILINE)}
    anchors = runbook_anchors()
    assert {a: n for n, a in anchors.items() if a not in headings} == {}
    assert len(set(anchors.values())) == len(anchors)  # a section of its own each


def test_every_alert_names_its_action_and_none_deletes_a_secret():
    for rule in chart.alert_rules():
        text = " ".join(rule["annotations"]["description"].split())
        assert "Action" in text, rule["alert"]
        assert "delete the Secret" not in text and "helm upgrade" not in text, rule["alert"]


def test_the_certificate_alerts_run_the_charts_renewal_cronjob_which_keeps_failed_runs():
    """The action the certificate alerts name is a CronJob the chart renders (job
    source), and its failed Jobs stay to be read, each attempt's pod with its log: no TTL
    deletes them before the history limit would. The hook Jobs keep theirs (Helm deletes
    them when they succeed)."""
    certificate_alerts = [r for r in chart.alert_rules() if "Certificate" in r["alert"]]
    assert len(certificate_alerts) == 3
    for rule in certificate_alerts:
        assert RENEW_NOW in " ".join(rule["annotations"]["description"].split()), rule["alert"]
    objects = chart.render({"certificates": {"source": "job"}})
    (cronjob,) = [o for o in objects if o["kind"] == "CronJob"]
    assert f"cronjob/{cronjob['metadata']['name']}" in RENEW_NOW
    assert cronjob["metadata"]["namespace"] == "rollgate-system"
    assert cronjob["spec"]["failedJobsHistoryLimit"] == 3
    job = cronjob["spec"]["jobTemplate"]["spec"]
    assert "ttlSecondsAfterFinished" not in job
    # With OnFailure the Job controller deletes the pod, and its log, when the Job fails.
    assert job["template"]["spec"]["restartPolicy"] == "Never"
    hooks = [o for o in objects if o["kind"] == "Job"]
    assert len(hooks) == 2 and all(j["spec"]["ttlSecondsAfterFinished"] == 600 for j in hooks)


def prometheus_rule(values: dict[str, Any]) -> dict[str, Any]:
    (rule,) = [o for o in chart.render({"monitoring": {"prometheusRule": {"enabled": True}},
                                        **values}) if o["kind"] == "PrometheusRule"]
    return rule


def test_the_chart_renders_every_alert_but_overdue_renewal_for_cert_manager():
    """cert-manager renews at its renewBefore (the chart's default: 30 days before a
    year-long certificate ends), not at two thirds of the lifetime the rule assumes."""
    full = yaml.safe_load(chart.ALERTS.read_text())
    for source in ("job", "secret"):
        assert prometheus_rule({"certificates": {"source": source}})["spec"] == full, source
    rendered = prometheus_rule({"certificates": {"source": "cert-manager"}})["spec"]
    names = [r["alert"] for g in rendered["groups"] for r in g["rules"]]
    assert names == [r["alert"] for r in chart.alert_rules() if r["alert"] != OVERDUE]


def kustomized_overlay() -> list[dict[str, Any]]:
    kubectl = binary("kubectl", versions.kubernetes())
    out = subprocess.run([str(kubectl), "kustomize", str(OVERLAY)], capture_output=True,
                         text=True, timeout=60, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if isinstance(d, dict)]


def test_the_kustomize_overlay_ships_the_scrape_its_rules_read():
    """Without a scrape, RollgateWebhookUnavailable (no `up{job="rollgate-webhook"}`)
    and RollgateReconcilerNoLeader (no leader series) would fire for ever: the overlay
    ships the chart's reconciler metrics Service and both ServiceMonitors, which select
    the Services manifests/ installs (job = the Service's name)."""
    overlay = {(o["kind"], o["metadata"]["name"]): o for o in kustomized_overlay()}
    assert set(overlay) == {("PrometheusRule", "rollgate"),
                            ("Service", "rollgate-reconciler-metrics"),
                            ("ServiceMonitor", "rollgate-reconciler"),
                            ("ServiceMonitor", "rollgate-webhook")}
    rendered = {(o["kind"], o["metadata"]["name"]): o for o in chart.render(
        {"monitoring": {"serviceMonitor": {"enabled": True}}})
        if o["kind"] == "ServiceMonitor" or o["metadata"]["name"] == "rollgate-reconciler-metrics"}
    assert {k: o["spec"] for k, o in rendered.items()} == {
        k: overlay[k]["spec"] for k in rendered}
    service = overlay[("Service", "rollgate-reconciler-metrics")]
    monitor = overlay[("ServiceMonitor", "rollgate-reconciler")]["spec"]["selector"]["matchLabels"]
    assert monitor.items() <= service["metadata"]["labels"].items()
    webhook_service = yaml.safe_load((REPO_ROOT / "manifests/webhook/service.yaml").read_text())
    selector = overlay[("ServiceMonitor", "rollgate-webhook")]["spec"]["selector"]["matchLabels"]
    assert selector.items() <= webhook_service["metadata"]["labels"].items()
    assert 'up{job="' + webhook_service["metadata"]["name"] + '"}' in next(
        r["expr"] for r in chart.alert_rules() if r["alert"] == "RollgateWebhookUnavailable")
    pods = yaml.safe_load((REPO_ROOT / "manifests/reconciler/deployment.yaml").read_text())
    template = pods["spec"]["template"]
    assert service["spec"]["selector"].items() <= template["metadata"]["labels"].items()
    assert service["spec"]["ports"][0]["targetPort"] in {
        p["name"] for p in template["spec"]["containers"][0]["ports"]}


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
