"""Fixtures for the HTTP tests: the in-process HTTP client (``testkit.webhook_client``:
the server's own HTTP code, no sockets) with fake look-up callables.

The fakes stand in for ``schemas``' look-up callables (the interface the webhook
hands to the checks), not for the Kubernetes API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import webhook
from testkit.webhook_client import Client
from webhook.config import Lookups, WebhookConfig

Post = Callable[..., Any]


@pytest.fixture
def make_client() -> Callable[..., Client]:
    def make(*, lookups: Lookups | None = None, **kwargs: Any) -> Client:
        config = WebhookConfig(lookups=lookups or Lookups(), **kwargs)
        return Client(webhook.create_app(config))

    return make


@pytest.fixture
def client(make_client: Callable[..., Client]) -> Client:
    return make_client()


@pytest.fixture
def post(client: Client) -> Post:
    """POST a review and return the AdmissionReview ``response`` (asserting HTTP 200)."""

    def do(path: str, body: Any, *, using: Client | None = None) -> dict[str, Any]:
        resp = (using or client).post(path, json=body)
        assert resp.status_code == 200, resp.get_data(as_text=True)
        data = resp.get_json()
        assert data["apiVersion"] == "admission.k8s.io/v1"
        assert data["kind"] == "AdmissionReview"
        response: dict[str, Any] = data["response"]
        return response

    return do
