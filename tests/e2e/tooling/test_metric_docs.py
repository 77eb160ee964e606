"""docs/metrics.md is what the processes' collectors and the product's source say
(support/docgen/metrics.py, support/docgen/reasons.py), so the reference of metrics,
condition reasons and Event reasons cannot drift from the code."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

from docgen import metrics, reasons
from testkit.paths import REPO_ROOT


def test_the_metrics_reference_is_current() -> None:
    assert metrics.PAGE.read_text() == metrics.render(), "run make metric-docs"
    assert metrics.main(["--check"]) == 0


def test_every_metric_the_alerts_and_the_dashboard_query_is_on_the_page() -> None:
    page = metrics.PAGE.read_text()
    files = REPO_ROOT / "charts" / "rollgate" / "files"
    queried = set()
    for name in ("alerts.yaml", "dashboard.json"):
        queried |= set(re.findall(r"rollgate_\w+", (files / name).read_text()))
    assert queried
    for name in sorted(queried):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert f"`{name}`" in page or f"`{base}_bucket`" in page, name


def test_every_reason_the_code_writes_is_on_the_page() -> None:
    page = metrics.PAGE.read_text()
    conditions, events = page.split("## Condition reasons")[1].split("## Event reasons")
    found = reasons.scan()
    assert {"Verified", "Synced", "VerifierConflict", "PluginsRemoved",
            "CertificateExpired", "DuplicateVerificationRuns"} <= {w.reason for w in found}
    for w in found:
        assert f"| `{w.reason}` |" in (conditions if w.record == "condition" else events), w


def test_a_new_metric_makes_the_page_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = Counter("rollgate_brand_new", "a metric nobody documented", ["namespace"],
                    registry=CollectorRegistry())
    parts = metrics.sections()
    parts["Webhook (`rollgate webhook`)"].append(extra)
    monkeypatch.setattr(metrics, "sections", lambda: parts)

    page = metrics.render()

    assert ("| `rollgate_brand_new_total` | counter | `namespace` | "
            "a metric nobody documented |") in page
    assert metrics.main(["--check"]) == 1


def test_a_new_reason_in_the_code_stops_the_page(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    new = reasons.Written("event", "BrandNewReason", "reconciler/x.py:1")
    found = [*reasons.scan(), new]
    monkeypatch.setattr(metrics, "written", lambda: found)

    with pytest.raises(metrics.Undescribed, match="event BrandNewReason"):
        metrics.render()
    assert metrics.main(["--check"]) == 1
    assert "not described in docgen/metrics.py" in capsys.readouterr().err


def test_a_described_reason_appears_on_the_page(monkeypatch: pytest.MonkeyPatch) -> None:
    found = [*reasons.scan(), reasons.Written("event", "BrandNewReason", "reconciler/x.py:1")]
    monkeypatch.setattr(metrics, "written", lambda: found)
    monkeypatch.setitem(metrics.EVENTS, "BrandNewReason",
                        metrics.About("Stage", "Warning", "a reason nobody documented"))

    assert ("| Stage | Warning | `BrandNewReason` | a reason nobody documented |"
            in metrics.render())
    assert metrics.main(["--check"]) == 1


def test_a_description_of_a_reason_the_code_dropped_stops_the_page(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = [w for w in reasons.scan() if w.reason != "RolloutsRestarted"]
    monkeypatch.setattr(metrics, "written", lambda: found)

    with pytest.raises(metrics.Undescribed, match="not written by the code any more: "
                                                      "event RolloutsRestarted"):
        metrics.render()


SOURCE = '''
def reconcile(ctx, rest, obj, phase):
    ctx.events.emit(obj, type="Normal", reason="Emitted", message="m")
    _set_condition(obj, status="False", reason="SetOnly", message="m")
    _set_condition(obj, status="False", reason="SetAndEmitted", message="m",
                   event_type="Warning")
    events.append(Event("Warning", "Planned", "m"))
    found = [Anomaly("Anomalous", "subject", "m")]
    reason = "Picked" if phase else "PickedToo"
    deny(uid, code=400, reason="BadRequest", message="m")
    raise Requeue(after=1, reason="not an object's reason")
    return "Unknown", "Returned", "m"

FINDING_REASONS = {"a-kind": "FromTable"}
'''


def test_the_scan_finds_reasons_where_the_code_writes_them(tmp_path: Path) -> None:
    path = tmp_path / "module.py"
    path.write_text(textwrap.dedent(SOURCE))

    found = {(w.record, w.reason) for w in reasons.scan_file(path, root=tmp_path)}

    assert found == {
        ("event", "Emitted"), ("condition", "SetOnly"), ("condition", "SetAndEmitted"),
        ("event", "SetAndEmitted"), ("event", "Planned"), ("event", "Anomalous"),
        ("condition", "Picked"), ("condition", "PickedToo"), ("condition", "Returned"),
        ("event", "FromTable"),
    }


def test_a_reason_built_at_run_time_fails_the_scan(tmp_path: Path) -> None:
    path = tmp_path / "module.py"
    path.write_text('def f(phase):\n    return "False", f"Verification{phase}", "m"\n')

    with pytest.raises(reasons.Unlisted, match=r"module\.py:2: a reason built at run time"):
        reasons.scan_file(path, root=tmp_path)
