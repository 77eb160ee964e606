"""What admission adds to a Stage create on the node, through Services: bench/apply_overhead.py's
set-ups with rollgate as users run it and the Go no-op beside it.

Starts the node (harness.node; needs root, like ``make dev``) and installs rollgate's
chart as ``make dev`` does (release ``rollgate``: 2 webhook pods from rollgate's image,
2 reconciler pods, the ``job`` certificate source); the Go no-op (hack/noop-webhook, in an
image of its own, ``harness.node.images.noop_webhook``) runs as 2 pods behind a Service of
its own, with the webhook pods' resource requests, and is registered exactly as the
chart registered rollgate's validating webhook. The API server calls both through
their Services (HTTP/1.1, the way a webhook behind a Service is called). Then the same
rounds as on the plane, every set-up live at once and bound to its own namespace
(``none``; ``rollgate``: the chart's two webhook configurations, each webhook's
namespaceSelector narrowed to that namespace; ``noop``; ``cel``), creates alternating
between them; the same figures, ratios included.

    .venv/bin/python -m bench.apply_overhead_node [--rounds 10] [--creates 100] [--warmup 20]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import ssl
import sys
import urllib.request
from pathlib import Path
from typing import Any

from kubernetes import client

import certs
from bench.apply_overhead import (
    Setups,
    add_arguments,
    compare,
    finish,
    handler_mean_ms,
    lookups_by_result,
    run_rounds,
    side_by_side,
)
from harness import crds, noop_webhook
from harness.kits.node import NAMESPACE, WEBHOOK, Release, image_values, pods, wait_ready
from harness.node import containerd, images
from harness.node.cluster import NodeCluster
from harness.plane import ControlPlane

NOOP_NAMESPACE = "bench-noop"
NOOP_PORT = 8443
KINDS = ("validatingwebhookconfiguration", "mutatingwebhookconfiguration")
# Fields the API server sets on an object; a saved configuration is applied again without.
_SERVER_SET = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields")


def noop_objects(image: images.Image, paths: certs.CertPaths,
                 resources: dict[str, Any]) -> list[dict[str, Any]]:
    """The no-op's Secret, Deployment (2 pods, rollgate's webhook pods' requests) and
    Service, in NOOP_NAMESPACE."""
    labels = {"app.kubernetes.io/name": noop_webhook.NAME}
    meta = {"name": noop_webhook.NAME, "namespace": NOOP_NAMESPACE}
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
              "metadata": meta, "stringData": {"tls.crt": paths.tls_cert.read_text(),
                                               "tls.key": paths.tls_key.read_text()}}
    container = {
        "name": noop_webhook.NAME, "image": image.name, "imagePullPolicy": "Never",
        "args": ["-bind", f"0.0.0.0:{NOOP_PORT}", "-tls-cert-file", "/tls/tls.crt",
                 "-tls-key-file", "/tls/tls.key"],
        "ports": [{"containerPort": NOOP_PORT, "name": "https"}],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": NOOP_PORT,
                                       "scheme": "HTTPS"}},
        "resources": resources,
        "volumeMounts": [{"name": "tls", "mountPath": "/tls", "readOnly": True}],
    }
    deployment = {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
        "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": {
                     "containers": [container],
                     "volumes": [{"name": "tls", "secret": {"secretName": noop_webhook.NAME}}],
                 }}},
    }
    service = {"apiVersion": "v1", "kind": "Service", "metadata": meta,
               "spec": {"selector": labels,
                        "ports": [{"port": 443, "targetPort": NOOP_PORT, "name": "https"}]}}
    return [secret, deployment, service]


def installed(plane: ControlPlane) -> list[dict[str, Any]]:
    """The chart's two webhook configurations as the cluster has them, ready to apply
    again."""
    configs = []
    for kind in KINDS:
        config = json.loads(plane.kubectl("get", kind, "rollgate", "-o", "json").stdout)
        for key in _SERVER_SET:
            config["metadata"].pop(key, None)
        configs.append(config)
    return configs


def start_noop(node: NodeCluster, *, workdir: Path, resources: dict[str, Any]) -> str:
    """The no-op's pods and Service on the node; returns the PEM bundle of its CA."""
    image = images.noop_webhook(noop_webhook.noop_binary())
    containerd.import_images(node.settings, [image.archive])
    paths = certs.generate(workdir / "noop-certs", service=noop_webhook.NAME,
                           namespace=NOOP_NAMESPACE)
    node.plane.kubectl("create", "namespace", NOOP_NAMESPACE)
    node.plane.apply_objects(noop_objects(image, paths, resources))
    wait_ready(node.plane, NOOP_NAMESPACE, selector=f"app.kubernetes.io/name={noop_webhook.NAME}",
               count=2)
    return certs.ca_bundle(paths.ca_cert)


def node_setups(plane: ControlPlane, bundle: str) -> Setups:
    """The set-ups on the node: rollgate's webhook configurations as its chart installed
    them, the no-op through its Service."""

    def noop_client(path: str) -> dict[str, Any]:
        return {"service": {"name": noop_webhook.NAME, "namespace": NOOP_NAMESPACE,
                            "port": 443, "path": path}, "caBundle": bundle}

    return side_by_side(plane, installed(plane), noop_client=noop_client)


def measure(node: NodeCluster, args: argparse.Namespace) -> dict[str, Any]:
    plane = node.plane
    release = Release(node)
    release.install(image_values(node.images.rollgate))
    deployment = json.loads(plane.kubectl("get", "deployment", "rollgate-webhook", "-n",
                                          NAMESPACE, "-o", "json").stdout)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    resources = container["resources"]
    bundle = start_noop(node, workdir=plane.root, resources=resources)
    setups = node_setups(plane, bundle)
    setups.start()
    run = run_rounds(client.CustomObjectsApi(plane.api_client()), setups, rounds=args.rounds,
                     creates=args.creates, warmup=args.warmup,
                     distinct=args.stanzas == "distinct")
    metrics_text = webhook_metrics(plane, container["ports"][0]["containerPort"])
    return {"stanzas": args.stanzas, **compare(run),
            "rollgate_handler_mean_ms": handler_mean_ms(metrics_text),
            "rollgate_lookups": lookups_by_result(metrics_text)}


def webhook_metrics(plane: ControlPlane, port: int) -> str:
    """Every webhook pod's /metrics, read from the host over the pod network (the node
    is this host); "" for a pod that did not answer."""
    context = ssl.create_default_context()
    context.check_hostname = False  # its certificate names the Service, not the pod
    context.verify_mode = ssl.CERT_NONE  # a figure to report, nothing to trust
    texts = []
    for pod in pods(plane, NAMESPACE, WEBHOOK):
        url = f"https://{pod['status']['podIP']}:{port}/metrics"
        with contextlib.suppress(OSError), \
                urllib.request.urlopen(url, context=context, timeout=10) as resp:
            texts.append(resp.read().decode())
    return "\n".join(texts)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.apply_overhead_node",
                                description=__doc__.splitlines()[0])
    add_arguments(p)
    args = p.parse_args(argv)
    load_before = [round(x, 2) for x in os.getloadavg()]
    node = NodeCluster(crds=crds.for_plane(), verbose=True)
    try:
        node.start()
        result = measure(node, args)
    finally:
        node.stop()
    return finish(args, {"rounds": args.rounds, "creates_per_setup_per_round": args.creates,
                         **result, "load_average_at_start": load_before})


if __name__ == "__main__":
    sys.exit(main())
