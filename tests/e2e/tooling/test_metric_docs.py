"""docs/metrics.md is what the processes' collectors say (support/harness/metric_docs.py),
so the metrics reference cannot drift from the code."""

from __future__ import annotations

import re

import pytest
from prometheus_client import CollectorRegistry, Counter

from harness import metric_docs
from testkit.paths import REPO_ROOT


def test_the_metrics_reference_is_current() -> None:
    assert metric_docs.PAGE.read_text() == metric_docs.render(), "run make metric-docs"


def test_every_metric_the_alerts_and_the_dashboard_query_is_on_the_page() -> None:
    page = metric_docs.PAGE.read_text()
    files = REPO_ROOT / "charts" / "rollgate" / "files"
    queried = set()
    for name in ("alerts.yaml", "dashboard.json"):
        queried |= set(re.findall(r"rollgate_\w+", (files / name).read_text()))
    assert queried
    for name in sorted(queried):
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        assert f"`{name}`" in page or f"`{base}_bucket`" in page, name


def test_a_new_metric_makes_the_page_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = Counter("rollgate_brand_new", "a metric nobody documented", ["namespace"],
                    registry=CollectorRegistry())
    parts = metric_docs.sections()
    parts["Webhook (`rollgate webhook`)"].append(extra)
    monkeypatch.setattr(metric_docs, "sections", lambda: parts)

    page = metric_docs.render()

    assert ("| `rollgate_brand_new_total` | counter | `namespace` | "
            "a metric nobody documented |") in page
    assert metric_docs.main(["--check"]) == 1
