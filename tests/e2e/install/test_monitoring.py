"""Every metric the alerts (charts/rollgate/files/alerts.yaml) and the dashboard
(files/dashboard.json) query is one the real processes export: the session plane's
webhook, after admission requests that exercise its look-ups, and a reconciler started
against the plane, each scraped on /metrics. Prometheus' own `up` is the one exception
(docs/operating.md "Alerts and dashboard")."""

from __future__ import annotations

import json
import ssl
import urllib.request
from typing import Any

from harness import chart
from harness.host_rollgate import HostRollgate
from testkit import objects


def scrape(url: str, context: ssl.SSLContext | None = None) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=10, context=context) as resp:
        text: str = resp.read().decode()
        return text


def stage_with_template(namespace: str) -> dict[str, Any]:
    """A valid Stage whose template does not exist: the webhook looks it up (and warns)."""
    return objects.stage("metrics-probe", namespace=namespace, warehouse="w",
                         verification=objects.verification("no-such-template"))


def test_every_metric_the_alerts_and_dashboard_use_is_exported(
        rollgate: HostRollgate, namespace: str) -> None:
    plane = rollgate.plane
    out = plane.kubectl("create", "--dry-run=server", "-f", "-",
                        input=json.dumps(stage_with_template(namespace)))
    assert "no-such-template" in out.stderr  # the look-up's warning: it ran
    context = ssl.create_default_context(cafile=str(rollgate.certificates().ca_cert))
    webhook = chart.exported_names(scrape(rollgate.webhook_url, context))
    assert "rollgate_webhook_lookups_total" in webhook

    reconciler = rollgate.start_reconciler("--no-leader-elect", name="reconciler-metrics")
    try:
        reconciler.wait_ready(60)
        exported = webhook | chart.exported_names(scrape(reconciler.url))
    finally:
        plane.stop_process(reconciler)

    used = chart.used_metric_names()
    assert "rollgate_reconciler_leader" in used
    missing = used - exported - chart.PROMETHEUS_SERIES
    assert not missing, f"queried but exported by neither process: {sorted(missing)}"


def test_a_misspelt_metric_would_be_caught():
    """The comparison can fail: a name no process exports is reported."""
    used = chart.metric_names(["rate(rollgate_webhook_request_total[5m])"])
    exported = chart.exported_names("# TYPE rollgate_webhook_requests counter\n")
    assert used - exported == {"rollgate_webhook_request_total"}
