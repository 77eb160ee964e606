"""``rollgate explain stage NAME [-n NS] [-o json]`` (also ``kubectl rollgate explain
...``): read the Stage, its AnalysisRuns and the current Freight, and print the
verification of the current freight as one timeline
(docs/operating.md "Why is my freight not verified?").

The I/O edge only: the explanation is ``verification.explain.explain_stage`` (pure),
its text ``verification.explain_text.render``. The cluster is the one kubectl would
talk to: ``--kubeconfig``, else ``$KUBECONFIG`` / ``~/.kube/config`` (in a pod: the
in-cluster config), ``--context`` to pick another context, the namespace from ``-n``,
else the context's, else ``default``. Read-only (get and list); errors are one line on
stderr and exit 1, never a traceback.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from kubekit.kinds import ANALYSIS_RUN, FREIGHT, STAGE
from kubekit.rest import Rest, brief
from schemas.constants import LABEL_STAGE

from .verification.explain import explain_stage
from .verification.explain_text import render
from .verification.naming import label_value
from .verification.options import OBSERVE_GRACE_SECONDS, OBSERVE_LAG_SECONDS
from .verification.payloads import current_freight, freight_names, run_stage


def parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="The verification of a Stage's current freight as one "
        "timeline: promotion, health, each AnalysisRun with its measurements, Kargo's "
        "verification entries and Verified condition, and what observe mode would report.")
    p.add_argument("kind", choices=["stage"], help="what to explain (a Kargo Stage)")
    p.add_argument("name", help="the Stage's name")
    p.add_argument("-n", "--namespace", default=None,
                   help="the Stage's namespace (default: the context's, else default)")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text",
                   help="text (default) or json: the same as one JSON document")
    p.add_argument("--kubeconfig", default=None,
                   help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config; in a "
                   "pod the in-cluster config)")
    p.add_argument("--context", default=None, help="kubeconfig context (default: current)")
    p.add_argument("--observe-grace-seconds", type=float, default=OBSERVE_GRACE_SECONDS,
                   help="as the reconciler's flag, for the DuplicateVerificationRuns "
                   f"finding (default {OBSERVE_GRACE_SECONDS:g})")
    p.add_argument("--observe-lag-seconds", type=float, default=OBSERVE_LAG_SECONDS,
                   help="as the reconciler's flag, for the VerificationNotRecorded finding "
                   f"(default {OBSERVE_LAG_SECONDS:g})")
    return p


def context_namespace(kubeconfig: str | None, context: str | None) -> str:
    """The namespace of the kubeconfig context (kubectl's default for ``-n``)."""
    from kubernetes import config

    try:
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    except Exception:  # no kubeconfig (in a pod) or an unreadable one: kubectl's default
        return "default"
    chosen = next((c for c in contexts if c.get("name") == context), None) if context else active
    return str(((chosen or {}).get("context") or {}).get("namespace") or "default")


def read(rest: Rest, *, namespace: str, name: str) -> tuple[Any, list[Any], dict[str, Any]]:
    """The Stage (None when it does not exist), its runs (by Kargo's Stage label, as the
    observer finds them) and the Freight of its current collection by name."""
    stage = rest.get(STAGE, namespace, name)
    if stage is None:
        return None, [], {}
    listed = rest.list(ANALYSIS_RUN, namespace,
                       labelSelector=f"{LABEL_STAGE}={label_value(name)}")
    runs = [r for r in listed.get("items") or [] if run_stage(r) in (name, label_value(name))]
    current = current_freight(stage)
    freight = {n: rest.get(FREIGHT, namespace, n)
               for n in (freight_names(current) if current is not None else [])}
    return stage, runs, freight


def _one_line(exc: BaseException) -> str:
    """What went wrong, as one line the user can act on."""
    from kubernetes.config.config_exception import ConfigException

    if isinstance(exc, ConfigException):
        return (f"no cluster to talk to ({exc}); pass --kubeconfig FILE or --context NAME, "
                "or set KUBECONFIG")
    return brief(exc)


def main(argv: Sequence[str] | None = None, *, prog: str = "rollgate explain") -> int:
    args = parser(prog).parse_args(argv)
    # The client retries a refused connection and urllib3 logs each retry to stderr.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    try:
        from kubekit.client import load_api_client

        api = load_api_client(args.kubeconfig, pool_size=2, context=args.context)
        namespace = args.namespace or context_namespace(args.kubeconfig, args.context)
        stage, runs, freight = read(Rest(api), namespace=namespace, name=args.name)
    except Exception as exc:  # one line for the user, never a traceback
        print(f"{prog}: {_one_line(exc)}", file=sys.stderr)
        return 1
    if stage is None:
        print(f'{prog}: Stage "{args.name}" not found in namespace {namespace}',
              file=sys.stderr)
        return 1
    doc = explain_stage(stage, runs, freight, now=dt.datetime.now(dt.UTC),
                        grace=args.observe_grace_seconds, lag=args.observe_lag_seconds)
    if args.output == "json":
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(render(doc))
    return 0
