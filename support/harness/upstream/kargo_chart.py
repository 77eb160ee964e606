"""Kargo's own chart, rendered by the real helm, for what the harness installs of it.

Kargo's source tree (``trees.kargo_src``) carries the chart's ``values.yaml`` and the
templates of its controller and webhooks server, but neither ``Chart.yaml`` nor
``_helpers.tpl``. So the harness renders a wrapper chart made in a temporary directory:
a ``Chart.yaml``, the tree's ``values.yaml`` and the template files it installs
(``TEMPLATES``), byte for byte, plus empty definitions of the only named templates those
files include that the tree lacks (``HELPER_STUBS``: labels and annotations, nothing
that changes what the objects do). helm renders it as it renders Kargo's chart.

What the harness installs from it, for the webhooks server that runs as a host process:

- Kargo's Mutating- and ValidatingWebhookConfiguration ``kargo``: rules, selectors
  (none where the chart has none), failure policies, side effects, all as rendered. Only
  ``clientConfig.service`` becomes a ``url``: the server is a process on this host, not
  a Service. The caBundle is the chart's own rendering of its ordinary value
  ``webhooksServer.tls.caBundle`` (with ``selfSignedCert: false``), which is how a user
  without cert-manager gives it.
- The chart's ClusterRoles and ClusterRoleBindings of the webhooks server. Two of them
  matter to other clients: they grant the custom ``promote`` verb on Stages to
  kube-system's ``namespace-controller`` and ``generic-garbage-collector``, which Kargo's
  Promotion webhook asks for (a SubjectAccessReview) before it lets anyone delete a
  Promotion; without them a namespace or Stage that held a Promotion is never deleted.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from harness import chart, versions
from harness.plane import objects_of
from harness.upstream.trees import KARGO_NAMESPACE, require_kargo_src

RELEASE = "kargo"
# The chart's templates for the webhooks server that the harness installs (the
# Deployment, Service, ConfigMap and Certificate stand for the host process).
TEMPLATE_DIR = "kubernetes-webhooks-server"
TEMPLATES = ("webhooks.yaml", "cluster-role.yaml", "cluster-role-binding.yaml")
# Named templates of the chart's _helpers.tpl (absent from the tree) that TEMPLATES
# include: labels and annotations only, rendered empty here.
HELPER_STUBS = ("kargo.labels", "kargo.kubernetesWebhooksServer.labels", "kargo.annotations")
STUBS_FILE = "_harness_stubs.tpl"
WEBHOOK_KINDS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")


def chart_source() -> Path:
    """The chart's directory in Kargo's source tree."""
    return require_kargo_src() / "charts" / "kargo"


def wrapper_chart(directory: Path) -> Path:
    """Write the wrapper chart into ``directory`` (see the module docstring); returns
    the chart's path."""
    source = chart_source()
    root = directory / RELEASE
    templates = root / "templates" / TEMPLATE_DIR
    templates.mkdir(parents=True)
    version = versions.kargo()
    (root / "Chart.yaml").write_text(yaml.safe_dump({
        "apiVersion": "v2", "name": "kargo", "version": version.removeprefix("v"),
        "appVersion": version}))
    shutil.copyfile(source / "values.yaml", root / "values.yaml")
    for name in TEMPLATES:
        shutil.copyfile(source / "templates" / TEMPLATE_DIR / name, templates / name)
    (root / "templates" / STUBS_FILE).write_text("".join(
        f'{{{{- define "{name}" -}}}}{{{{- end -}}}}\n' for name in HELPER_STUBS))
    return root


def render(values: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """``helm template`` of the wrapper chart (release ``kargo`` in Kargo's namespace)
    with the chart's defaults and ``values``, as objects."""
    with tempfile.TemporaryDirectory() as tmp:
        root = wrapper_chart(Path(tmp))
        values_path = chart.values_file(values or {}, Path(tmp))
        out = chart.helm("template", RELEASE, str(root), "--namespace", KARGO_NAMESPACE,
                         "--kube-version", versions.kubernetes(), "-f", str(values_path))
    return objects_of(out.stdout)


def ca_values(ca_pem: str) -> dict[str, Any]:
    """The chart's values for a serving certificate from a CA the API server does not
    already trust: no cert-manager Certificate, the CA's PEM as the caBundle."""
    return {"webhooksServer": {"tls": {"selfSignedCert": False, "caBundle": ca_pem}}}


def point_at(config: Mapping[str, Any], url: str) -> dict[str, Any]:
    """A webhook configuration whose webhooks call ``url`` + their Service's path;
    everything else as it is."""
    hooks = []
    for hook in config.get("webhooks") or []:
        client = dict(hook["clientConfig"])
        service = client.pop("service")
        client["url"] = url + service.get("path", "")
        hooks.append({**hook, "clientConfig": client})
    return {**config, "webhooks": hooks}


def webhooks_server_objects(*, url: str, ca_pem: str) -> list[dict[str, Any]]:
    """What the harness applies for Kargo's webhooks server at ``url`` (HTTPS, serving
    a certificate ``ca_pem`` signed): the chart's webhook configurations pointed at it,
    and its ClusterRoles and ClusterRoleBindings."""
    return [point_at(o, url) if o["kind"] in WEBHOOK_KINDS else o
            for o in render(ca_values(ca_pem))]


def installed_refs() -> list[str]:
    """``kind/name`` of every object ``webhooks_server_objects`` applies, for kubectl."""
    return [f"{o['kind'].lower()}/{o['metadata']['name']}" for o in render()]
