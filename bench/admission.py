"""Admission benchmark: latency and throughput of the webhook's decisions.

Measures, for valid and invalid Stage and RolloutManager reviews:

  (a) in-process: the pure decision (``webhook.admission.review`` on a parsed body,
      the same function the app's endpoints call) and the app through the in-process
      HTTP client (``testkit.webhook_client``: that call plus the server's framing,
      request parsing, JSON in/out, routing, metrics and answer writing);
  (b) over TLS: the real server (``python -m webhook``, TLS 1.2+) on loopback,
      driven by client processes whose threads each hold one kept-alive HTTPS
      connection, as the API server does.

Each is compared with a no-op handler measured in the same run (``POST /noop`` on the
same app, enabled by ROLLGATE_WEBHOOK_BENCH_NOOP=1 for this benchmark only): same
process model, TLS, HTTP parsing and routing, but no decision. Loops are bounded
by a request count and a time limit; traffic stays on 127.0.0.1.

    .venv/bin/python -m bench.admission [--duration 5] [--clients 2] [--threads 4]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import multiprocessing
import ssl
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypedDict

import webhook
from certs.generate import CertPaths
from testkit import reviews
from testkit.webhook_client import Client
from testkit.webhook_server import WebhookServer, serve
from webhook import admission
from webhook.__main__ import BENCH_NOOP_ENV
from webhook.config import WebhookConfig

REPO = Path(__file__).resolve().parents[1]

class Case(TypedDict):
    name: str
    path: str
    body: dict[str, Any]
    allowed: bool


class Result(TypedDict, total=False):
    case: str
    mode: str
    requests: int
    seconds: float
    rps: float
    median_ms: float
    p99_ms: float
    # over TLS: this case's requests/s divided by the no-op's, one value per round
    round_ratios: list[float]


def cases() -> list[Case]:
    return [
        {"name": "stage-valid", "path": "/validate/stages",
         "body": reviews.review(reviews.valid_stage()), "allowed": True},
        {"name": "stage-invalid", "path": "/validate/stages",
         "body": reviews.review(reviews.invalid_stage()), "allowed": False},
        {"name": "rm-valid", "path": "/validate/rolloutmanagers",
         "body": reviews.review(reviews.valid_rollout_manager()), "allowed": True},
        {"name": "rm-invalid", "path": "/validate/rolloutmanagers",
         "body": reviews.review(reviews.invalid_rollout_manager()), "allowed": False},
    ]


NOOP: Case = {"name": "noop", "path": "/noop",
              "body": reviews.review(reviews.valid_stage()), "allowed": True}


def _summary(case: str, mode: str, latencies: list[float], seconds: float) -> Result:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {"case": case, "mode": mode, "requests": len(ordered), "seconds": seconds,
            "rps": len(ordered) / seconds, "median_ms": statistics.median(ordered) * 1e3,
            "p99_ms": p99 * 1e3}


def _timed_loop(fn: Callable[[], Any], *, iterations: int, max_seconds: float
                ) -> tuple[list[float], float]:
    latencies: list[float] = []
    started = time.perf_counter()
    deadline = started + max_seconds
    for _ in range(iterations):
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        latencies.append(t1 - t0)
        if t1 > deadline:
            break
    return latencies, time.perf_counter() - started


# ------------------------------------------------------------------ in-process


def bench_in_process(*, iterations: int, max_seconds: float) -> list[Result]:
    results: list[Result] = []
    client = Client(webhook.create_app(WebhookConfig(bench_noop=True)))
    for case in [*cases(), NOOP]:
        raw = json.dumps(case["body"]).encode()
        if case["name"] != "noop":
            resource = case["path"].rsplit("/", 1)[1]
            body = case["body"]
            outcome = admission.review(body, action="validate", resource=resource)
            assert (outcome.body["response"]["allowed"] is case["allowed"]), case["name"]

            def decide(body: dict[str, Any] = body, resource: str = resource) -> None:
                admission.review(body, action="validate", resource=resource)

            for _ in range(50):  # warm caches (compiled schemas, regexes)
                decide()
            lat, secs = _timed_loop(decide, iterations=iterations, max_seconds=max_seconds)
            results.append(_summary(case["name"], "pure", lat, secs))

        def via_http(path: str = case["path"], raw: bytes = raw) -> None:
            resp = client.post(path, data=raw)
            assert resp.status_code == 200

        for _ in range(50):
            via_http()
        lat, secs = _timed_loop(via_http, iterations=iterations, max_seconds=max_seconds)
        results.append(_summary(case["name"], "http", lat, secs))
    return results


# ------------------------------------------------------------------- over TLS


def _client_process(port: int, ca_file: str, path: str, raw: bytes, threads: int,
                    max_requests: int, duration: float, expect: bool) -> list[float]:
    """One client process: ``threads`` kept-alive HTTPS connections, each sending until
    its share of ``max_requests`` is sent or ``duration`` is over."""
    context = ssl.create_default_context(cafile=ca_file)
    per_thread = max(1, max_requests // threads)
    out: list[list[float]] = [[] for _ in range(threads)]
    headers = {"Content-Type": "application/json"}
    needle = b'"allowed":true' if expect else b'"allowed":false'

    errors: list[BaseException] = []

    def run(slot: list[float]) -> None:
        try:
            send(slot)
        except BaseException as exc:  # surfaced below: a failed request voids the run
            errors.append(exc)

    def send(slot: list[float]) -> None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
        deadline = time.perf_counter() + duration
        for _ in range(per_thread):
            t0 = time.perf_counter()
            conn.request("POST", path, body=raw, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            t1 = time.perf_counter()
            if resp.status != 200 or needle not in data:
                raise RuntimeError(f"unexpected answer {resp.status}: {data[:200]!r}")
            slot.append(t1 - t0)
            if t1 > deadline:
                break
        conn.close()

    workers = [threading.Thread(target=run, args=(slot,)) for slot in out]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    return [x for slot in out for x in slot]


def serve_noop(directory: Path, *, workers: int, threads: int, repo: Path = REPO
               ) -> contextlib.AbstractContextManager[tuple[WebhookServer, CertPaths]]:
    """``python -m webhook`` with the no-op route (``BENCH_NOOP_ENV``), warnings only in
    its log, run from ``repo``."""
    return serve(directory, workers=workers, threads=threads, args=("--log-level", "warning"),
                 env={BENCH_NOOP_ENV: "1"}, repo=repo)


def bench_tls(*, duration: float, max_requests: int, clients: int, threads: int,
              server_workers: int, server_threads: int, rounds: int,
              baseline: Path | None = None) -> list[Result]:
    """Every case, the no-op included, runs in ``rounds`` short slices interleaved in a
    rotating order, so background load on the shared machine hits them all alike and
    the ratios compare like with like. With ``baseline`` (another checkout of this
    repository), a second server runs that checkout's webhook and every slice is
    interleaved across both servers too (mode ``tls-base``): a before/after comparison
    that background load cannot tilt."""
    servers = {"tls": REPO} | ({"tls-base": baseline} if baseline else {})
    plan = [(mode, case) for case in [NOOP, *cases()] for mode in servers]
    names = [(mode, case["name"]) for mode, case in plan]
    latencies: dict[tuple[str, str], list[float]] = {n: [] for n in names}
    seconds: dict[tuple[str, str], float] = dict.fromkeys(names, 0.0)
    round_rps: list[dict[tuple[str, str], float]] = []
    per_slice = duration / rounds
    with tempfile.TemporaryDirectory(prefix="rollgate-bench-") as tmp, \
            contextlib.ExitStack() as stack:
        running: dict[str, WebhookServer] = {}
        for mode, repo in servers.items():
            workdir = Path(tmp) / mode
            workdir.mkdir()
            running[mode], _ = stack.enter_context(serve_noop(
                workdir, workers=server_workers, threads=server_threads, repo=repo))
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(clients) as pool:
            for rnd in range(-1, rounds):  # round -1 warms up and is not counted
                shift = max(rnd, 0) % len(plan)
                this_round: dict[tuple[str, str], float] = {}
                for mode, case in plan[shift:] + plan[:shift]:
                    server = running[mode]
                    raw = json.dumps(case["body"]).encode()
                    limit = 50 if rnd < 0 else max_requests // (clients * rounds)
                    args = (server.port, str(server.ca_file), case["path"], raw,
                            threads, limit, 1.0 if rnd < 0 else per_slice,
                            case["allowed"])
                    started = time.perf_counter()
                    parts = pool.starmap(_client_process, [args] * clients)
                    if rnd >= 0:
                        took = time.perf_counter() - started
                        done = [x for part in parts for x in part]
                        seconds[mode, case["name"]] += took
                        latencies[mode, case["name"]] += done
                        this_round[mode, case["name"]] = len(done) / took
                if rnd >= 0:
                    round_rps.append(this_round)
    results = []
    for mode, name in names:
        result = _summary(name, mode, latencies[mode, name], seconds[mode, name])
        result["round_ratios"] = [r[mode, name] / r[mode, "noop"] for r in round_rps]
        results.append(result)
    return results


# ---------------------------------------------------------------------- report


def report(results: list[Result]) -> str:
    lines = [f"{'mode':<8} {'case':<14} {'requests':>8} {'req/s':>9} {'median ms':>10} "
             f"{'p99 ms':>8}"]
    for r in results:
        lines.append(f"{r['mode']:<8} {r['case']:<14} {r['requests']:>8} {r['rps']:>9.0f} "
                     f"{r['median_ms']:>10.3f} {r['p99_ms']:>8.3f}")
    for mode in ("http", "tls", "tls-base"):
        noops = [r["rps"] for r in results if r["mode"] == mode and r["case"] == "noop"]
        if not noops:
            continue
        base = noops[0]
        lines.append(f"\n{mode}: requests/s relative to the no-op handler ({base:.0f} req/s)")
        for r in results:
            if r["mode"] == mode and r["case"] != "noop":
                line = f"  {r['case']:<14} {r['rps'] / base:6.1%}"
                if r.get("round_ratios"):
                    ratios = r["round_ratios"]
                    line += (f"   per round: median {statistics.median(ratios):6.1%}, "
                             f"min {min(ratios):6.1%}, max {max(ratios):6.1%}")
                lines.append(line)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--iterations", type=int, default=5000, help="in-process calls per case")
    p.add_argument("--duration", type=float, default=10.0,
                   help="seconds per case (max; in-process, and TLS over all rounds)")
    p.add_argument("--requests", type=int, default=50000, help="requests per TLS case (max)")
    p.add_argument("--rounds", type=int, default=5, help="interleaved TLS slices per case")
    p.add_argument("--clients", type=int, default=2, help="client processes")
    p.add_argument("--threads", type=int, default=4, help="connections per client process")
    p.add_argument("--server-workers", type=int, default=2)
    p.add_argument("--server-threads", type=int, default=4)
    p.add_argument("--skip-tls", action="store_true")
    p.add_argument("--skip-in-process", action="store_true")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--baseline", metavar="DIR", type=Path,
                   help="another checkout (e.g. a `git worktree` of the commit before a "
                   "change): its webhook runs as a second server, interleaved (tls-base)")
    args = p.parse_args(argv)

    results = [] if args.skip_in_process else bench_in_process(
        iterations=args.iterations, max_seconds=args.duration)
    if not args.skip_tls:
        results += bench_tls(duration=args.duration, max_requests=args.requests,
                             clients=args.clients, threads=args.threads,
                             server_workers=args.server_workers,
                             server_threads=args.server_threads, rounds=args.rounds,
                             baseline=args.baseline)
    print(report(results))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
