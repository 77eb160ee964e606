"""Create the webhook's TLS Secret and its CA Secret from generated files, once.

The chart's hook Job (``certificates.source=job``) runs ``generate``, then this, before
every install and upgrade. A Secret that already exists is kept, and the serving
Secret's ``ca.crt`` replaces the freshly generated one in the directory: an upgrade
never rotates anything under a running webhook. The CA Secret (``ca.crt``, ``ca.key``;
no pod mounts it) is what ``renew`` signs with; on a release that predates it, the one
created here starts a CA rotation that ``renew`` carries out without a failed call.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from certs.generate import CA_CERT, CA_KEY, TLS_CERT, TLS_KEY

KEYS = (TLS_CERT, TLS_KEY, CA_CERT)


def _secret(*, name: str, namespace: str, type: str, files: Mapping[str, bytes],
            keys: tuple[str, ...]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": type,
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"app.kubernetes.io/part-of": "rollgate"}},
        "data": {key: base64.b64encode(files[key]).decode() for key in keys},
    }


def tls_secret(*, name: str, namespace: str, files: Mapping[str, bytes]) -> dict[str, Any]:
    """The ``kubernetes.io/tls`` Secret of ``files`` (tls.crt, tls.key, ca.crt; pure)."""
    return _secret(name=name, namespace=namespace, type="kubernetes.io/tls", files=files,
                   keys=KEYS)


def ca_secret(*, name: str, namespace: str, files: Mapping[str, bytes]) -> dict[str, Any]:
    """The Opaque Secret that keeps the CA and its key (pure)."""
    return _secret(name=name, namespace=namespace, type="Opaque", files=files,
                   keys=(CA_CERT, CA_KEY))


def existing_ca(secret: Any) -> bytes | None:
    """The CA PEM of a Secret read back, or None when it lacks any of the three keys
    (then it is not one this command made, and it is reported, not overwritten)."""
    data = getattr(secret, "data", None) or {}
    if not all(data.get(key) for key in KEYS):
        return None
    return base64.b64decode(data[CA_CERT])


def _create_unless_found(api: k8s.CoreV1Api, body: dict[str, Any]) -> k8s.V1Secret | None:
    """Create ``body`` unless a Secret of its name exists; the existing one, else None."""
    meta = body["metadata"]
    try:
        return api.read_namespaced_secret(meta["name"], meta["namespace"])
    except k8s.ApiException as exc:
        if exc.status != 404:
            raise
    api.create_namespaced_secret(meta["namespace"], k8s.V1Secret(
        api_version="v1", kind="Secret", type=body["type"], data=body["data"],
        metadata=k8s.V1ObjectMeta(**meta)))
    return None


def ensure_secret(api_client: k8s.ApiClient, *, directory: Path, name: str, ca_name: str,
                  namespace: str) -> dict[str, str]:
    """Create Secrets ``namespace/name`` and ``namespace/ca_name`` from ``directory``
    unless they exist; then leave the serving Secret's CA in ``directory/ca.crt``.
    Returns ``created`` or ``kept`` for each."""
    api = k8s.CoreV1Api(api_client)
    files = {key: (directory / key).read_bytes() for key in (*KEYS, CA_KEY)}
    done: dict[str, str] = {}
    current = _create_unless_found(api, tls_secret(name=name, namespace=namespace, files=files))
    done[name] = "created" if current is None else "kept"
    if current is not None:
        ca = existing_ca(current)
        if ca is None:
            raise ValueError(f"Secret {namespace}/{name} exists without {', '.join(KEYS)}; "
                             "delete it or add its CA as ca.crt")
        (directory / CA_CERT).write_bytes(ca)
    found = _create_unless_found(api, ca_secret(name=ca_name, namespace=namespace, files=files))
    done[ca_name] = "created" if found is None else "kept"
    return done
