"""What the verification e2e tests share: kubectl-level helpers for one namespace, the
HTTP server the real Argo Rollouts controller's ``web`` metric asks, and Kargo's part
(promotions written with testkit.kargo_shapes, exactly the shapes Kargo writes).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from harness.plane import ControlPlane
from schemas.constants import LABEL_STAGE
from testkit import kargo_shapes, objects
from testkit.net import send_json
from testkit.waits import wait_for

# --------------------------------------------------------------------------- metric server


class MetricServer:
    """Answers the web metric: ``/<verdict>`` -> ``{"verdict": "<verdict>"}`` with 200,
    ``/broken`` -> 500. The templates below turn the verdict into the run's phase.
    ``host``: the address it binds (Argo Rollouts pods reach the node's bridge address,
    not the host's loopback)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server.hits.append(self.path)
                verdict = self.path.strip("/")
                if verdict == "broken":
                    send_json(self, 500, {"error": "broken"})
                else:
                    send_json(self, 200, {"verdict": verdict})

            def log_message(self, *args: Any) -> None:
                pass

        self.hits: list[str] = []
        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def metric_server(host: str = "127.0.0.1") -> Iterator[MetricServer]:
    server = MetricServer(host)
    try:
        yield server
    finally:
        server.close()


def verdict_template(url: str, *, name: str = "verdict", count: int = 1,
                     interval: str = "1s") -> dict[str, Any]:
    """An AnalysisTemplate whose one web metric asks ``<url>/<args.verdict>``: ``pass``
    succeeds, ``fail`` fails, anything else is inconclusive, ``broken`` (HTTP 500) errors
    at once. ``count`` > 1 with a long ``interval`` keeps the run Running."""
    metric: dict[str, Any] = {
        "name": "verdict",
        "provider": {"web": {"url": url + "/{{args.verdict}}", "jsonPath": "{$.verdict}",
                             "timeoutSeconds": 5}},
        "successCondition": "result == 'pass'",
        "failureCondition": "result == 'fail'",
        "consecutiveErrorLimit": 0,
    }
    if count > 1:
        metric.update({"count": count, "interval": interval})
    return objects.analysis_template(name, args=[{"name": "verdict"}], metrics=[metric])


# --------------------------------------------------------------------------- the cluster


class Cluster:
    """kubectl-level helpers for one test namespace."""

    def __init__(self, plane: ControlPlane, namespace: str) -> None:
        self.plane = plane
        self.ns = namespace

    def kubectl(self, *args: str, **kw: Any) -> Any:
        return self.plane.kubectl(*args, **kw)

    def apply(self, obj: dict[str, Any]) -> None:
        obj = json.loads(json.dumps(obj))
        if obj["kind"] != "ClusterAnalysisTemplate":
            obj["metadata"]["namespace"] = self.ns
        self.kubectl("apply", "-f", "-", input=json.dumps(obj))

    def get(self, kind: str, name: str) -> dict[str, Any] | None:
        out = self.kubectl("get", kind, name, "-n", self.ns, "-o", "json", check=False)
        return json.loads(out.stdout) if out.returncode == 0 else None

    def items(self, kind: str) -> list[dict[str, Any]]:
        """Every ``kind`` object in the namespace."""
        out = self.kubectl("get", kind, "-n", self.ns, "-o", "json")
        items: list[dict[str, Any]] = json.loads(out.stdout)["items"]
        return items

    def patch(self, kind: str, name: str, body: dict[str, Any], *, status: bool = False) -> None:
        args = ["patch", kind, name, "-n", self.ns, "--type=merge", "-p", json.dumps(body)]
        if status:
            args.append("--subresource=status")
        self.kubectl(*args)

    def annotate(self, name: str, key: str, value: str) -> None:
        self.kubectl("annotate", "stage", name, "-n", self.ns, "--overwrite", f"{key}={value}")

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [e for e in self.items("events") if e.get("reason") == reason]

    # -- Kargo's part ---------------------------------------------------------------
    def freight(self, *names: str, warehouse: str = "w") -> None:
        for name in names:
            self.apply(objects.freight(name, alias=f"alias-{name}", warehouse=warehouse,
                                       images=[{"repoURL": "ghcr.io/shop/web", "tag": name}]))

    def stage(self, name: str, *, verdict: str = "pass", templates: tuple[str, ...] = (
            "verdict",), labels: dict[str, str] | None = None) -> None:
        self.apply(objects.stage(
            name, warehouse="w", verification=objects.verification(
                *templates, args=[{"name": "verdict", "value": verdict}],
                run_metadata={"labels": labels} if labels else None),
            spec={"promotionTemplate": {"spec": {"steps": [{"uses": "fake-step"}]}}}))

    def promote(self, stage: str, freight: str, *, promotion: str | None = None) -> None:
        """Kargo finished a promotion of ``freight`` (Warehouse ``w``) into ``stage``."""
        current = self.get("stage", stage)
        patch = kargo_shapes.promotion_patch(current, {"w": freight},
                                             promotion=promotion or f"{stage}.{freight}")
        self.patch("stage", stage, patch, status=True)

    # -- what a user checks ---------------------------------------------------------
    def history(self, stage: str) -> list[dict[str, Any]]:
        obj = self.get("stage", stage) or {}
        fh = (obj.get("status") or {}).get("freightHistory") or [{}]
        return fh[0].get("verificationHistory") or []

    def condition(self, stage: str) -> dict[str, Any]:
        obj = self.get("stage", stage) or {}
        conds = (obj.get("status") or {}).get("conditions") or []
        return next((c for c in conds if c.get("type") == "Verified"), {})

    def verified_in(self, freight: str) -> dict[str, Any]:
        obj = self.get("freight", freight) or {}
        return (obj.get("status") or {}).get("verifiedIn") or {}

    def wait_latest(self, stage: str, phase: str, *, count: int | None = None) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            history = self.history(stage)
            if history and history[0].get("phase") == phase and (
                    count is None or len(history) == count):
                return history[0]
            return None
        return wait_for(f"the latest verification of {stage} to be {phase}", check)

    def runs(self, stage: str | None = None) -> list[dict[str, Any]]:
        return [r for r in self.items("analysisruns") if stage is None
                or r["metadata"].get("labels", {}).get(LABEL_STAGE) == stage]
