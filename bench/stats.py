"""Summaries shared by the benchmarks: the figures docs/benchmarks.md reports."""

from __future__ import annotations

import math
import statistics


def summary(values: list[float]) -> dict[str, float]:
    """n, median, p90 (nearest rank) and worst of ``values`` (seconds), in milliseconds
    precision."""
    ordered = sorted(values)
    return {"n": len(ordered),
            "median_s": round(statistics.median(ordered), 3),
            "p90_s": round(ordered[math.ceil(0.9 * len(ordered)) - 1], 3),
            "worst_s": round(ordered[-1], 3)}
