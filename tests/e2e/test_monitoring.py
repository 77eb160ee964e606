"""Every metric the alerts (charts/rollgate/files/alerts.yaml) and the dashboard
(files/dashboard.json) query is one the real processes export: the session plane's
webhook, after admission requests that exercise its look-ups, and a reconciler started
against the plane, each scraped on /metrics. Prometheus' own `up` is the one exception
(README "Alerts and dashboard")."""

from __future__ import annotations

import json
import ssl
import urllib.request

import chart
import controlplane


def scrape(url: str, context: ssl.SSLContext | None = None) -> str:
    with urllib.request.urlopen(url + "/metrics", timeout=10, context=context) as resp:
        return resp.read().decode()


def stage_with_template(namespace: str) -> dict:
    """A valid Stage whose template does not exist: the webhook looks it up (and warns)."""
    return {
        "apiVersion": "kargo.akuity.io/v1alpha1", "kind": "Stage",
        "metadata": {"name": "metrics-probe", "namespace": namespace},
        "spec": {
            "requestedFreight": [{"origin": {"kind": "Warehouse", "name": "w"},
                                  "sources": {"direct": True}}],
            "verification": {"analysisTemplates": [{"name": "no-such-template"}]},
        },
    }


def test_every_metric_the_alerts_and_dashboard_use_is_exported(control_plane, namespace):
    plane: controlplane.ControlPlane = control_plane
    out = plane.kubectl("create", "--dry-run=server", "-f", "-",
                        input=json.dumps(stage_with_template(namespace)))
    assert "no-such-template" in out.stderr  # the look-up's warning: it ran
    context = ssl.create_default_context(cafile=str(plane.webhook_certs.ca_cert))
    webhook = chart.exported_names(scrape(plane.webhook_url, context))
    assert "rollgate_webhook_lookups_total" in webhook

    reconciler = plane.start_reconciler("--no-leader-elect", name="reconciler-metrics")
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
