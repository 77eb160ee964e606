"""Build the authenticated ApiClient from a kubeconfig or the in-cluster config: the one
loader of the reconciler, the webhook and ``python -m certs inject``.

Which configuration is used, in order:

1. ``kubeconfig`` (``--kubeconfig FILE``): that file, its current context (``KUBECONFIG``
   is not read).
2. otherwise, when ``KUBERNETES_SERVICE_HOST`` is set (running in a pod): the pod's
   ServiceAccount token and CA (in-cluster config).
3. otherwise, unless ``default_kubeconfig`` is False: the official client's default
   kubeconfig, i.e. ``$KUBECONFIG`` if set, else ``~/.kube/config``, its current
   context, as kubectl does. The webhook turns this off: outside a pod and without
   ``--kubeconfig`` it runs without look-ups rather than with a workstation's identity.

When none applies (or the one chosen cannot be loaded) the client's ``ConfigException``
is raised.

The identity is whatever that configuration authenticates as. A kubeconfig user's
``as:`` (impersonation) entry is ignored by the official Python client, so the e2e
harness gives the reconciler a ServiceAccount *client certificate* instead
(``support/harness/plane.py``), which authenticates as the ServiceAccount itself.
"""

from __future__ import annotations

import os

from kubernetes import config
from kubernetes.client import ApiClient, Configuration
from kubernetes.config.config_exception import ConfigException


def load_api_client(
    kubeconfig: str | None, *, pool_size: int | None = None, default_kubeconfig: bool = True,
    context: str | None = None,
) -> ApiClient:
    """ApiClient for ``kubeconfig``, else in-cluster, else the default kubeconfig.

    ``pool_size``: connections kept per host (None: the client's default).
    ``context``: a kubeconfig context other than the current one (``--context``, as
    kubectl's); with it the in-cluster config is never used.
    """
    cfg = Configuration()
    if kubeconfig:
        config.load_kube_config(config_file=kubeconfig, context=context,
                                client_configuration=cfg)
    elif os.environ.get("KUBERNETES_SERVICE_HOST") and context is None:
        config.load_incluster_config(client_configuration=cfg)
    elif default_kubeconfig or context is not None:
        config.load_kube_config(context=context, client_configuration=cfg)
    else:
        raise ConfigException("no kubeconfig given and not running in a cluster")
    if pool_size is not None:
        cfg.connection_pool_maxsize = pool_size
    return ApiClient(cfg)
