"""Whether rollgate's webhooks are active on a plane, seen as a user sees it: dry runs.

The API server picks up webhook configuration changes asynchronously, and a webhook
behind a Service answers only once its pods are Ready; a test's next request must see
the state it set up, so the harness waits until server-side dry runs show it.
"""

from __future__ import annotations

import json
import time
from typing import Any

from harness.plane import ControlPlane
from testkit import objects

PROBE_DIGEST = "ab" * 32
VALIDATING_WEBHOOK = "validate-stages.rollgate.dev"


def probes() -> tuple[dict[str, Any], dict[str, Any]]:
    """Dry-run objects that show whether each webhook is active, both accepted by the
    real CRDs: a Stage whose only fault is one the CRD cannot see (a duplicate template
    reference), and a RolloutManager whose digest only the mutating webhook lowercases.
    Dry runs in ``default`` (the webhooks never gate rollgate's own namespace); the
    webhook logs denials of dry runs at debug level only."""
    name, namespace = "rollgate-probe", "default"
    stage = objects.stage(name, namespace=namespace, warehouse="probe",
                          verification=objects.verification("probe", "probe"))
    plugin = {"name": "rollgate/probe", "location": "https://plugins.invalid/probe",
              "sha256": PROBE_DIGEST.upper()}
    return stage, objects.rollout_manager(name, namespace=namespace, metric=[plugin])


def validating_active(plane: ControlPlane) -> bool:
    """The CRD accepts the Stage probe; only the validating webhook refuses it: either it
    denies it or, with no server behind it, fails closed. Both messages name it."""
    stage, _ = probes()
    out = plane.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(stage),
                        check=False)
    return out.returncode != 0 and VALIDATING_WEBHOOK in out.stderr + out.stdout


def mutating_active(plane: ControlPlane) -> bool:
    """The mutating webhook lowercased the probe's digest (it fails open silently, so
    this is visible only while a server answers)."""
    _, manager = probes()
    out = plane.kubectl("create", "--dry-run=server", "-f", "-", "-o", "json",
                        input=json.dumps(manager), check=False)
    return out.returncode == 0 and PROBE_DIGEST in out.stdout


def wait_until(
    plane: ControlPlane, *, validating: bool | None, mutating: bool | None,
    timeout: float = 15,
) -> bool:
    """Wait until dry runs show each webhook (in)active as asked (``None``: don't care);
    False (and a note) when that did not happen within ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        seen_validating = None if validating is None else validating_active(plane)
        seen_mutating = None if mutating is None else mutating_active(plane)
        if seen_validating == validating and seen_mutating == mutating:
            return True
        if time.monotonic() > deadline:
            plane.say(
                f"webhooks not in the expected state after {timeout:.0f}s: validating "
                f"active={seen_validating} (want {validating}), mutating active="
                f"{seen_mutating} (want {mutating})")
            return False
        time.sleep(0.2)
