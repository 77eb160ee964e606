"""``rollgate selftest``: prove, from inside the cluster or from a workstation, that
rollgate's webhooks judge what users apply (the I/O of :mod:`webhook.selftest`).

Three server-side dry runs (``dryRun=All``: nothing is stored) in ``--namespace``; one
PASS, FAIL or SKIP line each (SKIP only for a kind the API server does not serve, as its
discovery says); exit 0 only when none fails. The chart's ``helm test`` runs it in a
pod of rollgate's own image, which has no kubectl.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from kubernetes.client.exceptions import ApiException

from kubekit.client import load_api_client
from kubekit.discovery import Discovery, RestDiscovery, missing_crds
from kubekit.kinds import ROLLOUT_MANAGER, STAGE, Resource
from kubekit.rest import Rest, brief, resource_path
from webhook.selftest import (
    PROBES,
    Answer,
    Probe,
    Verdict,
    judge,
    message_of,
    skipped,
    summary,
)

RESOURCES = {"Stage": STAGE, "RolloutManager": ROLLOUT_MANAGER}


def parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description=(
        "Server-side dry runs of an invalid Stage, an invalid RolloutManager and a valid "
        "Stage: passes when rollgate's validating webhooks deny the first two with their "
        "field paths and allow the third."))
    p.add_argument("-n", "--namespace", default="default",
                   help="where the dry runs are made (default: default); it must be a "
                        "namespace rollgate's webhooks judge, not the release's own, and "
                        "with Kargo a Kargo Project namespace (Kargo's webhook refuses "
                        "Stages elsewhere)")
    p.add_argument("--kubeconfig", default=None,
                   help="kubeconfig file (default: in a pod its ServiceAccount, else "
                        "$KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", default=None, help="kubeconfig context (default: current)")
    return p


def dry_run(rest: Rest, probe: Probe, namespace: str) -> Answer:
    """POST the probe's object with ``dryRun=All``; the status and message that came back."""
    resource: Resource = RESOURCES[probe.body["kind"]]
    try:
        rest.raw("POST", resource_path(resource, namespace), query={"dryRun": "All"},
                 body=probe.body)
    except ApiException as exc:
        return Answer(status=int(exc.status or 0),
                      message=message_of(exc.body or "") or str(exc.reason or ""))
    return Answer(status=201)


def check(rest: Rest, discovery: Discovery, probe: Probe, namespace: str) -> Verdict:
    """Skip the probe when its kind is not served; else judge its dry run."""
    if missing_crds(discovery, [RESOURCES[probe.body["kind"]]]):
        return skipped(probe)
    return judge(probe, dry_run(rest, probe, namespace), namespace=namespace)


def run(rest: Rest, namespace: str) -> list[Verdict]:
    discovery = RestDiscovery(rest)
    return [check(rest, discovery, p, namespace) for p in PROBES]


def main(argv: Sequence[str] | None = None, *, prog: str = "rollgate selftest") -> int:
    args = parser(prog).parse_args(argv)
    logging.getLogger("urllib3").setLevel(logging.ERROR)  # retries are reported once, below
    try:
        rest = Rest(load_api_client(args.kubeconfig, pool_size=1, context=args.context))
        verdicts = run(rest, args.namespace)
    except Exception as exc:  # one line for the user, never a traceback
        print(f"{prog}: cannot reach the cluster: {brief(exc)}", file=sys.stderr)
        return 1
    for verdict in verdicts:
        print(verdict.line)
    print(summary(verdicts, namespace=args.namespace))
    return 0 if all(v.passed for v in verdicts) else 1
