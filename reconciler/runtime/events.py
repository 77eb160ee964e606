"""core/v1 Events about the objects we act on, so ``kubectl describe`` tells the story.

Emitting is best effort: an Event that cannot be written is logged and dropped,
never a reason to fail or retry a reconcile.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from typing import Any

from .rest import Rest
from .types import Resource

log = logging.getLogger("reconciler.events")

EVENT = Resource("", "v1", "events", "Event")
COMPONENT = "rollgate-reconciler"


def build_event(
    obj: Mapping[str, Any],
    *,
    type: str,
    reason: str,
    message: str,
    instance: str,
    now: dt.datetime,
) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
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
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


class Recorder:
    """``types.EventRecorder`` writing core/v1 Events."""

    def __init__(self, rest: Rest, *, instance: str) -> None:
        self.rest = rest
        self.instance = instance

    def emit(self, obj: Mapping[str, Any], *, type: str, reason: str, message: str) -> None:
        event = build_event(
            obj, type=type, reason=reason, message=message,
            instance=self.instance, now=dt.datetime.now(dt.UTC),
        )
        try:
            self.rest.create(EVENT, event["metadata"]["namespace"], event)
        except Exception as exc:
            log.warning("could not record event %s: %s", reason, exc)
