"""What each part of a review costs inside one whole exchange, with the CPU caches taken.

Timing a part alone pays for the interpreter's cold start again each time, so parts timed
on their own add up to far more than a request. Here the whole exchange
(``webhook.server.http11.exchange``: the request's head read, the app with the bench
Stage's two templates answered from the cache as in a cluster, the answer's bytes) is
timed with each part in turn replaced by a stub that gives the same answer (checked
first), interleaved call by call with the real thing after ``--gap-ms`` idle and
``--evict-mib`` written (as ``bench.server_profile``); a part's cost is what the exchange
takes less without it (medians, microseconds). Parts overlap, so they do not add up
(docs/benchmarks.md "Inside the webhook server"). The checks run for every call, as
for a stanza the webhook has not seen (``--stanzas distinct`` of
``bench.apply_overhead``) but without keeping its verdict; ``whole exchange, verdict
kept`` is the same exchange for a stanza it has checked before and ``whole exchange, a
stanza not seen`` one for a new stanza each call, kept for later (docs/components.md
"Verdicts kept").

    .venv/bin/python -m bench.review_parts [--iterations 1500] [--gap-ms 3] [--evict-mib 8]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from functools import partial
from typing import Any

import schemas
import schemas.stage
import webhook.server.app
from bench.server_profile import (
    BODY,
    CHECKS_RUN,
    REQUEST,
    Stub,
    Timer,
    cached_lookups,
    request_bytes,
    stubbed,
    timed_ns,
)
from bench.stats import report
from webhook import metrics
from webhook.config import WebhookConfig
from webhook.server.app import create_app
from webhook.server.http11 import exchange


def _none(*_args: object, **_kwargs: object) -> None:
    return None


def _empty(*_args: object, **_kwargs: object) -> list[Any]:
    return []


# Each part and the stubs that take it out; every stub gives the bench Stage's answer.
PARTS: dict[str, list[Stub]] = {
    "check": [(schemas, "check", _empty)],
    "template warnings": [(schemas.stage, "template_warnings", _empty)],
    "schema": [(schemas.stage, "schema_findings", _empty)],
    "stanza rules": [(schemas.stage, "_stanza_rules", _empty)],
    "label and annotation names": [(schemas.stage, "qualified_name_problem", _none),
                                   (schemas.stage, "label_value_problem", _none)],
    "size bounds": [(schemas.stage, "_oversized", _empty)],
    "arg expressions": [(schemas.stage, "arg_expression_findings", _empty)],
    "body by json.loads, not decode_json": [(webhook.server.app, "decode_json", json.loads)],
}


def unseen_requests(count: int) -> list[bytes]:
    """The bench Stage's review ``count`` times, each with a stanza of its own (its
    first arg's value), as ``bench.apply_overhead --stanzas distinct`` sends them."""
    out = []
    for i in range(count):
        review = json.loads(BODY)
        review["request"]["object"]["spec"]["analysis"]["args"][0]["value"] = f"svc-{i}"
        out.append(request_bytes(json.dumps(review).encode()))
    return out


def part_costs(timer: Timer) -> dict[str, float]:
    app = create_app(WebhookConfig(lookups=cached_lookups()))
    unseen = iter(unseen_requests(timer.iterations + 1))

    def one(raw: bytes = REQUEST) -> bytes:
        answered = exchange(app, raw, body_start=raw.index(b"\r\n\r\n") + 4,
                            chunked=False, may_wait=False)
        assert answered is not None, "the cache must answer the look-ups"
        return answered[0].split(b"\r\n\r\n", 1)[1]

    def one_unseen() -> bytes:
        return one(next(unseen))

    expected = one()
    assert one_unseen() == expected, "a stanza of its own must get the same answer"
    cases: dict[str, list[Stub]] = {
        "whole exchange": [CHECKS_RUN], "whole exchange, verdict kept": [],
        "whole exchange, a stanza not seen": [],
        **{name: [CHECKS_RUN, *stubs] for name, stubs in PARTS.items()}}
    for name, stubs in cases.items():
        with stubbed(stubs):
            assert one() == expected, f"the stub of {name!r} changes the answer"
    taken: dict[str, list[int]] = {name: [] for name in cases}
    names = list(cases)
    for i in range(timer.iterations):
        for j in range(len(names)):
            name = names[(i + j) % len(names)]  # the order rotates: no part always first
            call = one_unseen if name == "whole exchange, a stanza not seen" else one
            with stubbed(cases[name]):
                taken[name].append(timer.cold(partial(timed_ns, call)))
        metrics.flush()
    whole = statistics.median(taken["whole exchange"])
    return {**{name: round(statistics.median(taken[name]) / 1e3, 1)
               for name in ("whole exchange", "whole exchange, verdict kept",
                            "whole exchange, a stanza not seen")},
            **{name: round((whole - statistics.median(taken[name])) / 1e3, 1)
               for name in PARTS}}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=1500)
    p.add_argument("--gap-ms", type=float, default=3.0)
    p.add_argument("--evict-mib", type=int, default=8)
    args = p.parse_args(argv)
    timer = Timer(iterations=args.iterations, gap=args.gap_ms / 1e3,
                  evict_bytes=args.evict_mib << 20)
    report({"iterations": args.iterations, "gap_ms": args.gap_ms,
            "evict_mib": args.evict_mib, "median_us": part_costs(timer)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
