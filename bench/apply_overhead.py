"""What admission adds to a Stage create: no admission, rollgate's webhook, a CEL policy.

Starts a real control plane (support/harness/plane.py: etcd, kube-apiserver, and rollgate's
webhook, gunicorn over TLS, registered by URL and looking templates up through the API)
and creates valid Kargo v1 Stages (``spec.requestedFreight`` and ``spec.verification``
naming an AnalysisTemplate and a ClusterAnalysisTemplate that exist, so the webhook has
nothing to warn about) with the official Python client, one at a time as ``kubectl
apply`` does, under three set-ups:

- ``none``: no webhook configuration, no policy;
- ``rollgate``: the two webhook configurations from manifests/webhook, matchConditions
  included (a Stage create calls validate-stages only: one round trip);
- ``cel``: no webhook; a ValidatingAdmissionPolicy written here, with five of the rules
  rollgate checks said in CEL (at least one template, template names are DNS-1123
  subdomains, no template twice, no arg name twice, no reserved run label), bound with
  the webhook's namespace selector.

Each round runs every set-up once, in an order rotated from round to round so that load
from others on a shared machine falls on all three alike; a set-up is switched on and
waited for (server-side dry runs show it active), warmed up, then ``--creates`` creates
are timed on the client, and its Stages are deleted (not timed). Prints per set-up the
median, p90 and p99 of a create; the overheads over ``none`` (difference of medians, and
of p99s); the median over rounds of each round's median overhead, which drifting load
disturbs less; the ratio of rollgate's overhead to the CEL policy's; and the load average.
Nothing is asserted about the figures.

    .venv/bin/python -m bench.apply_overhead [--rounds 10] [--creates 100] [--warmup 20]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import ssl
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes import client

from bench.stats import report
from harness.host_rollgate import HostRollgate
from harness.kits.plane import plane_with_rollgate
from schemas.constants import RESERVED_LABEL_KEYS, RESERVED_LABEL_PREFIX
from schemas.kinds import GROUP_KARGO
from testkit import objects

ROOT = Path(__file__).resolve().parent.parent

NS = "bench-apply"
KARGO = (GROUP_KARGO, "v1alpha1")
SETUPS = ("none", "rollgate", "cel")
POLICY = "bench-stage-verification"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def template(kind: str, name: str, metric: str) -> dict[str, Any]:
    return objects.analysis_template(
        name, namespace=NS, cluster=kind == "ClusterAnalysisTemplate",
        args=[{"name": "service"}],
        metrics=[{"name": metric, "provider": {"web": {
            "url": "http://metrics.example/{{args.service}}"}}}])


def stage(name: str, *, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Stage every set-up admits without a warning (``labels`` can break that)."""
    return objects.stage(name, verification=objects.verification(
        "success-rate", ("latency",), args=[{"name": "service", "value": "checkout"}],
        run_metadata={"labels": labels or {"team": "web"}}))


def policy_objects(namespace_selector: dict[str, Any]) -> list[dict[str, Any]]:
    """The CEL policy and its binding: some of rollgate's Stage rules, as a cluster
    administrator would write them without rollgate."""
    v = "object.spec.verification"
    kind = "(has({0}.kind) ? {0}.kind : 'AnalysisTemplate')"
    reserved = ", ".join(f"'{key}'" for key in sorted(RESERVED_LABEL_KEYS))
    validations = [
        (f"has({v}.analysisTemplates) && size({v}.analysisTemplates) > 0",
         "spec.verification.analysisTemplates: at least one template is required"),
        (f"!has({v}.analysisTemplates) || {v}.analysisTemplates.all(t, size(t.name) <= 253"
         f" && t.name.matches(r'{DNS_SUBDOMAIN}'))",
         "spec.verification.analysisTemplates: names must be DNS-1123 subdomains"),
        (f"!has({v}.analysisTemplates) || {v}.analysisTemplates.all(t, "
         f"{v}.analysisTemplates.exists_one(u, u.name == t.name && "
         f"{kind.format('u')} == {kind.format('t')}))",
         "spec.verification.analysisTemplates: a template is listed twice"),
        (f"!has({v}.args) || {v}.args.all(a, {v}.args.exists_one(b, b.name == a.name))",
         "spec.verification.args: an arg name is set twice"),
        (f"!has({v}.analysisRunMetadata) || !has({v}.analysisRunMetadata.labels) || "
         f"{v}.analysisRunMetadata.labels.all(k, !k.startsWith('{RESERVED_LABEL_PREFIX}')"
         f" && !(k in [{reserved}]))",
         "spec.verification.analysisRunMetadata.labels: the label is reserved"),
    ]
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [KARGO[0]], "apiVersions": [KARGO[1]],
                "operations": ["CREATE", "UPDATE"], "resources": ["stages"],
            }]},
            "matchConditions": [{
                "name": "has-verification",
                "expression": "has(object.spec) && has(object.spec.verification)",
            }],
            "validations": [{"expression": e, "message": m} for e, m in validations],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY},
        "spec": {"policyName": POLICY, "validationActions": ["Deny"],
                 "matchResources": {"namespaceSelector": namespace_selector}},
    }
    return [policy, binding]


# ----------------------------------------------------------------------- set-ups


class Setups:
    """Switches the plane between the three set-ups and waits until the API server
    admits by the one asked for (it picks configuration changes up asynchronously)."""

    def __init__(self, rollgate: HostRollgate) -> None:
        self.rollgate = rollgate
        self.plane = rollgate.plane
        webhook = next(c for c in rollgate.webhook_configurations()
                       if c["kind"] == "ValidatingWebhookConfiguration")["webhooks"][0]
        self.policy = policy_objects(webhook["namespaceSelector"])
        self.current = "rollgate"  # HostRollgate.start() registered the webhooks
        self.probe = json.dumps({**stage("probe", labels={"rollgate.dev/attempt": "1"}),
                                 "metadata": {"name": "probe", "namespace": NS}})
        self.valid = json.dumps({**stage("probe-valid"),
                                 "metadata": {"name": "probe-valid", "namespace": NS}})

    def _dry_run(self, body: str) -> tuple[bool, str]:
        out = self.plane.kubectl("create", "--dry-run=server", "-f", "-", input=body,
                                 check=False)
        return out.returncode == 0, out.stderr + out.stdout

    def _wait(self, admitted_by: Callable[[bool, str], bool], what: str) -> None:
        deadline = time.monotonic() + 60
        while not admitted_by(*self._dry_run(self.probe)):
            if time.monotonic() > deadline:
                raise SystemExit(f"the API server did not switch to {what} within 60 s")
            time.sleep(0.2)

    def switch(self, setup: str) -> None:
        if setup == self.current:
            return
        if self.current == "rollgate":
            self.rollgate.unregister_webhooks()
        if self.current == "cel":
            self.plane.kubectl("delete", "--ignore-not-found",
                               f"validatingadmissionpolicybinding/{POLICY}",
                               f"validatingadmissionpolicy/{POLICY}")
        if setup == "rollgate":
            self.rollgate.register_webhooks()
            self._wait(lambda ok, out: not ok and "validate-stages.rollgate.dev" in out,
                       "rollgate's webhook")
        elif setup == "cel":
            self.plane.apply_objects(self.policy)
            self._wait(lambda ok, out: not ok and POLICY in out, "the CEL policy")
        else:
            self._wait(lambda ok, out: ok, "no admission")
        # The probe is denied by both rules; the Stage the bench creates must get
        # through, and without a warning (a warning would mean the webhook found more
        # to say, or a look-up failed).
        ok, out = self._dry_run(self.valid)
        if not ok or "Warning" in out:
            raise SystemExit(f"{setup}: the bench's Stage is not admitted cleanly:\n{out}")
        self.current = setup


# --------------------------------------------------------------------- measuring


def quantile(ordered: list[float], q: float) -> float:
    """Nearest rank, as bench/stats.py."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def summary_ms(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(x * 1e3 for x in seconds)
    return {"n": len(ordered), "median_ms": round(statistics.median(ordered), 3),
            "p90_ms": round(quantile(ordered, 0.9), 3),
            "p99_ms": round(quantile(ordered, 0.99), 3), "worst_ms": round(ordered[-1], 3)}


def timed_creates(co: client.CustomObjectsApi, prefix: str, count: int) -> list[float]:
    out = []
    for i in range(count):
        body = stage(f"{prefix}-{i}")
        started = time.perf_counter()
        co.create_namespaced_custom_object(*KARGO, NS, "stages", body)
        out.append(time.perf_counter() - started)
    return out


_SAMPLE = re.compile(r'^(\w+)\{(.*)\} (\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def mean_ms(metrics_text: str, histogram: str, **labels: str) -> float | None:
    """Mean of a Prometheus histogram (``_sum`` over ``_count``) over the series whose
    labels include ``labels``, in milliseconds; None when it has no observations."""
    totals = {"sum": 0.0, "count": 0.0}
    for line in metrics_text.splitlines():
        match = _SAMPLE.match(line)
        if not match or not match.group(1).startswith(histogram + "_"):
            continue
        part = match.group(1).removeprefix(histogram + "_")
        found = dict(_LABEL.findall(match.group(2)))
        if part in totals and all(found.get(k) == v for k, v in labels.items()):
            totals[part] += float(match.group(3))
    return round(totals["sum"] / totals["count"] * 1e3, 3) if totals["count"] else None


def breakdown(rollgate: HostRollgate) -> dict[str, float | None]:
    """Where the time of one webhook call goes, from the API server's and the webhook's
    own histograms (means over the whole run, warm-ups included, denied probes not; the
    API server records CEL policy checks only when they deny, so there is no such
    figure for the policy)."""
    apiserver = rollgate.plane.kubectl("get", "--raw", "/metrics").stdout
    context = ssl.create_default_context(cafile=str(rollgate.certificates().ca_cert))
    with urllib.request.urlopen(rollgate.webhook_url + "/metrics", context=context,
                                timeout=10) as resp:
        webhook = resp.read().decode()
    return {
        "apiserver_webhook_call_mean_ms": mean_ms(
            apiserver, "apiserver_admission_webhook_admission_duration_seconds",
            name="validate-stages.rollgate.dev", operation="CREATE", rejected="false"),
        "webhook_handler_mean_ms": mean_ms(
            webhook, "rollgate_webhook_request_duration_seconds",
            endpoint="/validate/stages", result="allowed"),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--creates", type=int, default=100, help="timed creates per set-up per round")
    p.add_argument("--warmup", type=int, default=20, help="untimed creates after each switch")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = p.parse_args(argv)
    load_before = [round(x, 2) for x in os.getloadavg()]

    with plane_with_rollgate(webhook=True) as rollgate:
        plane = rollgate.plane
        co = client.CustomObjectsApi(plane.api_client())
        plane.kubectl("create", "namespace", NS)
        plane.apply_objects([template("AnalysisTemplate", "success-rate", "success-rate"),
                             template("ClusterAnalysisTemplate", "latency", "latency")])
        setups = Setups(rollgate)
        latencies: dict[str, list[float]] = {s: [] for s in SETUPS}
        per_round: list[dict[str, float]] = []
        for rnd in range(args.rounds):
            medians: dict[str, float] = {}
            for setup in SETUPS[rnd % 3:] + SETUPS[:rnd % 3]:
                setups.switch(setup)
                timed_creates(co, f"warm-{setup}-{rnd}", args.warmup)
                done = timed_creates(co, f"{setup}-{rnd}", args.creates)
                latencies[setup] += done
                medians[setup] = statistics.median(done) * 1e3
                co.delete_collection_namespaced_custom_object(*KARGO, NS, "stages")
            per_round.append(medians)
            print(f"round {rnd + 1}/{args.rounds}: " + ", ".join(
                f"{s} {medians[s]:.2f} ms" for s in SETUPS), file=sys.stderr, flush=True)
        means = breakdown(rollgate)

    summaries = {s: summary_ms(latencies[s]) for s in SETUPS}
    base = summaries["none"]
    overheads = {s: {"median_ms": round(summaries[s]["median_ms"] - base["median_ms"], 3),
                     "p99_ms": round(summaries[s]["p99_ms"] - base["p99_ms"], 3),
                     "median_of_round_medians_ms": round(statistics.median(
                         r[s] - r["none"] for r in per_round), 3)}
                 for s in ("rollgate", "cel")}
    cel = overheads["cel"]["median_of_round_medians_ms"]
    result = {
        "rounds": args.rounds, "creates_per_setup_per_round": args.creates,
        "create": summaries,
        "overhead_over_none": overheads,
        "rollgate_to_cel_overhead_ratio": (
            round(overheads["rollgate"]["median_of_round_medians_ms"] / cel, 2)
            if cel > 0 else None),
        "means_over_the_run": means,
        "per_round_median_ms": [{s: round(r[s], 3) for s in SETUPS} for r in per_round],
        "load_average_at_start": load_before,
    }
    report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
