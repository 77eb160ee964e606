"""The Go no-op webhook (hack/noop-webhook, built by ``make k8s``): the floor of any
admission webhook, which ``bench/apply_overhead.py`` measures rollgate's overhead
against. It allows everything, over TLS 1.2+ with AEAD suites and HTTP/1.1 only, as
rollgate's webhook is served.

It is registered exactly as rollgate's validating webhook is (:func:`registration`:
rollgate's ValidatingWebhookConfiguration with its own name and client config), so the
API server calls it for exactly the requests it would call rollgate for.
"""

from __future__ import annotations

import copy
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

from certs.generate import CertPaths
from harness.paths import binary
from harness.plane import ControlPlane
from harness.process import ManagedProcess, free_port, http_ok

NAME = "noop-webhook"
CONFIG_NAME = "bench-noop-webhook"


def noop_binary() -> Path:
    return binary(NAME, NAME)


def webhook_name(rollgate_name: str, tag: str = "noop") -> str:
    """The name of a copy of one of rollgate's webhooks registered beside it (the no-op's,
    or ``bench.apply_overhead``'s rollgate-base: validate-stages.rollgate.dev becomes
    validate-stages.<tag>.bench.rollgate.dev)."""
    return rollgate_name.replace(".rollgate.dev", f".{tag}.bench.rollgate.dev")


def registration(rollgate_validating: dict[str, Any], *,
                 client_config: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """rollgate's ValidatingWebhookConfiguration, renamed and pointed at the no-op
    (``client_config`` of each webhook's path): rules, matchConditions, selectors,
    failure policy, timeout and review versions stay rollgate's."""
    config = copy.deepcopy(rollgate_validating)
    config["metadata"] = {"name": CONFIG_NAME}
    for hook in config["webhooks"]:
        hook["name"] = webhook_name(hook["name"])
        client = hook["clientConfig"]
        # Registered by URL (on a plane) or through its Service (the chart's).
        path = client["service"]["path"] if "service" in client else \
            "/" + client["url"].split("/", 3)[3]
        hook["clientConfig"] = client_config(path)
    return config


def start_on_host(plane: ControlPlane, paths: CertPaths) -> tuple[ManagedProcess, str]:
    """The no-op on this host with the certificate ``paths`` (rollgate's, so one CA
    bundle serves both), stopped with the plane; returns the process and its URL."""
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    context = ssl.create_default_context(cafile=str(paths.ca_cert))
    context.check_hostname = False
    proc = plane.spawn(NAME, [str(noop_binary()), "-bind", f"127.0.0.1:{port}",
                              "-tls-cert-file", str(paths.tls_cert),
                              "-tls-key-file", str(paths.tls_key)],
                       url=url, ready_check=lambda: http_ok(url + "/readyz", context))
    proc.wait_ready(30)
    return proc, url
