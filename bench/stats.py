"""Summaries shared by the benchmarks: the figures docs/benchmarks.md reports."""

from __future__ import annotations

import json
import math
import os
import statistics
from typing import Any


def summary(values: list[float]) -> dict[str, float | None]:
    """n, median, p90, p99 (nearest rank) and worst of ``values`` (seconds), in milliseconds
    precision; with no values, n 0 and the rest None (a probe that saw nothing is a figure
    to report, not a crash)."""
    ordered = sorted(values)
    if not ordered:
        return {"n": 0, "median_s": None, "p90_s": None, "p99_s": None, "worst_s": None}
    return {"n": len(ordered),
            "median_s": round(statistics.median(ordered), 3),
            "p90_s": round(ordered[math.ceil(0.9 * len(ordered)) - 1], 3),
            "p99_s": round(ordered[math.ceil(0.99 * len(ordered)) - 1], 3),
            "worst_s": round(ordered[-1], 3)}


def report(result: dict[str, Any]) -> None:
    """Print ``result`` as JSON with the load average at its end: on a shared machine
    the figures mean little without it."""
    result = {**result, "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(result, indent=2))
