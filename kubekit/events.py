"""core/v1 Events, so ``kubectl describe`` tells the story: the one builder of the
reconciler's Events and the webhook's about its own pod."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from schemas.objects import meta_of


def build_event(
    obj: Mapping[str, Any],
    *,
    type: str,
    reason: str,
    message: str,
    component: str,
    instance: str,
    now: dt.datetime,
) -> dict[str, Any]:
    """A core/v1 Event about ``obj`` (pure)."""
    meta = meta_of(obj)
    namespace = meta.get("namespace") or "default"
    stamp = now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta.get('name', 'object')}.", "namespace": namespace},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "type": type,
        "reason": reason,
        # The API server rejects messages over 1 KiB for events.k8s.io; stay safe.
        "message": message[:1024],
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": instance,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
