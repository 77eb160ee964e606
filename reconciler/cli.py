"""Command line of ``python -m reconciler`` (flags fixed by the shared contract)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from kubekit import logs
from kubekit.client import load_api_client
from schemas.names import label_value_problem

from . import controllers
from .options import ReconcilerOptions
from .plugins.decisions import FLAG_MODES
from .plugins.digests import DownloadLimits, check_ca_file
from .plugins.executables import MACHINES
from .plugins.options import PluginsOptions
from .runtime.manager import Manager
from .runtime.options import (
    LEADER_ELECTION_NAMESPACE,
    RuntimeOptions,
    default_leader_election_namespace,
)
from .verification.options import MODES, VerificationOptions

log = logging.getLogger("reconciler")


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
    """The flags; each default is the one its options dataclass defines
    (``ReconcilerOptions``), read when the parser is made."""
    defaults = ReconcilerOptions()
    runtime = defaults.runtime
    p = argparse.ArgumentParser(
        prog=prog,
        description="rollgate reconciler: Stage verification and RolloutManager plugins",
    )
    p.add_argument("--kubeconfig", default=defaults.kubeconfig,
                   help="kubeconfig file (default: in-cluster config)")
    host, port = runtime.bind_address
    p.add_argument("--bind-address", type=_host_port, default=runtime.bind_address,
                   help=f"HOST:PORT for /healthz, /readyz and /metrics (default {host}:{port})")
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction,
                   default=runtime.leader_elect,
                   help="only the holder of the Lease reconciles (default on)")
    p.add_argument("--leader-election-namespace", default=None,
                   help="the Lease's namespace (default: $POD_NAMESPACE, the pod's own "
                        f"namespace where the Deployment passes it, else "
                        f"{LEADER_ELECTION_NAMESPACE})")
    p.add_argument("--leader-election-id", default=runtime.leader_election_id)
    p.add_argument("--lease-duration", type=float, default=runtime.lease_duration,
                   help=f"seconds (default {runtime.lease_duration:g})")
    p.add_argument("--identity", default=None,
                   help="this replica's name in the Lease (default: <hostname>_<pid>)")
    p.add_argument("--controllers", type=_csv, default=list(defaults.controllers),
                   help="comma list (default: " + ",".join(defaults.controllers) + ")")
    p.add_argument("--stage-verification", choices=MODES, default=defaults.verification.mode,
                   help="engine: rollgate verifies Stages (only where no Kargo controller "
                        "does); observe (default): metrics and Warning events about Kargo's "
                        "own verification, writing nothing (but the refresh request of "
                        "--refresh-lagging); off")
    _verification_flags(p, defaults.verification)
    _runtime_flags(p, runtime)
    _plugins_flags(p, defaults.plugins)
    p.add_argument("--log-level", default=defaults.log_level)
    return p


def _verification_flags(p: argparse.ArgumentParser, defaults: VerificationOptions) -> None:
    p.add_argument("--observe-grace-seconds", type=float,
                   default=defaults.observe_grace_seconds,
                   help="observe mode: how old a run that no verification records must be "
                        f"before it counts as a duplicate (default "
                        f"{defaults.observe_grace_seconds:g})")
    p.add_argument("--observe-lag-seconds", type=_not_negative,
                   default=defaults.observe_lag_seconds,
                   help="observe mode: how long after the run of a Stage's current "
                        "verification finished the entry may still say Pending/Running "
                        "before it is reported (VerificationNotRecorded; default "
                        f"{defaults.observe_lag_seconds:g})")
    p.add_argument("--refresh-lagging", action="store_true", default=defaults.refresh_lagging,
                   help="observe mode: set Kargo's refresh request (annotation "
                        "kargo.akuity.io/refresh) on a Stage whose verification is not "
                        "recorded, once per entry; needs manifests/reconciler-refresh")
    p.add_argument("--shard", type=_shard, default=defaults.shard, metavar="NAME",
                   help="observe mode: only the Stages of this Kargo shard (label "
                        "kargo.akuity.io/shard=NAME), as Kargo's SHARD_NAME selects them")
    p.add_argument("--default-shard", action="store_true", default=defaults.default_shard,
                   help="observe mode: also (without --shard: only) the Stages of no shard, "
                        "as Kargo's IS_DEFAULT_CONTROLLER; neither flag: every Stage")


def _runtime_flags(p: argparse.ArgumentParser, defaults: RuntimeOptions) -> None:
    p.add_argument("--namespaces", type=_csv, default=list(defaults.namespaces),
                   help="comma list of namespaces to watch (default: all)")
    p.add_argument("--workers", type=int, default=defaults.workers,
                   help=f"worker threads per controller (default {defaults.workers})")
    p.add_argument("--resync-period", type=float, default=defaults.resync_period,
                   help=f"seconds (default {defaults.resync_period:g})")


def _plugins_flags(p: argparse.ArgumentParser, defaults: PluginsOptions) -> None:
    limits = defaults.download_limits
    p.add_argument("--rollouts-deployment", default=defaults.rollouts_deployment)
    p.add_argument("--allow-http-plugins", action="store_true", default=defaults.allow_http)
    p.add_argument("--plugins-mode", choices=FLAG_MODES, default=defaults.mode,
                   help="auto (default): per namespace, audit where argo-rollouts-manager "
                        "controls the argo-rollouts Deployment, sync where the Deployment has "
                        "no such controller, nothing until it exists; sync; audit (write "
                        "nothing, report differences as Warning events and metrics)")
    p.add_argument("--plugins-ca-file", type=_ca_file, default=defaults.ca_file,
                   help="PEM CA bundle trusted, besides the system CAs, when downloading "
                        "plugins for the digest pre-flight")
    p.add_argument("--plugins-arch", choices=sorted(MACHINES), default=None,
                   help="the nodes' architecture: the pre-flight refuses a plugin that is not "
                        "a Linux executable for it (default: this process's architecture)")
    p.add_argument("--plugins-max-download-bytes", type=_positive(int),
                   default=limits.max_bytes,
                   help=f"size cap of one plugin download (default {limits.max_bytes})")
    p.add_argument("--plugins-download-timeout", type=_positive(float),
                   default=limits.timeout,
                   help=f"seconds for one plugin download, redirects included (default "
                        f"{limits.timeout:g})")


def _lease_namespace(flag: str | None) -> str:
    """Absent: the pod's own namespace ($POD_NAMESPACE) or rollgate-system; empty (a
    chart value set to "") falls back to rollgate-system, as it always has."""
    if flag is None:
        return default_leader_election_namespace()
    return flag or LEADER_ELECTION_NAMESPACE


def options_from(args: argparse.Namespace) -> ReconcilerOptions:
    """The one place the parsed flags become options. An empty name falls back to the
    default, as it always has (a chart value set to ""), since no Lease, identity or
    Deployment can be unnamed."""
    defaults = ReconcilerOptions()
    return ReconcilerOptions(
        kubeconfig=args.kubeconfig,
        log_level=args.log_level,
        controllers=tuple(args.controllers),
        runtime=RuntimeOptions(
            bind_address=args.bind_address,
            leader_elect=args.leader_elect,
            leader_election_namespace=_lease_namespace(args.leader_election_namespace),
            leader_election_id=args.leader_election_id or defaults.runtime.leader_election_id,
            lease_duration=args.lease_duration,
            identity=args.identity or defaults.runtime.identity,
            namespaces=tuple(args.namespaces),
            workers=args.workers,
            resync_period=args.resync_period,
        ),
        verification=VerificationOptions(
            mode=args.stage_verification,
            observe_grace_seconds=args.observe_grace_seconds,
            observe_lag_seconds=args.observe_lag_seconds,
            refresh_lagging=args.refresh_lagging,
            shard=args.shard,
            default_shard=args.default_shard,
        ),
        plugins=PluginsOptions(
            mode=args.plugins_mode,
            rollouts_deployment=(args.rollouts_deployment
                                 or defaults.plugins.rollouts_deployment),
            allow_http=args.allow_http_plugins,
            ca_file=args.plugins_ca_file or None,
            arch=args.plugins_arch or defaults.plugins.arch,
            download_limits=DownloadLimits(max_bytes=args.plugins_max_download_bytes,
                                           timeout=args.plugins_download_timeout),
        ),
    )


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
    options = options_from(args)
    logs.setup(options.log_level)
    selected = []
    for name in options.controllers:
        try:
            loaded = controllers.load(name, options=options)
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
    pool = 8 + len(selected) * (options.runtime.workers + 8)
    try:
        api = load_api_client(options.kubeconfig, pool_size=pool)
    except Exception as exc:
        # No kubeconfig and not in a cluster: say so plainly instead of a traceback.
        log.error("cannot configure the Kubernetes client: %s", exc)
        return 1
    manager = Manager(api=api, controllers=selected, options=options.runtime)
    manager.install_signal_handlers()
    host, port = options.runtime.bind_address
    manager.start_health(host, port)
    log.info(
        "starting", extra={"controllers": ",".join(c.name for c in selected),
                           "identity": manager.identity, "bind": f"{host}:{port}"},
    )
    return manager.run()


if __name__ == "__main__":
    sys.exit(main())
