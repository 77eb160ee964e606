"""Build the authenticated ApiClient from a kubeconfig or the in-cluster config.

Which configuration is used, in order:

1. ``--kubeconfig FILE``: that file, its current context (``KUBECONFIG`` is not read).
2. otherwise, when ``KUBERNETES_SERVICE_HOST`` is set (running in a pod): the pod's
   ServiceAccount token and CA (in-cluster config).
3. otherwise: the official client's default kubeconfig, i.e. ``$KUBECONFIG`` if set,
   else ``~/.kube/config``, its current context; if neither exists start-up fails with
   the client's error.

The identity is whatever that configuration authenticates as. A kubeconfig user's
``as:`` (impersonation) entry is ignored by the official Python client, so the e2e
harness gives the reconciler a ServiceAccount *client certificate* instead
(``hack/controlplane.py``), which authenticates as the ServiceAccount itself.
"""

from __future__ import annotations

import os

from kubernetes import config
from kubernetes.client import ApiClient, Configuration


def load_api_client(kubeconfig: str | None, *, pool_size: int = 32) -> ApiClient:
    """ApiClient for ``kubeconfig``, else in-cluster, else the default kubeconfig."""
    cfg = Configuration()
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
    elif os.environ.get("KUBERNETES_SERVICE_HOST"):
        config.load_incluster_config(client_configuration=cfg)
    else:
        config.load_kube_config(client_configuration=cfg)
    # Every informer holds a connection for its watch and every worker needs one.
    cfg.connection_pool_maxsize = pool_size
    return ApiClient(cfg)
