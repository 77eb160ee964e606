"""Each rollgate pod's CPU and memory on the node, idle and under a steady stream of
admission calls: the figures the chart's requests come from.

Starts the node (harness.node), installs the chart as ``make dev`` does (release
``rollgate``, the ``job`` certificate source, 2 webhook and 2 reconciler pods), lets it
settle, then reads the kubelet's summary API every ``--every`` seconds: for
``--idle-seconds`` with nothing calling, then for ``--stream-seconds`` while
``--clients`` threads make ``--rate`` server-side dry-run creates a second each (a Stage,
then a RolloutManager, in turn; harness.kits.stream). Per container: CPU (millicores,
median and max of the windows between reads) and memory working set (MiB, median and
max), and the ratio of the stream's median CPU to the idle median measured in the same
run. Nothing is asserted.

    .venv/bin/python -m bench.node_resources [--idle-seconds 60] [--stream-seconds 120]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from bench.stats import report
from harness import crds
from harness.kits.node import NAMESPACE, Release, image_values
from harness.kits.stream import streaming
from harness.kits.usage import Reading, Usage, read, usage
from harness.node.cluster import NodeCluster
from harness.plane import ControlPlane
from testkit.denials import EXAMPLES

STREAM_NAMESPACE = "bench-stream"


def sample(plane: ControlPlane, node: str, *, seconds: float, every: float
           ) -> list[dict[str, Reading]]:
    """Reads of the release's containers, every ``every`` seconds for ``seconds``."""
    series = []
    end = time.monotonic() + seconds
    while True:
        series.append(read(plane, node, NAMESPACE))
        if time.monotonic() + every > end:
            return series
        time.sleep(every)


def ratio(stream: float | None, idle: float | None) -> float | None:
    return round(stream / idle, 1) if stream is not None and idle else None


def compare(idle: dict[str, Usage], streamed: dict[str, Usage]) -> dict[str, Any]:
    """Per container: both windows' figures and the CPU ratio (pure)."""
    out: dict[str, Any] = {}
    for name in sorted(set(idle) | set(streamed)):
        quiet = idle[name].figures() if name in idle else {}
        busy = streamed[name].figures() if name in streamed else {}
        out[name] = {"idle": quiet, "stream": busy,
                     "cpu_median_stream_over_idle": ratio(busy.get("cpu_m_median"),
                                                          quiet.get("cpu_m_median"))}
    return out


def measure(node: NodeCluster, args: argparse.Namespace) -> dict[str, Any]:
    plane, name = node.plane, node.settings.name
    Release(node).install(image_values(node.images.rollgate))
    plane.kubectl("create", "namespace", STREAM_NAMESPACE)
    plane.kubectl("apply", "-n", STREAM_NAMESPACE, "-f",
                  str(EXAMPLES / "analysistemplate.yaml"))
    time.sleep(args.settle_seconds)
    idle = usage(sample(plane, name, seconds=args.idle_seconds, every=args.every))
    with streaming(plane, STREAM_NAMESPACE, clients=args.clients, rate=args.rate) as stream:
        streamed = usage(sample(plane, name, seconds=args.stream_seconds, every=args.every))
    totals = stream.totals
    return {"containers": compare(idle, streamed),
            "stream": {"clients": args.clients, "rate_per_client": args.rate,
                       "answered": totals.answered, "failed": totals.failed},
            "windows_s": {"settle": args.settle_seconds, "idle": args.idle_seconds,
                          "stream": args.stream_seconds, "every": args.every}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.node_resources",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--settle-seconds", type=float, default=30)
    parser.add_argument("--idle-seconds", type=float, default=60)
    parser.add_argument("--stream-seconds", type=float, default=120)
    parser.add_argument("--every", type=float, default=10,
                        help="seconds between reads (the kubelet refreshes its stats "
                             "about every 10 s)")
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rate", type=float, default=5.0, help="creates a second per client")
    args = parser.parse_args(argv)
    node = NodeCluster(crds=crds.for_plane(), verbose=True)
    try:
        node.start()
        report(measure(node, args))
    finally:
        node.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
