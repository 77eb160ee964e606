"""Create the webhook's TLS Secret from generated files, once.

The chart's hook Job (``certificates.source=job``) runs ``generate``, then this, then
``inject``, after every install and upgrade. A Secret that already exists is kept, and
its ``ca.crt`` replaces the freshly generated one in the directory, so the ``inject``
that follows puts the CA of the certificate the webhook really serves into the
configurations: an upgrade never rotates the CA under a running webhook.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from certs.generate import CA_CERT, TLS_CERT, TLS_KEY

KEYS = (TLS_CERT, TLS_KEY, CA_CERT)


def tls_secret(*, name: str, namespace: str, files: Mapping[str, bytes]) -> dict[str, Any]:
    """The ``kubernetes.io/tls`` Secret of ``files`` (tls.crt, tls.key, ca.crt; pure)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"app.kubernetes.io/part-of": "rollgate"}},
        "data": {key: base64.b64encode(files[key]).decode() for key in KEYS},
    }


def existing_ca(secret: Any) -> bytes | None:
    """The CA PEM of a Secret read back, or None when it lacks any of the three keys
    (then it is not one this command made, and it is reported, not overwritten)."""
    data = getattr(secret, "data", None) or {}
    if not all(data.get(key) for key in KEYS):
        return None
    return base64.b64decode(data[CA_CERT])


def ensure_secret(api_client: k8s.ApiClient, *, directory: Path, name: str,
                  namespace: str) -> str:
    """Create Secret ``namespace/name`` from ``directory`` unless it exists; then leave
    the Secret's CA in ``directory/ca.crt``. Returns ``created`` or ``kept``."""
    api = k8s.CoreV1Api(api_client)
    try:
        current = api.read_namespaced_secret(name, namespace)
    except k8s.ApiException as exc:
        if exc.status != 404:
            raise
        files = {key: (directory / key).read_bytes() for key in KEYS}
        body = tls_secret(name=name, namespace=namespace, files=files)
        api.create_namespaced_secret(namespace, k8s.V1Secret(
            api_version="v1", kind="Secret", type=body["type"], data=body["data"],
            metadata=k8s.V1ObjectMeta(**body["metadata"])))
        return "created"
    ca = existing_ca(current)
    if ca is None:
        raise ValueError(f"Secret {namespace}/{name} exists without {', '.join(KEYS)}; "
                         "delete it or add its CA as ca.crt")
    (directory / CA_CERT).write_bytes(ca)
    return "kept"
