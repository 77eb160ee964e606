"""The runtime's options: what the ``Manager`` reads, typed, each with its one default.

``reconciler.cli`` takes the defaults of its flags from here and builds this dataclass
from the parsed flags (the one place that reads the flags), so a default is written
once and the Manager reads typed fields instead of a dict of flags.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Final

# A pass waits on the API server for nearly all of its time, and etcd commits concurrent
# writes together, so a burst of promotions finishes far sooner with many passes in
# flight than with Kargo's 4 (docs/components.md, "Workers": 500 Stages at once, p50 9.5 s with 4,
# 3.4 s with 16, 1.7 s with 32).
DEFAULT_WORKERS: Final = 32

# --leader-election-namespace without $POD_NAMESPACE (the downward API's, in a pod), and
# what an empty value of the flag falls back to.
LEADER_ELECTION_NAMESPACE: Final = "rollgate-system"


def default_identity() -> str:
    """This replica's name in the Lease: unique per process, and readable."""
    return f"{socket.gethostname()}_{os.getpid()}"


def default_leader_election_namespace() -> str:
    """The pod's own namespace where the Deployment passes it, so the Lease lives next
    to the reconciler without a flag."""
    return os.environ.get("POD_NAMESPACE") or LEADER_ELECTION_NAMESPACE


@dataclass(frozen=True, kw_only=True, slots=True)
class RuntimeOptions:
    """How the runtime runs the controllers (docs/components.md, "Reconciler"): one field per
    flag."""

    bind_address: tuple[str, int] = ("0.0.0.0", 8080)  # --bind-address HOST:PORT
    leader_elect: bool = True  # --leader-elect / --no-leader-elect
    leader_election_namespace: str = field(default_factory=default_leader_election_namespace)
    leader_election_id: str = "rollgate-reconciler"  # the Lease's name
    lease_duration: float = 15.0  # seconds
    identity: str = field(default_factory=default_identity)
    namespaces: tuple[str, ...] = ()  # --namespaces; empty: every namespace
    workers: int = DEFAULT_WORKERS  # worker threads per controller
    resync_period: float = 300.0  # seconds between full resyncs
    # Seconds between discovery requests while a controller waits for its CRD: it starts
    # within about this long of the CRD being Established (docs/operating.md,
    # "Controllers and missing CRDs"). No flag: one cheap GET a second only while waiting.
    crd_poll_interval: float = 1.0
