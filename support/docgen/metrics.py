"""docs/metrics.md, every metric rollgate exports and every condition and Event reason it
writes, generated from the code so the reference cannot drift from it.

A metric's row comes from the collectors the processes build: the name as Prometheus
scrapes it (counters with ``_total``, histograms with their ``_bucket``, ``_sum`` and
``_count`` series), its type, its labels and its help text. The reasons are the ones
``docgen.reasons`` finds in the product's source; what each means, on which object, is
described here (``CONDITIONS``, ``EVENTS``), and the page is not written while a reason
the code writes has no description or a description has no reason left in the code.
``make metric-docs`` (``python -m docgen.metrics``) rewrites the page; ``--check``
only says whether it is current, and a test fails when it is not.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from prometheus_client.metrics import MetricWrapperBase

from docgen import cli, reasons
from reconciler.plugins.decisions import DOWNLOAD_RETRY_SECONDS
from reconciler.plugins.metrics import PluginMetrics
from reconciler.plugins.render import CONFIG_MAP_NAME
from reconciler.runtime.health import Metrics
from reconciler.verification.metrics import VerificationMetrics
from testkit.paths import REPO_ROOT
from webhook import metrics as webhook_metrics

PAGE = REPO_ROOT / "docs" / "metrics.md"
HEADER = """# Metrics, conditions and events

Every metric rollgate exports and every condition reason and Event reason it writes,
generated from the code by `make metric-docs`; a test fails when this page and the code
disagree. How the features behave is in [Stage verification](verification.md) and
[RolloutManager plugins](plugins.md).
"""
METRICS = """## Metrics

The webhook serves them on `/metrics` of its HTTPS port (every gunicorn worker's values
added up), the reconciler on `/metrics` of `--bind-address`. The alerts and the dashboard
that read them are in [Alerts and dashboard](operating.md#alerts-and-dashboard).
"""
CONDITION_REASONS = """## Condition reasons

The conditions rollgate sets in `status.conditions` (other conditions are left as they
are), by reason. `kubectl describe` shows them with their message.
"""
EVENT_REASONS = """## Event reasons

The core/v1 Events rollgate records, by reason; `kubectl describe` on the object lists
them.
"""


class About(NamedTuple):
    """What a reason says: on which object, under which condition type or Event type."""

    on: str  # the object's kind
    what: str  # condition: its type and status; Event: Normal or Warning
    meaning: str


_RETRY = f"retried every {DOWNLOAD_RETRY_SECONDS:g} s"
_KEPT = f"ConfigMap `{CONFIG_MAP_NAME}` and the Deployment are left as they were"

CONDITIONS: dict[str, About] = {
    "Verified": About("Stage", "`Verified` True",
                      "a verification of the current freight succeeded"),
    "WaitingForVerification": About(
        "Stage", "`Verified` Unknown",
        "no verification of the current freight has started yet, or the latest waits "
        "(the message says for what)"),
    "VerificationPending": About("Stage", "`Verified` Unknown",
                                 "the latest verification's AnalysisRun has not started"),
    "VerificationRunning": About("Stage", "`Verified` Unknown",
                                 "the latest verification's AnalysisRun is running"),
    "VerificationFailed": About("Stage", "`Verified` False",
                                "the latest verification Failed"),
    "VerificationError": About(
        "Stage", "`Verified` False",
        "the latest verification ended in Error: its AnalysisRun errored, or could not "
        "be built or created (the message says why)"),
    "VerificationAborted": About("Stage", "`Verified` False",
                                 "the latest verification was aborted (abort annotation)"),
    "VerificationInconclusive": About("Stage", "`Verified` Unknown",
                                      "the latest verification was Inconclusive"),
    "UnknownVerificationPhase": About("Stage", "`Verified` Unknown",
                                      "the latest verification is in a phase rollgate "
                                      "does not know"),
    "NoFreight": About("Stage", "`Verified` Unknown",
                       "the Stage has a verification but no current Freight to verify"),
    "Synced": About("RolloutManager", "`PluginsSynced` True",
                    f"ConfigMap `{CONFIG_MAP_NAME}` holds this RolloutManager's plugins "
                    "(the message says whether the Deployment has them)"),
    "NotOwner": About("RolloutManager", "`PluginsSynced` False",
                      "an older RolloutManager in the namespace owns the plugin "
                      "configuration; this one's plugins are not synced"),
    "InvalidSpec": About("RolloutManager", "`PluginsSynced` False",
                         "`spec.plugins` has validation errors; nothing is written"),
    "DigestMismatch": About("RolloutManager", "`PluginsSynced` False",
                            f"a plugin's download does not match its sha256; {_KEPT}"),
    "DownloadFailed": About("RolloutManager", "`PluginsSynced` False",
                            f"a plugin could not be downloaded to check its sha256; {_KEPT}, "
                            f"{_RETRY}"),
    "NotExecutable": About("RolloutManager", "`PluginsSynced` False",
                           f"a downloaded plugin is no executable Argo Rollouts could run; "
                           f"{_KEPT}"),
}

_AUDIT = "audit mode (next to argo-rollouts-manager):"
EVENTS: dict[str, About] = {
    "VerificationStarted": About("Stage", "Normal",
                                 "engine mode created a verification's AnalysisRun"),
    "VerificationSucceeded": About("Stage", "Normal", "a verification finished Successful"),
    "VerificationFailed": About("Stage", "Warning", "a verification finished Failed"),
    "VerificationError": About("Stage", "Warning", "a verification finished in Error"),
    "VerificationInconclusive": About("Stage", "Warning",
                                      "a verification finished Inconclusive"),
    "VerificationAborted": About("Stage", "Normal",
                                 "a verification was aborted (abort annotation)"),
    "VerifierConflict": About("Stage", "Warning",
                              "engine mode found another verifier acting on the current "
                              "freight and stands back (no run, no write)"),
    "AbortIgnored": About("Stage", "Warning",
                          "the abort annotation names a verification that is not the latest"),
    "ReverifyIgnored": About("Stage", "Warning",
                             "the reverify annotation names a verification that is not the "
                             "latest"),
    "DuplicateVerificationRuns": About(
        "Stage", "Warning",
        "observe mode: two or more AnalysisRuns verify one freight collection and one is "
        "in no verification (no reverify started it)"),
    "StaleVerificationRun": About(
        "Stage", "Warning",
        "observe mode: an AnalysisRun is still Pending or Running for freight that is no "
        "longer current"),
    "VerifiedDespiteFailure": About(
        "Stage", "Warning",
        "observe mode: the latest verification of the current freight Failed while a "
        "Freight's `status.verifiedIn` still names the Stage"),
    "VerificationNotRecorded": About(
        "Stage", "Warning",
        "observe mode: the current verification's AnalysisRun finished but the verifier "
        "has not recorded the result"),
    "PluginsSynced": About("RolloutManager", "Normal",
                           f"ConfigMap `{CONFIG_MAP_NAME}` was updated to the plugins"),
    "PluginEntriesDropped": About("RolloutManager", "Warning",
                                  f"ConfigMap `{CONFIG_MAP_NAME}` had plugin entries this "
                                  "RolloutManager does not list; they were replaced"),
    "RolloutsRestarted": About("RolloutManager", "Normal",
                               "the plugin configuration changed: rolling restart of the "
                               "Argo Rollouts Deployment"),
    "NotOwner": About("RolloutManager", "Warning",
                      "with the `PluginsSynced` condition of that reason"),
    "InvalidSpec": About("RolloutManager", "Warning",
                         "`spec.plugins` has validation errors: with the `PluginsSynced` "
                         "condition of that reason, or found in audit mode"),
    "DigestMismatch": About("RolloutManager", "Warning",
                            "digest pre-flight: with the `PluginsSynced` condition of that "
                            "reason, or found in audit mode"),
    "DownloadFailed": About("RolloutManager", "Warning",
                            "digest pre-flight: with the `PluginsSynced` condition of that "
                            "reason, or found in audit mode"),
    "NotExecutable": About("RolloutManager", "Warning",
                           "digest pre-flight: with the `PluginsSynced` condition of that "
                           "reason, or found in audit mode"),
    "PluginsNotRendered": About("RolloutManager", "Warning",
                                f"{_AUDIT} no ConfigMap, or a key that is no YAML list"),
    "PluginMissing": About("RolloutManager", "Warning",
                           f"{_AUDIT} a spec plugin is not in its ConfigMap key"),
    "PluginUnlisted": About("RolloutManager", "Warning",
                            f"{_AUDIT} the ConfigMap lists a plugin the spec does not"),
    "PluginLocationDiffers": About("RolloutManager", "Warning",
                                   f"{_AUDIT} a plugin of the same name, at another location"),
    "PluginDigestDropped": About("RolloutManager", "Warning",
                                 f"{_AUDIT} the spec has a sha256 and the ConfigMap entry "
                                 "has none"),
    "PluginDigestDiffers": About("RolloutManager", "Warning",
                                 f"{_AUDIT} both have a sha256 and they differ"),
    "PluginRefusedByOperator": About("RolloutManager", "Warning",
                                     f"{_AUDIT} the operator refuses the spec "
                                     "(`argoproj-labs/openshift` as a traffic plugin), so "
                                     "nothing of it is rendered"),
    "PluginsRemoved": About("ConfigMap", "Normal",
                            "no RolloutManager left in the namespace: the plugin keys "
                            "rollgate owned were removed"),
    "InvalidCertificate": About("Pod", "Warning",
                                "the webhook cannot start: its certificate and key cannot "
                                "serve together (on the webhook's own Pod)"),
    "CertificateExpired": About("Pod", "Warning",
                                "the serving certificate has expired; the webhook serves "
                                "anyway, and the API server refuses every call until the "
                                "Secret holds a renewed one (on the webhook's own Pod)"),
}


class Undescribed(ValueError):
    """The reasons the code writes and the ones described here differ."""


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


def written() -> list[reasons.Written]:
    """The reasons the product's source writes (a test adds one)."""
    return reasons.scan()


def _described(found: Sequence[reasons.Written]) -> None:
    """Fail unless every reason found is described and every description is used."""
    tables: Mapping[str, Mapping[str, About]] = {"condition": CONDITIONS, "event": EVENTS}
    seen = {(w.record, w.reason) for w in found}
    missing = sorted({f"{w.record} {w.reason} ({w.where})" for w in found
                      if w.reason not in tables[w.record]})
    stale = sorted(f"{record} {reason}" for record, table in tables.items()
                   for reason in table if (record, reason) not in seen)
    problems = [f"not described in docgen/metrics.py: {m}" for m in missing]
    problems += [f"described but not written by the code any more: {s}" for s in stale]
    if problems:
        raise Undescribed("\n".join(problems))


def _reasons(title: str, head: str, table: Mapping[str, About]) -> list[str]:
    rows = [f"| {about.on} | {about.what} | `{reason}` | {_cell(about.meaning)} |"
            for reason, about in table.items()]
    return [title, f"| object | {head} | reason | meaning |", "|---|---|---|---|", *rows, ""]


def render(parts: dict[str, list[MetricWrapperBase]] | None = None) -> str:
    """The whole page; ``Undescribed`` when the reasons and their descriptions differ."""
    _described(written())
    lines = [HEADER, METRICS]
    for title, collectors in (parts if parts is not None else sections()).items():
        lines += [f"### {title}", "", *_table(collectors), ""]
    lines += _reasons(CONDITION_REASONS, "condition", CONDITIONS)
    lines += _reasons(EVENT_REASONS, "type", EVENTS)
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return cli.main(argv, page=PAGE, render=render,
                        prog="python -m docgen.metrics",
                        description=(__doc__ or "").splitlines()[0],
                        target="metric-docs")
    except Undescribed as exc:
        print(f"{PAGE.relative_to(REPO_ROOT)} not written:\n{exc}", file=sys.stderr)
        return 1

if __name__ == "__main__":
    sys.exit(main())
