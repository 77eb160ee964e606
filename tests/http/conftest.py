"""Fixtures for the HTTP tests: the Flask test client with fake look-up callables.

The fakes stand in for ``schemas``' look-up callables (the interface the webhook
hands to the checks), not for the Kubernetes API.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flask.testing import FlaskClient

import webhook
from webhook.config import Lookups, WebhookConfig

Post = Callable[..., Any]


@pytest.fixture
def make_client() -> Callable[..., FlaskClient]:
    def make(*, lookups: Lookups | None = None, **kwargs: Any) -> FlaskClient:
        config = WebhookConfig(lookups=lookups or Lookups(), **kwargs)
        return webhook.create_app(config).test_client()

    return make


@pytest.fixture
def client(make_client: Callable[..., FlaskClient]) -> FlaskClient:
    return make_client()


@pytest.fixture
def post(client: FlaskClient) -> Post:
    """POST a review and return the AdmissionReview ``response`` (asserting HTTP 200)."""

    def do(path: str, body: Any, *, using: FlaskClient | None = None) -> dict[str, Any]:
        resp = (using or client).post(path, json=body)
        assert resp.status_code == 200, resp.get_data(as_text=True)
        data = resp.get_json()
        assert data["apiVersion"] == "admission.k8s.io/v1"
        assert data["kind"] == "AdmissionReview"
        response: dict[str, Any] = data["response"]
        return response

    return do
