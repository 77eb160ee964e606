"""With the webhook process stopped, the API server still lets through the writes the
webhook has no opinion on (its matchConditions skip the call), and fails closed on the
ones it judges (docs/install.md "When the webhook is down"). Driven with kubectl
against the real kube-apiserver, the webhook registered from manifests/webhook."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from typing import Any

from harness.host_rollgate import HostRollgate
from schemas.constants import ANNOTATION_ABORT, ANNOTATION_REVERIFY
from testkit import objects

SHA256 = "3a3e2d0e4ac4f1f7a3ee6d2e5d4d7c1e8c3b9f0a6e8d1c2b3a4f5e6d7c8b9a0f"
HOLD = "example.com/hold"


def _stage(name: str, *, hold: bool = True) -> dict[str, Any]:
    return objects.stage(name, verification=objects.verification("success-rate"),
                         finalizers=[HOLD] if hold else [])


def _rollout_manager(name: str) -> dict[str, Any]:
    return objects.rollout_manager(name, metric=[
        {"name": "argoproj-labs/m", "location": "https://example.com/m", "sha256": SHA256}],
        finalizers=[HOLD])


def _ok(result: Any) -> None:
    assert result.returncode == 0, result.stderr


def _refused(result: Any, webhook: str) -> None:
    # Fails closed, naming the webhook it could not call.
    assert result.returncode != 0
    assert webhook in result.stderr, result.stderr


def test_metadata_updates_go_through_while_the_webhook_is_down(
        rollgate: HostRollgate, kubectl: Callable[..., Any], namespace: str):
    for obj in (_stage("prod"), _rollout_manager("rollouts")):
        _ok(kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj), check=False))

    rollgate.stop_webhook()
    try:
        # Kargo's reverify / abort requests, labels, other spec fields: not judged.
        _ok(kubectl("annotate", "-n", namespace, "stage", "prod",
                    f"{ANNOTATION_REVERIFY}=x", check=False))
        _ok(kubectl("annotate", "-n", namespace, "stage", "prod",
                    f"{ANNOTATION_ABORT}=x", check=False))
        _ok(kubectl("label", "-n", namespace, "stage", "prod", "team=web", check=False))
        _ok(kubectl("patch", "-n", namespace, "stage", "prod", "--type=merge",
                    "-p", json.dumps({"spec": {"shard": "a"}}), check=False))
        _ok(kubectl("label", "-n", namespace, "rolloutmanager", "rollouts", "team=web",
                    check=False))

        # A change to the checked stanza, or a create, is refused: fails closed.
        change = {"spec": {"verification": {"analysisTemplates": [{"name": "latency"}]}}}
        _refused(kubectl("patch", "-n", namespace, "stage", "prod", "--type=merge",
                         "-p", json.dumps(change), check=False),
                 "validate-stages.rollgate.dev")
        plugins: dict[str, Any] = {"spec": {"plugins": {"metric": []}}}
        _refused(kubectl("patch", "-n", namespace, "rolloutmanager", "rollouts",
                         "--type=merge", "-p", json.dumps(plugins), check=False),
                 "validate-rolloutmanagers.rollgate.dev")
        _refused(kubectl("apply", "-n", namespace, "-f", "-",
                         input=json.dumps(_stage("other")), check=False),
                 "validate-stages.rollgate.dev")

        # Deleting an object held by a finalizer, and removing the finalizer, complete.
        for kind, name in (("stage", "prod"), ("rolloutmanager", "rollouts")):
            _ok(kubectl("delete", "-n", namespace, kind, name, "--wait=false", check=False))
            _ok(kubectl("patch", "-n", namespace, kind, name, "--type=json", "-p",
                        json.dumps([{"op": "remove", "path": "/metadata/finalizers"}]),
                        check=False))
            gone = kubectl("get", "-n", namespace, kind, name, check=False)
            assert gone.returncode != 0 and "NotFound" in gone.stderr, gone.stdout
    finally:
        rollgate.start_webhook()

    # Back up: the stanza change that was refused is judged again (and allowed).
    _ok(kubectl("apply", "-n", namespace, "-f", "-", check=False,
                input=json.dumps(_stage("other", hold=False))))  # no hold: it can go


def _ca_file(rollgate: HostRollgate) -> str:
    """The webhook's CA certificate (the webhook has run: its certificates exist)."""
    assert rollgate.webhook_certs is not None
    return str(rollgate.webhook_certs.ca_cert)


def _calls(rollgate: HostRollgate) -> dict[str, float]:
    """Admission requests the webhook answered so far, per endpoint (its /metrics)."""
    context = ssl.create_default_context(cafile=_ca_file(rollgate))
    with urllib.request.urlopen(rollgate.webhook_url + "/metrics", timeout=10,
                                context=context) as resp:
        text = resp.read().decode()
    calls: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("rollgate_webhook_requests_total{"):
            endpoint = line.split('endpoint="', 1)[1].split('"', 1)[0]
            calls[endpoint] = calls.get(endpoint, 0.0) + float(line.rsplit(" ", 1)[1])
    return calls


def _calls_made(rollgate: HostRollgate, before: dict[str, float]
                ) -> dict[str, int]:
    after = _calls(rollgate)
    return {k: int(v - before.get(k, 0.0)) for k, v in after.items() if v != before.get(k)}


def test_each_create_or_update_calls_only_the_webhooks_with_something_to_do(
        rollgate: HostRollgate, kubectl: Callable[..., Any], namespace: str):
    """A Stage create is one round trip (validation; no mutating registration); a
    RolloutManager create calls mutation only when a digest needs normalizing; a
    metadata-only update calls nothing."""
    def apply(obj: dict[str, Any]) -> dict[str, int]:
        before = _calls(rollgate)
        _ok(kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(obj), check=False))
        return _calls_made(rollgate, before)

    stage = _stage("prod")
    stage["metadata"].pop("finalizers")
    assert apply(stage) == {"/validate/stages": 1}

    clean = _rollout_manager("clean")
    clean["metadata"].pop("finalizers")
    assert apply(clean) == {"/validate/rolloutmanagers": 1}

    messy = _rollout_manager("messy")
    messy["metadata"].pop("finalizers")
    messy["spec"]["plugins"]["metric"][0]["sha256"] = f"  {SHA256.upper()}\n"
    assert apply(messy) == {"/mutate/rolloutmanagers": 1, "/validate/rolloutmanagers": 1}
    stored = json.loads(kubectl("get", "-n", namespace, "rolloutmanager", "messy",
                                "-o", "json").stdout)
    assert stored["spec"]["plugins"]["metric"][0]["sha256"] == SHA256

    before = _calls(rollgate)
    _ok(kubectl("label", "-n", namespace, "stage", "prod", "team=web", check=False))
    _ok(kubectl("annotate", "-n", namespace, "rolloutmanager", "messy", "note=x",
                check=False))
    assert _calls_made(rollgate, before) == {}


def test_certs_inject_from_a_workstation_uses_kubeconfig(
        rollgate: HostRollgate, tmp_path: Any):
    """The README's set-up step, as a user runs it with KUBECONFIG exported (the
    harness registered both configurations with its test CA; inject sets it again)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT")}
    env["KUBECONFIG"] = str(rollgate.plane.kubeconfig)
    result = subprocess.run(
        [sys.executable, "-m", "certs", "inject",
         "--ca-file", _ca_file(rollgate)],
        cwd=rollgate.repo_root, env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "ValidatingWebhookConfiguration/rollgate: caBundle set",
        "MutatingWebhookConfiguration/rollgate: caBundle set",
    ]
