"""What admission adds to a Stage create: no admission, rollgate's webhook, the Go no-op
webhook, a CEL policy.

Starts a real control plane (support/harness/plane.py: etcd, kube-apiserver, and rollgate's
webhook over TLS, registered by URL and looking templates up through the API)
and creates valid Kargo v1 Stages (``spec.requestedFreight`` and ``spec.verification``
naming an AnalysisTemplate and a ClusterAnalysisTemplate that exist, so the webhook has
nothing to warn about) with the official Python client, one at a time as ``kubectl
apply`` does, under four set-ups, all registered at once, each bound to a namespace of its own
(``bench-apply-<set-up>``, labelled ``bench.rollgate.dev/setup``: every webhook's and
the policy's namespaceSelector gains that one requirement, so the API server calls each
for its own namespace's Stages only):

- ``none``: no webhook and no policy sees its namespace;
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

Before the rounds, server-side dry runs show each namespace admitted by its own set-up
and no other. Each round warms every set-up up (``--warmup`` creates), then times
``--creates`` cycles of one create per set-up, in an order shuffled for each cycle, so
that load from others on a shared machine, a burst included, falls on all set-ups
alike; then the round's Stages are deleted (not timed). Prints per set-up the
median, p90 and p99 of a create; the overheads over ``none`` (p50: difference of
medians; p99: the set-up's p99 minus the bare median) and the median over rounds of each
round's median overhead; rollgate's overhead as a
ratio to the Go no-op's, at p50 and p99 and per round, and to the CEL policy's; the
API server's own mean time per webhook call under each set-up (its
``apiserver_admission_webhook_admission_duration_seconds``, during the timed creates);
rollgate's own handler time (``rollgate_webhook_request_duration_seconds``); and the
load average. Nothing is asserted about the figures. ``--base-tree DIR`` adds
``rollgate-base``: the webhook of another checkout (an older commit), registered as
rollgate's under names of its own, for a before/after in one run. Every Stage has the
same stanza (``--stanzas shared``), as the Stages of a pipeline and every re-apply do,
so rollgate answers all but the first from the findings it keeps (docs/components.md
"Verdicts kept"); ``--stanzas distinct`` gives each timed Stage an arg value of its
own, so rollgate runs every check for every create.

bench/apply_overhead_node.py runs the same set-ups on the node: rollgate installed by
its chart and the no-op as pods, each called through its Service.

    .venv/bin/python -m bench.apply_overhead [--rounds 10] [--creates 100] [--warmup 20]
                                             [--base-tree DIR] [--stanzas distinct]
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import random
import re
import ssl
import statistics
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

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

NS = "bench-apply"
BASE = "rollgate-base"  # rollgate from another checkout (--base-tree)
VALIDATE_STAGES = "validate-stages.rollgate.dev"
POLICY = "bench-stage-verification"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"


def template(kind: str, name: str, metric: str, *,
             namespace: str | None = None) -> dict[str, Any]:
    return objects.analysis_template(
        name, namespace=namespace, cluster=kind == "ClusterAnalysisTemplate",
        args=[{"name": "service"}],
        metrics=[{"name": metric, "provider": {"web": {
            "url": "http://metrics.example/{{args.service}}"}}}])


def stage(name: str, *, namespace: str | None = None, service: str = "checkout",
          labels: dict[str, str] | None = None) -> dict[str, Any]:
    """A Stage every set-up admits without a warning (``labels`` can break that);
    ``service`` is its arg's value."""
    return objects.stage(name, namespace=namespace, verification=objects.verification(
        "success-rate", ("latency",), args=[{"name": "service", "value": service}],
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


def samples(metrics_text: str) -> Iterator[tuple[str, dict[str, str], float]]:
    """Each labelled sample of a Prometheus text exposition: name, labels, value."""
    for line in metrics_text.splitlines():
        match = _SAMPLE.match(line)
        if match:
            yield match.group(1), dict(_LABEL.findall(match.group(2))), float(match.group(3))


def histogram(metrics_text: str, metric: str, /, **labels: str) -> dict[str, float]:
    """``sum`` and ``count`` of a Prometheus histogram over the series whose labels
    include ``labels``."""
    totals = {"sum": 0.0, "count": 0.0}
    for name, found, value in samples(metrics_text):
        part = name.removeprefix(metric + "_")
        if (part != name and part in totals
                and all(found.get(k) == v for k, v in labels.items())):
            totals[part] += value
    return totals


def mean_ms(metrics_text: str, metric: str, /, **labels: str) -> float | None:
    """Mean of a Prometheus histogram (``_sum`` over ``_count``) in milliseconds; None
    when it has no observations."""
    totals = histogram(metrics_text, metric, **labels)
    return round(totals["sum"] / totals["count"] * 1e3, 3) if totals["count"] else None


WEBHOOK_CALLS = "apiserver_admission_webhook_admission_duration_seconds"
# Each set-up's namespace carries it in this label; each set-up is bound by it.
SETUP_LABEL = "bench.rollgate.dev/setup"


def namespace(setup: str) -> str:
    """The namespace whose Stages ``setup`` admits (and no other set-up sees)."""
    return f"{NS}-{setup}"


def narrowed(selector: dict[str, Any] | None, setup: str) -> dict[str, Any]:
    """``selector`` (a namespaceSelector) that also asks for the namespace of ``setup``."""
    out = copy.deepcopy(selector or {})
    out.setdefault("matchExpressions", []).append(
        {"key": SETUP_LABEL, "operator": "In", "values": [setup]})
    return out


def bound(config: dict[str, Any], setup: str) -> dict[str, Any]:
    """A webhook configuration as given, each webhook seeing only the namespace of
    ``setup`` (its own namespaceSelector gains one requirement)."""
    config = copy.deepcopy(config)
    for hook in config["webhooks"]:
        hook["namespaceSelector"] = narrowed(hook.get("namespaceSelector"), setup)
    return config


def renamed(config: dict[str, Any], tag: str) -> dict[str, Any]:
    """rollgate's webhook configuration under names of its own (``bench-<tag>``, its
    webhooks ``noop_webhook.webhook_name(name, tag)``), so that it can be registered next
    to rollgate's and the API server's metrics tell the two apart."""
    config = copy.deepcopy(config)
    config["metadata"] = {"name": f"bench-{tag}"}
    for hook in config["webhooks"]:
        hook["name"] = noop_webhook.webhook_name(hook["name"], tag)
    return config


class Setups:
    """Every set-up live at once, each bound to a namespace of its own
    (:func:`namespace`, labelled SETUP_LABEL), so that a round can go from one set-up
    to the next create by create: a burst of load on the machine then falls on all of
    them alike. ``bindings``: per set-up, the objects that bind it (none for ``none``);
    ``webhooks``: per set-up with a webhook, the name the API server calls it by."""

    def __init__(self, plane: ControlPlane, *, bindings: dict[str, list[dict[str, Any]]],
                 webhooks: dict[str, str]) -> None:
        self.plane = plane
        self.bindings = bindings
        self.webhooks = webhooks

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.bindings)

    def add(self, setup: str, binding: list[dict[str, Any]], *, webhook: str) -> None:
        """One more set-up with a webhook (before :meth:`start`)."""
        self.bindings[setup] = binding
        self.webhooks[setup] = webhook

    def start(self) -> None:
        """The namespaces (each with the templates its Stages name) and every binding;
        returns once dry runs show each namespace admitted by its own set-up only."""
        for setup in self.names:
            self.plane.apply_objects([{
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": namespace(setup), "labels": {SETUP_LABEL: setup}}}])
            self.plane.apply_objects([template("AnalysisTemplate", "success-rate",
                                               "success-rate", namespace=namespace(setup))])
        self.plane.apply_objects([template("ClusterAnalysisTemplate", "latency", "latency"),
                                  *(o for objs in self.bindings.values() for o in objs)])
        # The API server picks configuration changes up asynchronously.
        pending = set(self.names)
        deadline = time.monotonic() + 120
        while pending := {s for s in pending if not self._admits_by_itself(s)}:
            if time.monotonic() > deadline:
                raise SystemExit("not admitted by their own set-up alone within 120 s: "
                                 + ", ".join(sorted(pending)))
            time.sleep(0.2)
        for setup in self.names:
            # The probe is denied by rollgate and the policy; the Stage the bench creates
            # must get through, by its set-up's webhook alone (every set-up admits it, so
            # here a stray webhook in the policy's namespace would show too), and without
            # a warning (a warning would mean the webhook found more to say, or a look-up
            # failed).
            called, ok, out = self._called_by(stage("probe-valid", namespace=namespace(setup)))
            if not ok or "Warning" in out or called != ({setup} & set(self.webhooks)):
                raise SystemExit(f"{setup}: the bench's Stage is not admitted cleanly "
                                 f"(webhooks called: {sorted(called)}):\n{out}")

    def _dry_run(self, body: dict[str, Any]) -> tuple[bool, str]:
        out = self.plane.kubectl("create", "--dry-run=server", "-f", "-",
                                 input=json.dumps(body), check=False)
        return out.returncode == 0, out.stderr + out.stdout

    def _admits_by_itself(self, setup: str) -> bool:
        """Whether a dry run of a Stage that rollgate and the policy deny, in the
        namespace of ``setup``, calls that set-up's webhook and no other, and is denied
        there only by a set-up that denies such a Stage (the no-op allows everything, so
        only the API server's count of its calls shows it)."""
        probe = stage("probe", namespace=namespace(setup), labels={"rollgate.dev/attempt": "1"})
        called, admitted, out = self._called_by(probe)
        if called != ({setup} & set(self.webhooks)):
            return False
        if setup == "cel":
            return not admitted and POLICY in out
        return admitted == (setup in ("none", "noop"))

    def _called_by(self, body: dict[str, Any]) -> tuple[set[str], bool, str]:
        """The set-ups whose webhook a dry run of ``body`` called, whether it was
        admitted, and what kubectl said."""
        before = self._counts()
        admitted, out = self._dry_run(body)
        after = self._counts()
        return {s for s in self.webhooks if after[s] > before[s]}, admitted, out

    def _metrics(self) -> str:
        return self.plane.kubectl("get", "--raw", "/metrics").stdout

    def _counts(self) -> dict[str, float]:
        text = self._metrics()
        return {s: histogram(text, WEBHOOK_CALLS, name=name)["count"]
                for s, name in self.webhooks.items()}

    def call_totals(self) -> dict[str, tuple[float, float]]:
        """Per set-up with a webhook, the API server's total seconds and count of the
        calls that allowed a create, so far."""
        text = self._metrics()
        out: dict[str, tuple[float, float]] = {}
        for setup, name in self.webhooks.items():
            totals = histogram(text, WEBHOOK_CALLS, name=name, operation="CREATE",
                               rejected="false")
            out[setup] = (totals["sum"], totals["count"])
        return out


def side_by_side(plane: ControlPlane, configs: list[dict[str, Any]], *,
                 noop_client: Callable[[str], dict[str, Any]]) -> Setups:
    """The four set-ups on a cluster: rollgate's webhook ``configs`` (the mutating and
    validating one), the no-op registered as the validating one with ``noop_client``
    (the client config of each webhook's path) and the CEL policy, each bound to its own
    namespace."""
    validating = next(c for c in configs if c["kind"] == "ValidatingWebhookConfiguration")
    noop = noop_webhook.registration(validating, client_config=noop_client)
    selector = validating["webhooks"][0]["namespaceSelector"]
    return Setups(plane, bindings={
        "none": [],
        "rollgate": [bound(c, "rollgate") for c in configs],
        "noop": [bound(noop, "noop")],
        "cel": policy_objects(narrowed(selector, "cel")),
    }, webhooks={"rollgate": VALIDATE_STAGES, "noop": noop_webhook.webhook_name(VALIDATE_STAGES)})


def plane_setups(rollgate: HostRollgate, noop_url: str,
                 base: HostRollgate | None = None) -> Setups:
    """The set-ups on a plane: rollgate (and ``base``) and the no-op on the host,
    registered by URL."""
    bundle = certs.ca_bundle(rollgate.certificates().ca_cert)
    setups = side_by_side(rollgate.plane, rollgate.webhook_configurations(),
                          noop_client=lambda path: {"url": noop_url + path, "caBundle": bundle})
    if base is not None:
        setups.add(BASE, [bound(renamed(c, BASE), BASE) for c in base.webhook_configurations()],
                   webhook=noop_webhook.webhook_name(VALIDATE_STAGES, BASE))
    return setups


# --------------------------------------------------------------------- measuring


def quantile(ordered: list[float], q: float) -> float:
    """Nearest rank, as bench/stats.py."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def summary_ms(seconds: list[float]) -> dict[str, float]:
    ordered = sorted(x * 1e3 for x in seconds)
    return {"n": len(ordered), "median_ms": round(statistics.median(ordered), 3),
            "p90_ms": round(quantile(ordered, 0.9), 3),
            "p99_ms": round(quantile(ordered, 0.99), 3), "worst_ms": round(ordered[-1], 3)}


def timed_create(co: client.CustomObjectsApi, setup: str, name: str, *,
                 distinct: bool = False) -> float:
    """Seconds the client waits for one Stage create in the namespace of ``setup``;
    ``distinct``: a stanza no Stage before had (its arg's value names the Stage)."""
    body = stage(name, service=f"checkout-{name}" if distinct else "checkout")
    started = time.perf_counter()
    co.create_namespaced_custom_object(GROUP_KARGO, VERSION_KARGO, namespace(setup),
                                       "stages", body)
    return time.perf_counter() - started


class Run:
    """What the rounds measured: every timed create per set-up, each round's median per
    set-up (ms), and per set-up the API server's seconds and count of webhook calls
    during the timed creates."""

    def __init__(self, names: tuple[str, ...]) -> None:
        self.latencies: dict[str, list[float]] = {s: [] for s in names}
        self.per_round: list[dict[str, float]] = []
        self.calls: dict[str, list[float]] = {s: [0.0, 0.0] for s in names}

    def call_means_ms(self) -> dict[str, float | None]:
        """The API server's mean webhook call per set-up, during timed creates only."""
        return {s: round(total / count * 1e3, 3) if count else None
                for s, (total, count) in self.calls.items() if s != "none"}


def run_rounds(co: client.CustomObjectsApi, setups: Setups, *, rounds: int, creates: int,
               warmup: int, distinct: bool = False) -> Run:
    """Each round: ``warmup`` creates per set-up, then ``creates`` cycles of one timed
    create per set-up, the order shuffled for each cycle (seeded: the same every run),
    then the round's Stages deleted (not timed); ``distinct``: every timed Stage's
    stanza is one not seen before."""
    names = setups.names
    run = Run(names)
    shuffled = random.Random(0)
    for rnd in range(rounds):
        for setup in names:
            for i in range(warmup):
                timed_create(co, setup, f"warm-{rnd}-{i}")
        before = setups.call_totals()
        done: dict[str, list[float]] = {s: [] for s in names}
        for i in range(creates):
            for setup in shuffled.sample(names, len(names)):
                done[setup].append(timed_create(co, setup, f"{rnd}-{i}", distinct=distinct))
        after = setups.call_totals()
        for setup, (seconds, count) in after.items():
            run.calls[setup][0] += seconds - before[setup][0]
            run.calls[setup][1] += count - before[setup][1]
        medians = {s: statistics.median(done[s]) * 1e3 for s in names}
        for setup in names:
            run.latencies[setup] += done[setup]
            co.delete_collection_namespaced_custom_object(GROUP_KARGO, VERSION_KARGO,
                                                          namespace(setup), "stages")
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


def lookups_by_result(webhook_metrics: str) -> dict[str, float]:
    """rollgate's template look-ups over the whole run by result (``hit``: answered
    from its cache; ``found``: asked of the API server, so that request waited)."""
    counts: dict[str, float] = {}
    for name, labels, value in samples(webhook_metrics):
        if name == "rollgate_webhook_lookups_total":
            counts[labels["result"]] = counts.get(labels["result"], 0.0) + value
    return counts


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--creates", type=int, default=100, help="timed creates per set-up per round")
    p.add_argument("--warmup", type=int, default=20, help="untimed creates per set-up per round")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--stanzas", choices=("shared", "distinct"), default="shared",
                   help="shared: every Stage has the same verification stanza (the "
                   "Stages of a pipeline, re-applies); distinct: each timed Stage's arg "
                   "value is its own, so rollgate never has its findings kept")
    p.add_argument("--base-tree", metavar="DIR", type=Path,
                   help="another checkout (e.g. `git archive` of an older commit): its "
                   "webhook is a fifth set-up, rollgate-base, registered as rollgate's "
                   "under names of its own (its dependencies must be installed in this "
                   "environment)")


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
        setups = plane_setups(rollgate, noop_url, base)
        setups.start()
        run = run_rounds(client.CustomObjectsApi(plane.api_client()), setups,
                         rounds=args.rounds, creates=args.creates, warmup=args.warmup,
                         distinct=args.stanzas == "distinct")
        context = ssl.create_default_context(cafile=str(rollgate.certificates().ca_cert))
        with urllib.request.urlopen(rollgate.webhook_url + "/metrics", context=context,
                                    timeout=10) as resp:
            webhook_metrics = resp.read().decode()
    return finish(args, {"rounds": args.rounds, "creates_per_setup_per_round": args.creates,
                         "stanzas": args.stanzas,
                         **compare(run),
                         "rollgate_handler_mean_ms": handler_mean_ms(webhook_metrics),
                         "rollgate_lookups": lookups_by_result(webhook_metrics),
                         "load_average_at_start": load_before})


if __name__ == "__main__":
    sys.exit(main())
