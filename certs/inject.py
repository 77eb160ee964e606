"""Put the caBundle into every webhook of named webhook configurations.

The webhook configurations in ``manifests/`` ship without a caBundle (the CA is made
at install time); this patches it in with the official client. A JSON merge patch
cannot address list items, so each configuration is read and every webhook entry's
``clientConfig.caBundle`` is replaced with a JSON patch guarded by a ``test`` of the
webhook names, so a concurrent edit of the list fails instead of patching the wrong
entry.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubernetes import client as k8s


def ca_bundle_patch(webhook_names: list[str], bundle: str) -> list[dict[str, Any]]:
    """RFC 6902 ops that set ``caBundle`` on each webhook (pure; tested offline)."""
    ops: list[dict[str, Any]] = []
    for i, name in enumerate(webhook_names):
        ops.append({"op": "test", "path": f"/webhooks/{i}/name", "value": name})
        ops.append({"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": bundle})
    return ops


def inject(
    api_client: k8s.ApiClient,
    *,
    bundle: str,
    validating: Iterable[str] = ("rollgate",),
    mutating: Iterable[str] = ("rollgate",),
) -> list[str]:
    """Patch ``bundle`` into the named configurations; returns what was patched as
    ``kind/name`` strings. A missing configuration raises the client's ApiException."""
    api = k8s.AdmissionregistrationV1Api(api_client)
    done: list[str] = []
    kinds = (
        ("ValidatingWebhookConfiguration", validating,
         api.read_validating_webhook_configuration, api.patch_validating_webhook_configuration),
        ("MutatingWebhookConfiguration", mutating,
         api.read_mutating_webhook_configuration, api.patch_mutating_webhook_configuration),
    )
    for kind, names, read, patch in kinds:
        for name in names:
            current = read(name)
            webhook_names = [w.name for w in current.webhooks or []]
            if webhook_names:
                patch(name, ca_bundle_patch(webhook_names, bundle))
            done.append(f"{kind}/{name}")
    return done
