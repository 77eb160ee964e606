"""The candidates for the schema verdict of the fast valid path, on the unit corpus.

For each of the two schemas (inlined as ``schemas/compiled.py`` compiles them), times one
valid/invalid verdict per object over the objects of ``tests/unit/schemas/corpus`` (split by
jsonschema's verdict: schema-valid, schema-invalid) for:

- ``jsonschema iter_errors``: what deciding cost before the fast path (errors built);
- ``jsonschema is_valid``: jsonschema's own boolean on the same cached validator;
- ``fastjsonschema``: generated Python code; drafts 04/06/07 only (and 2019-09's
  formats): it has no 2020-12 mode and compiles a 2020-12 schema with its newest
  generator; measured only when installed (``pip install fastjsonschema``), since
  rollgate does not depend on it;
- ``jsonschema-rs``: compiled Rust, draft 2020-12 (what rollgate uses).

Each candidate's verdicts are compared with jsonschema's on every object; timings are
the median of 7 repetitions of 20 passes, in microseconds per object.

Then the findings of the schema-invalid objects (``translate.schema_findings``), from
jsonschema's errors and from jsonschema-rs's located errors (``compiled.SchemaValidator``,
what rollgate uses), with the number of objects whose findings differ.

    .venv/bin/python -m bench.schema_candidates
"""

from __future__ import annotations

import importlib
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from schemas import compiled
from schemas.findings import sort_findings
from schemas.translate import schema_findings

ROOT = Path(__file__).resolve().parent.parent
Verdict = Callable[[Any], bool]


def corpus() -> dict[str, list[Any]]:
    objects: dict[str, list[Any]] = {"stage": [], "rolloutmanager": []}
    for path in sorted((ROOT / "tests" / "unit" / "schemas" / "corpus").glob("*.yaml")):
        for case in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            obj = (case or {}).get("object")
            if isinstance(obj, dict):
                kind = "rolloutmanager" if obj.get("kind") == "RolloutManager" else "stage"
                objects[kind].append(obj)
    return objects


def candidates(validator: compiled.SchemaValidator) -> dict[str, Verdict]:
    found: dict[str, Verdict] = {
        # Every error built, as translate.schema_findings walks them all.
        "jsonschema iter_errors": lambda o: not list(validator.jsonschema.iter_errors(o)),
        "jsonschema is_valid": validator.jsonschema.is_valid,
    }
    try:
        # Optional and untyped (not a dependency, not in the venv): imported by name, so
        # mypy checks this file the same whether it is installed or not.
        fastjsonschema = importlib.import_module("fastjsonschema")
    except ImportError:
        print("fastjsonschema not installed: left out", file=sys.stderr)
    else:
        check = fastjsonschema.compile(validator.schema)

        def fast_python(obj: Any) -> bool:
            try:
                check(obj)
            except fastjsonschema.JsonSchemaValueException:
                return False
            return True

        found["fastjsonschema"] = fast_python
    found["jsonschema-rs"] = validator.fast.is_valid
    return found


def per_object_us(verdict: Verdict, objects: list[Any]) -> float:
    times = []
    for _ in range(7):
        started = time.perf_counter()
        for _ in range(20):
            for obj in objects:
                verdict(obj)
        times.append((time.perf_counter() - started) / (20 * len(objects)) * 1e6)
    return statistics.median(times)


def main() -> int:
    objects = corpus()
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'schema':<15} {'candidate':<24} {'valid us':>9} {'invalid us':>11}  disagreements")
    for kind, validator in (("stage", compiled.STAGE_VALIDATOR),
                            ("rolloutmanager", compiled.PLUGINS_VALIDATOR)):
        valid = [o for o in objects[kind] if validator.jsonschema.is_valid(o)]
        invalid = [o for o in objects[kind] if not validator.jsonschema.is_valid(o)]
        print(f"{kind}: {len(valid)} schema-valid and {len(invalid)} schema-invalid objects")
        for name, verdict in candidates(validator).items():
            differ = sum(verdict(o) is not True for o in valid) + sum(
                verdict(o) is not False for o in invalid)
            print(f"{kind:<15} {name:<24} {per_object_us(verdict, valid):9.1f} "
                  f"{per_object_us(verdict, invalid):11.1f}  {differ}")
    print(f"{'schema':<15} {'findings from':<24} {'invalid us':>11}  objects unlike jsonschema's")
    for kind, validator in (("stage", compiled.STAGE_VALIDATOR),
                            ("rolloutmanager", compiled.PLUGINS_VALIDATOR)):
        invalid = [o for o in objects[kind] if not validator.jsonschema.is_valid(o)]
        reference = [sort_findings(schema_findings(validator.jsonschema, o)) for o in invalid]
        sources: dict[str, Any] = {"jsonschema errors": validator.jsonschema,
                                   "jsonschema-rs errors": validator}
        for name, source in sources.items():
            differ = sum(sort_findings(schema_findings(source, o)) != expected
                         for o, expected in zip(invalid, reference, strict=True))
            def findings(obj: Any, source: Any = source) -> bool:
                return bool(schema_findings(source, obj))

            cost = per_object_us(findings, invalid)
            print(f"{kind:<15} {name:<24} {cost:11.1f}  {differ}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
