"""``make dev`` (``python -m harness.dev [--host] [--engine] ...``).

By default rollgate runs as users run it: its image, its chart, its pods on a local
node (``harness.dev.node``); that needs root on Linux. ``--host`` runs its processes on
the host instead, next to a bare plane (``harness.dev.host``): faster to iterate on.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from harness.dev import host, node
from harness.paths import REPO_ROOT

NEEDS_ROOT = ("make dev runs rollgate on a local node and needs root: it adds a bridge "
              "(198.18.0.1/24), mounts, cgroups and kubelet's firewall chains, all undone "
              "when it stops; run it as root, or `make dev ARGS=--host` for host processes")


def parser() -> argparse.ArgumentParser:
    out = argparse.ArgumentParser(prog="make dev", description=__doc__.splitlines()[0])
    out.add_argument("--host", action="store_true",
                     help="rollgate's processes on the host next to a bare plane (no node, "
                          "no root needed)")
    out.add_argument("--engine", action="store_true",
                     help="no Kargo controller: rollgate verifies (engine mode) and the "
                          "promotion is played with kubectl patch")
    out.add_argument("--no-reconciler", action="store_true",
                     help="with --host: admission only")
    out.add_argument("--work-dir", type=str, default=str(REPO_ROOT / ".dev"),
                     help="with --host: where the plane keeps its files (default .dev/)")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.host:
        return host.main(args)
    if sys.platform != "linux" or os.geteuid() != 0:
        print(f"[dev] {NEEDS_ROOT}", file=sys.stderr)
        return 1
    return node.main(args)


if __name__ == "__main__":
    sys.exit(main())
