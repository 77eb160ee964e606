"""Build the authenticated ApiClient from a kubeconfig or the in-cluster config.

The official Python client ignores a kubeconfig user's ``as`` (impersonation)
field, which the e2e harness relies on to run the reconciler under its
ServiceAccount's RBAC; we read it ourselves and send the Impersonate-* headers.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import yaml
from kubernetes import config
from kubernetes.client import ApiClient, Configuration


def impersonation_headers(kubeconfig: Mapping[str, Any], context: str | None = None) -> dict:
    """Impersonate-* headers for the kubeconfig's current (or given) context's user."""
    ctx_name = context or kubeconfig.get("current-context")
    ctx = next(
        (c.get("context") or {} for c in kubeconfig.get("contexts") or []
         if c.get("name") == ctx_name),
        {},
    )
    user = next(
        (u.get("user") or {} for u in kubeconfig.get("users") or []
         if u.get("name") == ctx.get("user")),
        {},
    )
    headers = {}
    if user.get("as"):
        headers["Impersonate-User"] = str(user["as"])
    if user.get("as-uid"):
        headers["Impersonate-Uid"] = str(user["as-uid"])
    groups = user.get("as-groups") or []
    if len(groups) > 1:
        # One header name per value cannot be expressed in the client's header dict.
        raise ValueError("kubeconfig: more than one as-groups entry is not supported")
    if groups:
        headers["Impersonate-Group"] = str(groups[0])
    return headers


def load_api_client(kubeconfig: str | None, *, pool_size: int = 32) -> ApiClient:
    """ApiClient for ``kubeconfig``, else in-cluster, else the default kubeconfig."""
    cfg = Configuration()
    headers: dict = {}
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        with open(kubeconfig, encoding="utf-8") as fh:
            headers = impersonation_headers(yaml.safe_load(fh) or {})
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)
    else:
        config.load_kube_config(client_configuration=cfg)
    # Every informer holds a connection for its watch and every worker needs one.
    cfg.connection_pool_maxsize = pool_size
    api = ApiClient(cfg)
    for name, value in headers.items():
        api.set_default_header(name, value)
    return api
