"""docs/metrics.md, every metric rollgate exports, generated from the collectors the
processes build, so the reference cannot drift from the code.

A metric's row: the name as Prometheus scrapes it (counters with ``_total``, histograms
with their ``_bucket``, ``_sum`` and ``_count`` series), its type, its labels and its help
text. ``make metric-docs`` (``python -m harness.metric_docs``) rewrites the page;
``--check`` only says whether it is current, and a test fails when it is not.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence

from prometheus_client.metrics import MetricWrapperBase

from harness import generated_page
from harness.paths import REPO_ROOT
from reconciler.plugins.metrics import PluginMetrics
from reconciler.runtime.health import Metrics
from reconciler.verification.metrics import VerificationMetrics
from webhook import metrics as webhook_metrics

PAGE = REPO_ROOT / "docs" / "metrics.md"
HEADER = """# Metrics, conditions and events

Every metric rollgate exports, generated from the collectors its processes build by
`make metric-docs`; a test fails when this page and the code disagree. The webhook serves
them on `/metrics` of its HTTPS port (every gunicorn worker's values added up), the
reconciler on `/metrics` of `--bind-address`. The alerts and the dashboard that read them
are in [Alerts and dashboard](operating.md#alerts-and-dashboard).

Condition and Event reasons are listed with what they mean next to the feature that
writes them:

- Stage verification: observe mode's Warning Events (`DuplicateVerificationRuns`,
  `StaleVerificationRun`, `VerifiedDespiteFailure`, `VerificationNotRecorded`) in
  [Observe mode](verification.md#observe-mode-default); engine mode's Events and the Stage
  conditions it writes in [Engine mode](verification.md#engine-mode);
- plugins: the `PluginsSynced` condition, its reasons and the audit findings' Events in
  [RolloutManager plugins](plugins.md);
- the webhook's own Pod: `InvalidCertificate` and `CertificateExpired` in
  [Components and flags](components.md).
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _row(collector: MetricWrapperBase) -> str:
    family = next(iter(collector.describe()))
    name = {"counter": f"`{family.name}_total`",
            "histogram": f"`{family.name}_bucket`, `_sum`, `_count`"}.get(
                family.type, f"`{family.name}`")
    # prometheus-client keeps a metric's label names only on the wrapper.
    labels = ", ".join(f"`{label}`" for label in getattr(collector, "_labelnames", ()))
    return f"| {name} | {family.type} | {labels} | {_cell(family.documentation)} |"


def _table(collectors: Iterable[MetricWrapperBase]) -> list[str]:
    rows = sorted(_row(c) for c in collectors)
    return ["| metric | type | labels | meaning |", "|---|---|---|---|", *rows]


def _owned(holder: object) -> list[MetricWrapperBase]:
    """The metrics an object of metrics holds as attributes."""
    return [value for value in vars(holder).values() if isinstance(value, MetricWrapperBase)]


def sections() -> dict[str, list[MetricWrapperBase]]:
    """Each process's collectors: the webhook's, and the reconciler's runtime and
    features (the runtime serves its own and every feature's)."""
    return {
        "Webhook (`rollgate webhook`)": list(webhook_metrics.collectors()),
        "Reconciler (`rollgate reconciler`)": [
            *_owned(Metrics()), *VerificationMetrics().collectors, *PluginMetrics().collectors],
    }


def render(parts: dict[str, list[MetricWrapperBase]] | None = None) -> str:
    """The whole page."""
    lines = [HEADER]
    for title, collectors in (parts if parts is not None else sections()).items():
        lines += [f"## {title}", "", *_table(collectors), ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    return generated_page.main(argv, page=PAGE, render=render,
                               prog="python -m harness.metric_docs",
                               description=(__doc__ or "").splitlines()[0],
                               target="metric-docs")

if __name__ == "__main__":
    sys.exit(main())
