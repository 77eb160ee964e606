"""What admission adds to a Stage create: no admission, rollgate's webhook, the Go no-op
webhook, a CEL policy.

Starts a real control plane (support/harness/plane.py: etcd, kube-apiserver, and rollgate's
webhook over TLS, registered by URL and looking templates up through the API)
and creates valid Kargo v1 Stages (``spec.requestedFreight`` and ``spec.verification``
naming an AnalysisTemplate and a ClusterAnalysisTemplate that exist, so the webhook has
nothing to warn about) with the official Python client, one at a time as ``kubectl
apply`` does, under four set-ups:

- ``none``: no webhook configuration, no policy;
- ``rollgate``: the two webhook configurations from manifests/webhook, matchConditions
  included (a Stage create calls validate-stages only: one round trip);
- ``noop``: the floor of any webhook: hack/noop-webhook (Go, standard library, allows
  everything; HTTP/1.1 over TLS 1.2+ with AEAD suites, as rollgate serves), on the same
  host with the same certificate, registered exactly as rollgate's validating webhook
  (harness.noop_webhook);
- ``cel``: no webhook; a ValidatingAdmissionPolicy written here, with five of the rules
  rollgate checks said in CEL (at least one template, template names are DNS-1123
  subdomains, no template twice, no arg name twice, no reserved run label), bound with
  the webhook's namespace selector.

Each round runs every set-up once, in an order rotated from round to round so that load
from others on a shared machine falls on all of them alike; a set-up is switched on and
waited for (server-side dry runs show it active), warmed up, then ``--creates`` creates
are timed on the client, and its Stages are deleted (not timed). Prints per set-up the
median, p90 and p99 of a create; the overheads over ``none`` (p50: difference of
medians; p99: the set-up's p99 minus the bare median) and the median over rounds of each
round's median overhead, which drifting load disturbs less; rollgate's overhead as a
ratio to the Go no-op's, at p50 and p99 and per round, and to the CEL policy's; the
API server's own mean time per webhook call under each set-up (its
``apiserver_admission_webhook_admission_duration_seconds``, during the timed creates);
rollgate's own handler time (``rollgate_webhook_request_duration_seconds``); and the
load average. Nothing is asserted about the figures. ``--base-tree DIR`` adds
``rollgate-base``: the webhook of another checkout (an older commit), registered as
rollgate's, for a before/after in one run.

bench/apply_overhead_node.py runs the same set-ups on the node: rollgate installed by
its chart and the no-op as pods, each called through its Service.

    .venv/bin/python -m bench.apply_overhead [--rounds 10] [--creates 100] [--warmup 20]
                                             [--base-tree DIR]
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
from typing import Any, Protocol

from kubernetes import client

import certs
from bench.stats import report
from harness import noop_webhook
from harness.host_rollgate import HostRollgate
from harness.kits.plane import plane_with_rollgate
from harness.plane import ControlPlane
from schemas.constants import RESERVED_LABEL_KEYS, RESERVED_LABEL_PREFIX
from schemas.kinds import GROUP_KARGO, VERSION_KARGO
from testkit import objects

ROOT = Path(__file__).resolve().parent.parent

NS = "bench-apply"
SETUPS = ("none", "rollgate", "noop", "cel")
BASE = "rollgate-base"  # rollgate from another checkout (--base-tree)
VALIDATE_STAGES = "validate-stages.rollgate.dev"
POLICY = "bench-stage-verification"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def template(kind: str, name: str, metric: str) -> dict[str, Any]:
    return objects.analysis_template(
        name, namespace=NS, cluster=kind == "ClusterAnalysisTemplate",
        args=[{"name": "service"}],
        metrics=[{"name": metric, "provider": {"web": {
            "url": "http://metrics.example/{{args.service}}"}}}])


def stage(name: str, *, namespace: str | None = None,
          labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Stage every set-up admits without a warning (``labels`` can break that)."""
    return objects.stage(name, namespace=namespace, verification=objects.verification(
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
                "apiGroups": [GROUP_KARGO], "apiVersions": [VERSION_KARGO],
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


_SAMPLE = re.compile(r'^(\w+)\{(.*)\} (\S+)$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def histogram(metrics_text: str, metric: str, /, **labels: str) -> dict[str, float]:
    """``sum`` and ``count`` of a Prometheus histogram over the series whose labels
    include ``labels``."""
    totals = {"sum": 0.0, "count": 0.0}
    for line in metrics_text.splitlines():
        match = _SAMPLE.match(line)
        if not match or not match.group(1).startswith(metric + "_"):
            continue
        part = match.group(1).removeprefix(metric + "_")
        found = dict(_LABEL.findall(match.group(2)))
        if part in totals and all(found.get(k) == v for k, v in labels.items()):
            totals[part] += float(match.group(3))
    return totals


def mean_ms(metrics_text: str, metric: str, /, **labels: str) -> float | None:
    """Mean of a Prometheus histogram (``_sum`` over ``_count``) in milliseconds; None
    when it has no observations."""
    totals = histogram(metrics_text, metric, **labels)
    return round(totals["sum"] / totals["count"] * 1e3, 3) if totals["count"] else None


WEBHOOK_CALLS = "apiserver_admission_webhook_admission_duration_seconds"


def webhook_calls(plane: ControlPlane, webhook: str) -> float:
    """How many times the API server has called ``webhook`` (its own metric)."""
    text = plane.kubectl("get", "--raw", "/metrics").stdout
    return histogram(text, WEBHOOK_CALLS, name=webhook)["count"]


class Setups(Protocol):
    """Switches a cluster between the set-ups and waits until the API server admits by
    the one asked for."""

    current: str
    plane: ControlPlane

    def switch(self, setup: str) -> None: ...

    def webhook(self, setup: str) -> str | None:
        """The name of the webhook the API server calls for a Stage create under
        ``setup``, None for a set-up without one."""


Toggle = tuple[Callable[[], None], Callable[[], None]]


class Switcher:
    """The switching both clusters share: the CEL policy, the no-op's registration, and
    the dry runs that show which set-up the API server admits by (it picks configuration
    changes up asynchronously). ``webhooks`` registers and removes rollgate's webhooks
    (and, for ``rollgate-base``, another checkout's), waiting until that shows; the
    first is registered at the start."""

    def __init__(self, plane: ControlPlane, *, validating: dict[str, Any],
                 noop_client: Callable[[str], dict[str, Any]],
                 webhooks: dict[str, Toggle]) -> None:
        self.plane = plane
        webhook = validating["webhooks"][0]
        self.policy = policy_objects(webhook["namespaceSelector"])
        self.noop = noop_webhook.registration(validating, client_config=noop_client)
        self.noop_name = noop_webhook.webhook_name(VALIDATE_STAGES)
        self.webhooks = webhooks
        self.current = next(iter(webhooks))
        self.probe = json.dumps(stage("probe", namespace=NS,
                                      labels={"rollgate.dev/attempt": "1"}))
        self.valid = json.dumps(stage("probe-valid", namespace=NS))

    def _dry_run(self, body: str) -> tuple[bool, str]:
        out = self.plane.kubectl("create", "--dry-run=server", "-f", "-", input=body,
                                 check=False)
        return out.returncode == 0, out.stderr + out.stdout

    def _wait(self, done: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 120
        while not done():
            if time.monotonic() > deadline:
                raise SystemExit(f"the API server did not switch to {what} within 120 s")
            time.sleep(0.2)

    def _noop_called(self) -> bool:
        """A dry run of the probe reached the no-op (it allows everything, so only the
        API server's count of its calls shows it)."""
        before = webhook_calls(self.plane, self.noop_name)
        self._dry_run(self.probe)
        return webhook_calls(self.plane, self.noop_name) > before

    def switch(self, setup: str) -> None:
        if setup == self.current:
            return
        if self.current in self.webhooks:
            self.webhooks[self.current][1]()
        elif self.current == "cel":
            self.plane.kubectl("delete", "--ignore-not-found",
                               f"validatingadmissionpolicybinding/{POLICY}",
                               f"validatingadmissionpolicy/{POLICY}")
        elif self.current == "noop":
            self.plane.kubectl("delete", "--ignore-not-found",
                               f"validatingwebhookconfiguration/{noop_webhook.CONFIG_NAME}")
            self._wait(lambda: not self._noop_called(), "no no-op webhook")
        if setup in self.webhooks:
            self.webhooks[setup][0]()
        elif setup == "cel":
            self.plane.apply_objects(self.policy)
            self._wait(lambda: POLICY in self._denial(), "the CEL policy")
        elif setup == "noop":
            self.plane.apply_objects([self.noop])
            self._wait(self._noop_called, "the no-op webhook")
        else:
            self._wait(lambda: self._dry_run(self.probe)[0], "no admission")
        # The probe is denied by rollgate and the policy; the Stage the bench creates
        # must get through, and without a warning (a warning would mean the webhook
        # found more to say, or a look-up failed).
        ok, out = self._dry_run(self.valid)
        if not ok or "Warning" in out:
            raise SystemExit(f"{setup}: the bench's Stage is not admitted cleanly:\n{out}")
        self.current = setup

    def _denial(self) -> str:
        ok, out = self._dry_run(self.probe)
        return "" if ok else out

    def webhook(self, setup: str) -> str | None:
        if setup in self.webhooks:
            return VALIDATE_STAGES
        return self.noop_name if setup == "noop" else None


def plane_switcher(rollgate: HostRollgate, noop_url: str,
                   base: HostRollgate | None = None) -> Switcher:
    """The set-ups on a plane: rollgate (and ``base``) and the no-op on the host,
    registered by URL."""
    validating = next(c for c in rollgate.webhook_configurations()
                      if c["kind"] == "ValidatingWebhookConfiguration")
    bundle = certs.ca_bundle(rollgate.certificates().ca_cert)
    webhooks: dict[str, Toggle] = {
        "rollgate": (rollgate.register_webhooks, rollgate.unregister_webhooks)}
    if base is not None:
        webhooks[BASE] = (base.register_webhooks, base.unregister_webhooks)
    return Switcher(rollgate.plane, validating=validating,
                    noop_client=lambda path: {"url": noop_url + path, "caBundle": bundle},
                    webhooks=webhooks)


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
        co.create_namespaced_custom_object(GROUP_KARGO, VERSION_KARGO, NS, "stages", body)
        out.append(time.perf_counter() - started)
    return out


def prepare(plane: ControlPlane) -> None:
    """The namespace and the two templates the bench's Stages name."""
    plane.kubectl("create", "namespace", NS)
    plane.apply_objects([template("AnalysisTemplate", "success-rate", "success-rate"),
                         template("ClusterAnalysisTemplate", "latency", "latency")])


def webhook_seconds(plane: ControlPlane, webhook: str | None) -> tuple[float, float]:
    """The API server's total seconds and count of its calls to ``webhook`` so far."""
    if webhook is None:
        return 0.0, 0.0
    text = plane.kubectl("get", "--raw", "/metrics").stdout
    totals = histogram(text, WEBHOOK_CALLS, name=webhook, operation="CREATE", rejected="false")
    return totals["sum"], totals["count"]


class Run:
    """What the rounds measured: every timed create per set-up, each round's median per
    set-up (ms), and per set-up the API server's seconds and count of webhook calls
    during its timed creates."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.latencies: dict[str, list[float]] = {s: [] for s in names}
        self.per_round: list[dict[str, float]] = []
        self.calls: dict[str, list[float]] = {s: [0.0, 0.0] for s in names}

    def call_means_ms(self) -> dict[str, float | None]:
        """The API server's mean webhook call per set-up, during timed creates only."""
        return {s: round(total / count * 1e3, 3) if count else None
                for s, (total, count) in self.calls.items() if s != "none"}


def run_rounds(co: client.CustomObjectsApi, setups: Setups, names: tuple[str, ...], *,
               rounds: int, creates: int, warmup: int) -> Run:
    """Every set-up of ``names`` once a round, the order rotated each round."""
    run = Run(names)
    for rnd in range(rounds):
        medians: dict[str, float] = {}
        shift = rnd % len(names)
        for setup in names[shift:] + names[:shift]:
            setups.switch(setup)
            timed_creates(co, f"warm-{setup}-{rnd}", warmup)
            webhook = setups.webhook(setup)
            before = webhook_seconds(setups.plane, webhook)
            done = timed_creates(co, f"{setup}-{rnd}", creates)
            after = webhook_seconds(setups.plane, webhook)
            run.calls[setup][0] += after[0] - before[0]
            run.calls[setup][1] += after[1] - before[1]
            run.latencies[setup] += done
            medians[setup] = statistics.median(done) * 1e3
            co.delete_collection_namespaced_custom_object(GROUP_KARGO, VERSION_KARGO, NS, "stages")
        run.per_round.append(medians)
        print(f"round {rnd + 1}/{rounds}: " + ", ".join(
            f"{s} {medians[s]:.2f} ms" for s in names), file=sys.stderr, flush=True)
    return run


def _ratio(over: float, base: float) -> float | None:
    return round(over / base, 2) if base > 0 else None


def compare(run: Run) -> dict[str, Any]:
    """The creates' figures, each set-up's overhead over ``none`` and rollgate's (and
    rollgate-base's) as a ratio to the Go no-op's and the CEL policy's (pure)."""
    latencies, per_round = run.latencies, run.per_round
    names = tuple(latencies)
    summaries = {s: summary_ms(latencies[s]) for s in names}
    bare = summaries["none"]["median_ms"]
    overheads = {s: {"p50_ms": round(summaries[s]["median_ms"] - bare, 3),
                     "p99_ms": round(summaries[s]["p99_ms"] - bare, 3),
                     "median_of_round_medians_ms": round(statistics.median(
                         r[s] - r["none"] for r in per_round), 3)}
                 for s in names if s != "none"}
    noop = overheads["noop"]

    def to_noop(setup: str) -> dict[str, Any]:
        ours = overheads[setup]
        rounds = sorted(r for r in (_ratio(x[setup] - x["none"], x["noop"] - x["none"])
                                    for x in per_round) if r is not None)
        return {"p50": _ratio(ours["p50_ms"], noop["p50_ms"]),
                "p99": _ratio(ours["p99_ms"], noop["p99_ms"]),
                "median_of_round_medians": _ratio(ours["median_of_round_medians_ms"],
                                                  noop["median_of_round_medians_ms"]),
                "per_round_min_max": [rounds[0], rounds[-1]] if rounds else None}

    return {
        "create": summaries,
        "overhead_over_none": overheads,
        "to_noop": {s: to_noop(s) for s in ("rollgate", BASE) if s in overheads},
        "rollgate_to_cel_median_of_round_medians": _ratio(
            overheads["rollgate"]["median_of_round_medians_ms"],
            overheads["cel"]["median_of_round_medians_ms"]),
        "per_round_median_ms": [{s: round(r[s], 3) for s in names} for r in per_round],
        "apiserver_webhook_call_mean_ms": run.call_means_ms(),
    }


def handler_mean_ms(webhook_metrics: str) -> float | None:
    """rollgate's own mean time to answer a Stage it allows (its handler: JSON and the
    decision with its look-ups; the metrics are recorded after the answer), over the
    whole run, warm-ups included."""
    return mean_ms(webhook_metrics, "rollgate_webhook_request_duration_seconds",
                   endpoint="/validate/stages", result="allowed")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--creates", type=int, default=100, help="timed creates per set-up per round")
    p.add_argument("--warmup", type=int, default=20, help="untimed creates after each switch")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--base-tree", metavar="DIR", type=Path,
                   help="another checkout (e.g. `git archive` of an older commit): its "
                   "webhook is a fifth set-up, rollgate-base, registered as rollgate's "
                   "(its dependencies must be installed in this environment)")


def finish(args: argparse.Namespace, result: dict[str, Any]) -> int:
    report(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(p)
    args = p.parse_args(argv)
    load_before = [round(x, 2) for x in os.getloadavg()]

    with plane_with_rollgate(webhook=True) as rollgate:
        plane = rollgate.plane
        _, noop_url = noop_webhook.start_on_host(plane, rollgate.certificates())
        base = None
        if args.base_tree:
            base = HostRollgate(plane, repo_root=args.base_tree.resolve())
            base.webhook_certs = rollgate.certificates()
            base.start_webhook()
        co = client.CustomObjectsApi(plane.api_client())
        prepare(plane)
        names = SETUPS + ((BASE,) if base else ())
        run = run_rounds(co, plane_switcher(rollgate, noop_url, base), names,
                         rounds=args.rounds, creates=args.creates, warmup=args.warmup)
        context = ssl.create_default_context(cafile=str(rollgate.certificates().ca_cert))
        with urllib.request.urlopen(rollgate.webhook_url + "/metrics", context=context,
                                    timeout=10) as resp:
            handler = handler_mean_ms(resp.read().decode())
    return finish(args, {"rounds": args.rounds, "creates_per_setup_per_round": args.creates,
                         **compare(run), "rollgate_handler_mean_ms": handler,
                         "load_average_at_start": load_before})


if __name__ == "__main__":
    sys.exit(main())
