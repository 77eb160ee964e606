"""What the whole-object CRD-schema checks add to ``python -m schemas validate``.

Per object, in process: the webhook's checks alone (``schemas.check``, the baseline,
what ``validate`` did before) against the same plus ``check_against_crds`` (what it does
now), and ``check_against_crds`` alone, on the corpus's objects that use every spec
field (a Stage and a RolloutManager, tests/unit/schemas/corpus-crds/). The three run in
interleaved rounds so background load hits them alike; medians of the rounds' per-object
times and their ratios to the baseline. Also: reading and parsing the bundled CRDs once
(first use in a process).

    .venv/bin/python -m bench.validate_crds --objects 400 --rounds 15
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

import schemas
from bench.stats import report
from schemas.crdschema import bundled_schemas, check_against_crds

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "unit" / "schemas" / "corpus-crds"
FULL = {"stage-every-spec-field", "rm-every-spec-field"}


def _objects(count: int) -> list[dict[str, Any]]:
    cases = [doc for path in sorted(CORPUS.glob("*.yaml"))
             for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
    full = [c["object"] for c in cases if c["name"] in FULL]
    return [full[i % len(full)] for i in range(count)]


def _per_object(run: Callable[[dict[str, Any]], object], objects: list[dict[str, Any]]
                ) -> float:
    started = time.perf_counter()
    for obj in objects:
        run(obj)
    return (time.perf_counter() - started) / len(objects)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    crds = bundled_schemas()
    load_s = time.perf_counter() - started
    objects = _objects(args.objects)
    cases: dict[str, Callable[[dict[str, Any]], object]] = {
        "webhook_checks (baseline)": schemas.check,
        "webhook_checks+crd_schema": lambda o: schemas.check(o) + check_against_crds(
            o, schemas=crds),
        "crd_schema_alone": lambda o: check_against_crds(o, schemas=crds),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    for round_index in range(args.rounds):
        names = list(cases)
        names = names[round_index % len(names):] + names[:round_index % len(names)]
        for name in names:
            times[name].append(_per_object(cases[name], objects))
    baseline = statistics.median(times["webhook_checks (baseline)"])
    report({
        "objects_per_round": args.objects, "rounds": args.rounds,
        "bundled_crds_first_load_ms": round(load_s * 1000, 1),
        "per_object_median_us": {n: round(statistics.median(t) * 1e6, 1)
                                 for n, t in times.items()},
        "ratio_to_baseline": {n: round(statistics.median(t) / baseline, 2)
                              for n, t in times.items()},
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
