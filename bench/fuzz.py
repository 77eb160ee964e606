"""Fuzz the running webhook over TLS: mutated AdmissionReviews to all four endpoints.

Starts ``python -m webhook`` as the Deployment runs it (2 workers x 4 threads, TLS) on
127.0.0.1 and sends ``--requests`` reviews (default 100,000) from ``--clients`` processes
of ``--threads`` kept-alive connections each, each review a seed review (valid
and invalid Stages and RolloutManagers, CREATE/UPDATE/DELETE) with one to four random
mutations: values replaced by JSON of another type, odd numbers and strings (huge,
control characters, right-to-left marks, non-ASCII), keys deleted or added, lists
duplicated, the envelope broken, and one in five also mangled as bytes (truncated, a
byte flipped, bytes inserted, non-UTF-8, UTF-16). One in ten bodies goes chunked.
About one request in ``--oversize-every`` (600) is instead a body over the 8 MiB limit
(8-12 MiB, on a kept-alive connection that has carried reviews, sent whole with
``Content-Length`` before the answer is read), which must get the 413 with
``Connection: close`` (under load, 6 of 152 once got a TLS EOF).

Meanwhile a process of its own sends a normal review (a valid Stage to
``/validate/stages``) every ``--probe-every-ms`` (10) on one kept-alive connection, as the
API server does: the normal reviews' latency is reported apart from the fuzz's own
(p50/p99 of each), so a regression in the tail under hostile traffic shows.

The oracle is the HTTP contract (docs/components.md "Hostile and broken clients"): a body that is
an AdmissionReview (JSON object, ``admission.k8s.io/v1`` ``AdmissionReview``, a request
with a non-empty string uid, judged with the same ``json.loads`` the server uses) must
get HTTP 200 and an AdmissionReview answering that uid with a boolean ``allowed``;
anything else must get a 400. It fails (exit 1) on any 5xx, any dropped connection, and
any answer that breaks that rule, printing the first few offending requests.

    .venv/bin/python -m bench.fuzz [--requests 100000] [--seed 1] [--clients 2] [--threads 3]
                                   [--oversize-every 600] [--probe-every-ms 10]
"""

from __future__ import annotations

import argparse
import copy
import http.client
import json
import math
import multiprocessing
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.admission import serve_noop
from schemas.constants import ANNOTATION_REVERIFY
from testkit import reviews

REPO = Path(__file__).resolve().parents[1]

API_VERSION = "admission.k8s.io/v1"
ENDPOINTS = ("/validate/stages", "/mutate/stages", "/validate/rolloutmanagers",
             "/mutate/rolloutmanagers")
KEEP_FAILURES = 10
LIMIT = 8 * 1024 * 1024  # the server's body limit (webhook.config.MAX_BODY_BYTES)


def _seeds() -> dict[str, list[dict[str, Any]]]:
    stage, bad_stage = reviews.valid_stage(), reviews.invalid_stage()
    rm, bad_rm = reviews.valid_rollout_manager(), reviews.invalid_rollout_manager()
    messy_rm = copy.deepcopy(rm)
    for entry in messy_rm["spec"]["plugins"].get("metric", []):
        entry["sha256"] = "  " + reviews.SHA256.upper() + "\n"
    stages = [reviews.review(stage), reviews.review(bad_stage),
              reviews.review(stage, operation="UPDATE", old=bad_stage),
              reviews.review(bad_stage, operation="UPDATE", old=bad_stage),
              reviews.review(None, operation="DELETE", old=stage)]
    managers = [reviews.review(rm), reviews.review(bad_rm), reviews.review(messy_rm),
                reviews.review(rm, operation="UPDATE", old=bad_rm),
                reviews.review(None, operation="DELETE", old=rm)]
    return {"/validate/stages": stages, "/mutate/stages": stages,
            "/validate/rolloutmanagers": managers, "/mutate/rolloutmanagers": managers}


# ------------------------------------------------------------------ mutations

WEIRD_STRINGS = ["", " ", "x" * 300, "succès-rate ✓", "\u202eevil", "a\x00b", "line\nbreak",
                 "../../etc/passwd", "HTTP://EXAMPLE.COM/P", "${{ vars.x }}", "💥" * 50,
                 ANNOTATION_REVERIFY, "0" * 64, "A" * 64 + " ", "file://host/x",
                 "\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
                 # plugin hosts: a look-alike with an ideographic full stop; no valid host
                 "https://g\u0456thub.com\u3002io/p", "https://xn--zz..%41/p"]
WEIRD_NUMBERS = [0, -1, 1.5, -0.0, 2**63, 2**64 + 1, 10**40, 1e308, 8080]


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 3 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice(WEIRD_NUMBERS)
    if kind in (3, 4):
        return rng.choice(WEIRD_STRINGS)
    if kind == 5:
        return rng.choice([[], {}])
    if kind == 6:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(1, 4))]
    if kind == 7:
        return {rng.choice(["name", "value", "sha256", "kind", "x", "templates"]):
                _value(rng, depth + 1) for _ in range(rng.randrange(1, 4))}
    nested: Any = "x"
    for _ in range(rng.choice([50, 500, 900])):
        nested = [nested]
    return nested


def _containers(doc: Any, found: list[Any]) -> list[Any]:
    """Every dict and list in ``doc`` (iteratively: mutations can nest deep)."""
    todo = [doc]
    while todo:
        node = todo.pop()
        if isinstance(node, dict | list) and len(found) < 2000:
            found.append(node)
            todo.extend(node.values() if isinstance(node, dict) else node)
    return found


def mutate(doc: dict[str, Any], rng: random.Random) -> Any:
    """One structural mutation somewhere in ``doc`` (in place, or a replacement)."""
    if rng.random() < 0.05:  # the envelope itself
        return rng.choice([_value(rng), {**doc, "apiVersion": "admission.k8s.io/v1beta1"},
                           {**doc, "kind": "Review"}, {**doc, "request": _value(rng)},
                           {k: v for k, v in doc.items() if k != "request"}])
    target = rng.choice(_containers(doc, []))
    if isinstance(target, dict):
        op = rng.randrange(4)
        if target and op == 0:
            del target[rng.choice(list(target))]
        elif target and op in (1, 2):
            target[rng.choice(list(target))] = _value(rng)
        else:
            target[rng.choice(["x", "uid", "operation", "name", "templates", "sha256",
                               "analysis", "verification", "plugins"])] = _value(rng)
    elif target:
        op = rng.randrange(3)
        i = rng.randrange(len(target))
        if op == 0:
            target.append(target[i])  # the same value twice (a duplicate entry)
        elif op == 1:
            target[i] = _value(rng)
        else:
            del target[i]
    else:
        target.append(_value(rng))
    return doc


def mangle(raw: bytes, rng: random.Random) -> bytes:
    """A byte-level mutation of a serialized body."""
    op = rng.randrange(6)
    if op == 0 or not raw:
        return raw[: rng.randrange(len(raw) + 1)]
    i = rng.randrange(len(raw))
    if op == 1:
        return raw[:i] + bytes([raw[i] ^ (1 << rng.randrange(8))]) + raw[i + 1:]
    if op == 2:
        return raw[:i] + rng.randbytes(rng.randrange(1, 8)) + raw[i:]
    if op == 3:
        return raw[:i] + rng.choice([b"NaN", b"Infinity", b"1e999", b"\xff\xfe", b"\\ud800"]) \
            + raw[i:]
    if op == 4:
        return raw.decode("utf-8", "replace").encode("utf-16")
    return b"[" * 1000 + raw + b"]" * 1000


def fuzzed_body(seed: dict[str, Any], rng: random.Random) -> bytes:
    doc: Any = json.loads(json.dumps(seed))
    for _ in range(rng.randrange(1, 5)):
        doc = mutate(doc, rng) if isinstance(doc, dict) else doc
    try:
        raw = json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
    except (RecursionError, ValueError):
        raw = b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": '
    if rng.random() < 0.2:
        raw = mangle(raw, rng)
    return raw


def expected_uid(raw: bytes) -> str | None:
    """The uid an answer must carry when ``raw`` is an AdmissionReview, else None."""
    try:
        doc = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict) or doc.get("apiVersion") != API_VERSION \
            or doc.get("kind") != "AdmissionReview":
        return None
    request = doc.get("request")
    uid = request.get("uid") if isinstance(request, dict) else None
    return uid if isinstance(uid, str) and uid else None


def depth(value: Any) -> int:
    """How deeply ``value`` nests (iteratively)."""
    deepest, todo = 0, [(value, 0)]
    while todo:
        node, level = todo.pop()
        deepest = max(deepest, level)
        if isinstance(node, dict | list):
            todo.extend((child, level + 1)
                        for child in (node.values() if isinstance(node, dict) else node))
    return deepest


# A review nested about as deep as the parser allows may be refused as JSON (400) by
# the server, whose parser starts deeper in the stack than this one: the contract
# allows a denial or a 400 for it.
DEEP = 800


def oversized_body(rng: random.Random) -> bytes:
    """A review with a string that takes it over the body limit by up to 4 MiB."""
    pad = b"a" * (LIMIT + rng.randrange(1, 4 * 1024 * 1024))
    return b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "x": "' \
        + pad + b'"}'


def judge(raw: bytes, status: int, body: bytes, connection: str | None = None) -> str:
    """The outcome class of one answer; "wrong: ..." when it breaks the contract."""
    if len(raw) > LIMIT:
        if status == 413 and connection == "close":
            return "refused 413 (body over 8 MiB)"
        return f"wrong: HTTP {status} (Connection: {connection}) for a body over 8 MiB"
    if status >= 500:
        return f"wrong: HTTP {status}"
    uid = expected_uid(raw)
    if uid is None:
        return "refused 400" if status == 400 else f"wrong: HTTP {status} for a non-review"
    if status == 400 and depth(json.loads(raw)) >= DEEP:
        return "refused 400 (nested too deep)"
    if status != 200:
        return f"wrong: HTTP {status} for a review"
    try:
        answer = json.loads(body)
        response = answer["response"]
        ok = (answer.get("apiVersion") == API_VERSION and answer.get("kind") == "AdmissionReview"
              and response.get("uid") == uid and isinstance(response.get("allowed"), bool))
    except (ValueError, KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        return "wrong: not an AdmissionReview answering the uid"
    if response["allowed"]:
        return "patched" if "patch" in response else "allowed"
    code = response.get("status", {}).get("code")
    if code == 500:
        return "wrong: internal fault"  # a denial with code 500 is the fault answer
    return f"denied {code}"


# ------------------------------------------------------------------ clients


def _client(port: int, ca_file: str, seed: int, count: int, threads: int,
            oversize_every: int = 0) -> dict[str, Any]:
    """One client process: ``threads`` kept-alive HTTPS connections sharing ``count``."""
    import ssl

    context = ssl.create_default_context(cafile=ca_file)
    seeds = _seeds()
    outcomes: Counter[str] = Counter()
    per_endpoint: Counter[str] = Counter()
    failures: list[str] = []
    seconds: dict[str, list[float]] = {"fuzzed": [], "oversized": []}
    lock = threading.Lock()

    def run(worker: int) -> None:
        rng = random.Random(seed * 1000 + worker)
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
        for _ in range(count // threads):
            path = rng.choice(ENDPOINTS)
            raw = fuzzed_body(rng.choice(seeds[path]), rng)
            oversize = oversize_every > 0 and rng.randrange(oversize_every) == 0
            if oversize:
                raw = oversized_body(rng)
            chunked = not oversize and rng.random() < 0.1
            headers = {"Content-Type": rng.choice(["application/json", "text/plain",
                                                   "application/json; charset=utf-8"])}
            started = time.perf_counter()
            try:
                if chunked:
                    conn.request("POST", path, body=iter([raw[:len(raw) // 2],
                                                          raw[len(raw) // 2:]]),
                                 headers=headers, encode_chunked=True)
                else:
                    conn.request("POST", path, body=raw, headers=headers)
                resp = conn.getresponse()
                answer = resp.read()
                outcome = judge(raw, resp.status, answer, resp.getheader("Connection"))
            except (OSError, http.client.HTTPException) as exc:
                outcome = f"wrong: dropped connection ({type(exc).__name__})"
                answer = b""
                conn.close()
            took = time.perf_counter() - started
            with lock:
                seconds["oversized" if oversize else "fuzzed"].append(took)
                outcomes[outcome] += 1
                per_endpoint[path] += 1
                if oversize:
                    per_endpoint["(over 8 MiB)"] += 1
                if outcome.startswith("wrong") and len(failures) < KEEP_FAILURES:
                    failures.append(f"{outcome}: POST {path} {raw[:200]!r}... "
                                    f"({len(raw)} bytes) -> {answer[:200]!r}")
        conn.close()

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return {"outcomes": dict(outcomes), "endpoints": dict(per_endpoint), "failures": failures,
            "seconds": seconds}


def _probe(port: int, ca_file: str, every: float, stop: Any, out: Any) -> None:
    """A process of its own: the normal review every ``every`` seconds on one kept-alive
    connection until ``stop`` is set; its latencies and failures go to ``out``."""
    import ssl

    context = ssl.create_default_context(cafile=ca_file)
    body = json.dumps(reviews.review(reviews.valid_stage(), uid="probe")).encode()
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
    seconds: list[float] = []
    failures: list[str] = []
    while not stop.wait(every):
        started = time.perf_counter()
        try:
            conn.request("POST", "/validate/stages", body=body,
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            answer = resp.read()
            if resp.status != 200 or b'"allowed":true' not in answer:
                failures.append(f"HTTP {resp.status}: {answer[:200]!r}")
        except (OSError, http.client.HTTPException) as exc:
            failures.append(f"{type(exc).__name__}: {exc}")
            conn.close()
            continue
        seconds.append(time.perf_counter() - started)
    conn.close()
    out.put({"seconds": seconds, "failures": failures})


def latency(seconds: list[float]) -> str:
    """``n, p50 and p99`` in milliseconds."""
    if not seconds:
        return "none"
    ordered = sorted(seconds)
    p99 = ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]
    return (f"{len(ordered)}, p50 {statistics.median(ordered) * 1e3:.1f} ms, "
            f"p99 {p99 * 1e3:.1f} ms")


def run(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any], float, str]:
    """The fuzz against a fresh server, with the probe alongside: the clients' parts, the
    probe's, the seconds it took and the server's log."""
    per_client = args.requests // args.clients
    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="rollgate-fuzz-") as tmp:
        with serve_noop(Path(tmp), workers=2, threads=4) as (server, _):
            stop, out = ctx.Event(), ctx.Queue()
            probe = ctx.Process(target=_probe, args=(server.port, str(server.ca_file),
                                                     args.probe_every_ms / 1e3, stop, out))
            started = time.perf_counter()
            try:
                probe.start()
                with ctx.Pool(args.clients) as pool:
                    parts = pool.starmap(_client, [
                        (server.port, str(server.ca_file), args.seed + i, per_client,
                         args.threads, args.oversize_every) for i in range(args.clients)])
                stop.set()
                probed = out.get(timeout=60)
                probe.join(30)
            finally:
                took = time.perf_counter() - started
                stop.set()
        log = (Path(tmp) / "webhook.log").read_text(errors="replace")
    return parts, probed, took, log


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--requests", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--clients", type=int, default=2, help="client processes")
    p.add_argument("--threads", type=int, default=3, help="connections per client process")
    p.add_argument("--oversize-every", type=int, default=600, metavar="N",
                   help="about one request in N is a body over 8 MiB (0: none; default 600)")
    p.add_argument("--probe-every-ms", type=float, default=10.0,
                   help="how often the normal review is sent meanwhile (default 10)")
    args = p.parse_args(argv)

    parts, probed, took, log = run(args)
    outcomes: Counter[str] = Counter()
    endpoints: Counter[str] = Counter()
    failures: list[str] = []
    seconds: dict[str, list[float]] = {"fuzzed": [], "oversized": []}
    for part in parts:
        outcomes.update(part["outcomes"])
        endpoints.update(part["endpoints"])
        failures += part["failures"]
        for kind, taken in part["seconds"].items():
            seconds[kind] += taken
    total = sum(outcomes.values())
    wrong = sum(n for k, n in outcomes.items() if k.startswith("wrong"))
    tracebacks = log.count("Traceback") + log.count("internal fault")
    print(f"requests: {total} in {took:.1f} s ({total / took:.0f}/s), seed {args.seed}")
    print("per endpoint: " + ", ".join(f"{k} {v}" for k, v in sorted(endpoints.items())))
    for outcome, n in sorted(outcomes.items(), key=lambda kv: -kv[1]):
        print(f"  {outcome:<48} {n:>7}")
    fivexx = sum(n for k, n in outcomes.items() if k.startswith("wrong: HTTP 5"))
    dropped = sum(n for k, n in outcomes.items() if "dropped" in k)
    oversized = endpoints.get("(over 8 MiB)", 0)
    print(f"5xx: {fivexx}, dropped connections: {dropped}, wrong answers: {wrong}, "
          f"tracebacks or internal faults in the server log: {tracebacks}")
    print(f"bodies over 8 MiB: {oversized}, answered 413: "
          f"{outcomes.get('refused 413 (body over 8 MiB)', 0)}")
    print(f"latency of the fuzzed requests: {latency(seconds['fuzzed'])}; "
          f"of the bodies over 8 MiB: {latency(seconds['oversized'])}")
    print(f"normal reviews meanwhile (every {args.probe_every_ms:g} ms, one kept-alive "
          f"connection): {latency(probed['seconds'])}, failed: {len(probed['failures'])}")
    for failure in failures[:KEEP_FAILURES] + probed["failures"][:KEEP_FAILURES]:
        print("  " + failure)
    short = total < args.requests - args.clients * args.threads
    return 1 if wrong or tracebacks or short or probed["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
