"""``python -m harness [--work-dir DIR] [--no-webhook]``: a plane with rollgate's RBAC and
webhook on it, for poking at by hand; prints the kubeconfig and waits for Ctrl-C or
SIGTERM, which stop everything it started (``make dev`` is the full playground)."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from harness import crds
from harness.host_rollgate import HostRollgate
from harness.plane import ControlPlane


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--work-dir", type=Path)
    parser.add_argument("--no-webhook", action="store_true")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in background
    plane = ControlPlane(work_dir=args.work_dir, verbose=True)
    plane.crds = crds.for_plane(say=plane.say)
    try:
        plane.start()
        HostRollgate(plane).start(webhook=not args.no_webhook)
        print(f"export KUBECONFIG={plane.kubeconfig}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while all(p.alive() for p in plane.processes):
                time.sleep(1)
    finally:
        # A second Ctrl-C must not cut the teardown short (or print a traceback).
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        plane.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
