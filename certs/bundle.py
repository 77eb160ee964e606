"""The caBundle: the CA certificate as the API server wants it in a webhook
configuration's ``clientConfig.caBundle`` (base64 of the PEM bytes)."""

from __future__ import annotations

import base64
import os
from pathlib import Path


def ca_bundle(ca_path: str | os.PathLike[str]) -> str:
    """Base64 of the PEM file at ``ca_path``; refuses a file that holds no certificate,
    because an empty or wrong caBundle only shows up later as TLS errors."""
    pem = Path(ca_path).read_bytes()
    if b"-----BEGIN CERTIFICATE-----" not in pem:
        raise ValueError(f"{ca_path}: no PEM certificate in file")
    return base64.b64encode(pem).decode("ascii")
