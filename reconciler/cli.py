"""Command line of ``python -m reconciler`` (flags fixed by the shared contract)."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from collections.abc import Callable, Sequence

from kubekit import logs
from kubekit.client import load_api_client
from schemas.names import label_value_problem

from . import controllers
from .plugins.decisions import FLAG_MODES
from .plugins.digests import DownloadLimits, check_ca_file
from .runtime.manager import DEFAULT_WORKERS, Manager
from .verification import options as verification

log = logging.getLogger("reconciler")
_LIMITS = DownloadLimits()  # the defaults of the download flags


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def _ca_file(value: str) -> str:
    try:
        check_ca_file(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


def _positive(kind: type[int] | type[float]) -> Callable[[str], int | float]:
    def parse(value: str) -> int | float:
        try:
            number = kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
        if number <= 0:
            raise argparse.ArgumentTypeError(f"must be more than 0, got {value}")
        return number

    return parse


def _not_negative(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {value!r}") from None
    if not number >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return number


def _shard(value: str) -> str:
    """A Kargo shard name: what the ``kargo.akuity.io/shard`` label can hold."""
    if not value:
        raise argparse.ArgumentTypeError(
            "needs a name; for the Stages of no shard use --default-shard")
    problem = label_value_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"{value!r} is not a label value: {problem}")
    return value


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host or "0.0.0.0", int(port)


def parser(prog: str = "python -m reconciler") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog,
        description="rollgate reconciler: Stage verification and RolloutManager plugins",
    )
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster config)")
    p.add_argument("--bind-address", type=_host_port, default=("0.0.0.0", 8080),
                   help="HOST:PORT for /healthz, /readyz and /metrics (default 0.0.0.0:8080)")
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=True,
                   help="only the holder of the Lease reconciles (default on)")
    p.add_argument("--leader-election-namespace",
                   default=os.environ.get("POD_NAMESPACE") or "rollgate-system")
    p.add_argument("--leader-election-id", default="rollgate-reconciler")
    p.add_argument("--lease-duration", type=float, default=15.0, help="seconds (default 15)")
    p.add_argument("--identity", default=f"{socket.gethostname()}_{os.getpid()}")
    p.add_argument("--controllers", type=_csv, default=list(controllers.DEFAULT),
                   help="comma list (default: " + ",".join(controllers.DEFAULT) + ")")
    p.add_argument("--stage-verification", choices=verification.MODES,
                   default=verification.DEFAULT_MODE,
                   help="engine: rollgate verifies Stages (only where no Kargo controller "
                        "does); observe (default): metrics and Warning events about Kargo's "
                        "own verification, writing nothing (but the refresh request of "
                        "--refresh-lagging); off")
    p.add_argument("--observe-grace-seconds", type=float,
                   default=verification.OBSERVE_GRACE_SECONDS,
                   help="observe mode: how old a run that no verification records must be "
                        f"before it counts as a duplicate (default "
                        f"{verification.OBSERVE_GRACE_SECONDS:g})")
    p.add_argument("--observe-lag-seconds", type=_not_negative,
                   default=verification.OBSERVE_LAG_SECONDS,
                   help="observe mode: how long after the run of a Stage's current "
                        "verification finished the entry may still say Pending/Running "
                        "before it is reported (VerificationNotRecorded; default "
                        f"{verification.OBSERVE_LAG_SECONDS:g})")
    p.add_argument("--refresh-lagging", action="store_true",
                   help="observe mode: set Kargo's refresh request (annotation "
                        "kargo.akuity.io/refresh) on a Stage whose verification is not "
                        "recorded, once per entry; needs manifests/reconciler-refresh")
    p.add_argument("--shard", type=_shard, default=None, metavar="NAME",
                   help="observe mode: only the Stages of this Kargo shard (label "
                        "kargo.akuity.io/shard=NAME), as Kargo's SHARD_NAME selects them")
    p.add_argument("--default-shard", action="store_true",
                   help="observe mode: also (without --shard: only) the Stages of no shard, "
                        "as Kargo's IS_DEFAULT_CONTROLLER; neither flag: every Stage")
    p.add_argument("--namespaces", type=_csv, default=[],
                   help="comma list of namespaces to watch (default: all)")
    p.add_argument("--workers", type=int, default=DEFAULT_WORKERS,
                   help=f"worker threads per controller (default {DEFAULT_WORKERS})")
    p.add_argument("--resync-period", type=float, default=300.0, help="seconds (default 300)")
    p.add_argument("--rollouts-deployment", default="argo-rollouts")
    p.add_argument("--allow-http-plugins", action="store_true")
    p.add_argument("--plugins-mode", choices=FLAG_MODES, default="auto",
                   help="auto (default): per namespace, audit where argo-rollouts-manager "
                        "controls the argo-rollouts Deployment, sync where the Deployment has "
                        "no such controller, nothing until it exists; sync; audit (write "
                        "nothing, report differences as Warning events and metrics)")
    p.add_argument("--plugins-ca-file", type=_ca_file, default=None,
                   help="PEM CA bundle trusted, besides the system CAs, when downloading "
                        "plugins for the digest pre-flight")
    p.add_argument("--plugins-max-download-bytes", type=_positive(int),
                   default=_LIMITS.max_bytes,
                   help=f"size cap of one plugin download (default {_LIMITS.max_bytes})")
    p.add_argument("--plugins-download-timeout", type=_positive(float),
                   default=_LIMITS.timeout,
                   help=f"seconds for one plugin download, redirects included (default "
                        f"{_LIMITS.timeout:g})")
    p.add_argument("--log-level", default=os.environ.get("LOG_LEVEL", "INFO"))
    return p


def main(argv: Sequence[str] | None = None, *, prog: str = "python -m reconciler") -> int:
    """``prog``: how the user called it (``rollgate reconciler`` or ``python -m
    reconciler``)."""
    p = parser(prog)
    args = p.parse_args(argv)
    if args.stage_verification == "engine" and (args.shard or args.default_shard):
        # Engine mode cleans up after Stages it cannot see; narrowed to a shard it would
        # take every other shard's Stages for deleted ones.
        p.error("--shard and --default-shard select what observe mode watches; engine "
                "mode verifies every Stage it is given and cannot be sharded")
    logs.setup(args.log_level)
    selected = []
    for name in args.controllers:
        try:
            loaded = controllers.load(name, vars(args))
            if loaded is not None:
                selected.append(loaded)
        except controllers.UnknownController as exc:
            log.error("%s", exc)
            return 2
        except Exception as exc:
            # Running without a controller the operator asked for would look healthy
            # while doing half the job; fail the start so the Deployment shows it.
            log.exception("controller %s could not be loaded: %s: %s (turn it off with "
                          "--controllers if that is intended)", name, type(exc).__name__, exc)
            return 1
    options = dict(vars(args))
    pool = 8 + len(selected) * (args.workers + 8)
    try:
        api = load_api_client(args.kubeconfig, pool_size=pool)
    except Exception as exc:
        # No kubeconfig and not in a cluster: say so plainly instead of a traceback.
        log.error("cannot configure the Kubernetes client: %s", exc)
        return 1
    manager = Manager(api=api, controllers=selected, options=options)
    manager.install_signal_handlers()
    host, port = args.bind_address
    manager.start_health(host, port)
    log.info(
        "starting", extra={"controllers": ",".join(c.name for c in selected),
                           "identity": manager.identity, "bind": f"{host}:{port}"},
    )
    return manager.run()


if __name__ == "__main__":
    sys.exit(main())
