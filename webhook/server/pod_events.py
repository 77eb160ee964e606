"""A Warning Event on the webhook's own Pod when its certificate cannot work, so
``kubectl describe pod`` and ``kubectl get events`` say why the webhook fails closed
(docs/components.md "Webhook", its `--tls-cert-file` flag), next to the log line.

The Pod is named by the downward API (``POD_NAME``, ``POD_NAMESPACE``, ``POD_UID``, set by
the chart and ``manifests/``); without them, or without a cluster to talk to, nothing is
written. Best effort with a short timeout: the Event never delays or stops the start
beyond that, and a failure to write it is one log line.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from typing import Any, cast

from kubekit.events import build_event

log = logging.getLogger("rollgate.webhook")

COMPONENT = "rollgate-webhook"
TIMEOUT_SECONDS = 3.0


def own_pod() -> dict[str, Any] | None:
    """The Pod this process runs in, as an object reference, or None outside one."""
    name, namespace = os.environ.get("POD_NAME"), os.environ.get("POD_NAMESPACE")
    if not (name and namespace):
        return None
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": os.environ.get("POD_UID")}}


def warn_on_pod(api_client: Any, *, reason: str, message: str) -> None:
    """Write a Warning Event ``reason`` on the own Pod; never raises."""
    pod = own_pod()
    if pod is None or api_client is None:
        return
    from kubernetes import client

    event = build_event(pod, type="Warning", reason=reason, message=message,
                        component=COMPONENT, instance=pod["metadata"]["name"],
                        now=dt.datetime.now(dt.UTC))
    try:
        # The client serialises a plain dict as it would a CoreV1Event.
        client.CoreV1Api(api_client).create_namespaced_event(
            pod["metadata"]["namespace"], cast(Any, event), _request_timeout=TIMEOUT_SECONDS)
    except Exception as exc:  # best effort: the log line says it all the same
        log.warning("event %s not recorded on pod %s: %s", reason, pod["metadata"]["name"],
                    str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
