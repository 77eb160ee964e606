"""Every pod the chart makes honours the scheduling and pod-metadata values
(docs/install.md "Helm", "Pods"), on the node with a taint that keeps every other pod
off it: the webhook and reconciler pods, the certificate hook Jobs' pods
(rollgate-certs-secret before the install's objects, rollgate-certs-inject after them),
the `helm test` pod and a run of the CronJob rollgate-certs-renew all carry the
toleration, nodeSelector, affinity, priorityClassName, podLabel and podAnnotation (set
on the webhook and on the reconciler; the certificate and test pods get the webhook's,
their own values being left null), and run on the node, where a pod without the
toleration is refused; `helm install --wait` finishes (its hooks ran) and `helm test`
passes.

The release namespace has a default-deny NetworkPolicy (ingress and egress) and the
chart's NetworkPolicies are enabled; a renewal run (`kubectl create job
--from=cronjob/rollgate-certs-renew`) succeeds there. The node's CNI (the bridge plugin
alone, support/harness/node/network.py) does NOT enforce NetworkPolicy: nothing here
shows that traffic the policies leave out is dropped, nor that the chart's policies
would let it through on a CNI that enforces them. What is asserted instead, on the
live objects: the chart's policies select every certificate and `helm test` pod that
ran, and give them egress to the API server's ports and, at the webhook port, to pods
their rule selects, which are the live webhook pods.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from harness.kits.node import (
    NAMESPACE,
    RECONCILER,
    WEBHOOK,
    PodWatch,
    Release,
    image_values,
    merged,
    renew_now,
    selects,
    wait_ready,
)
from harness.node.cluster import NodeCluster
from harness.plane import ControlPlane
from testkit.waits import wait_for

TAINT = {"key": "rollgate-test", "value": "only", "effect": "NoSchedule"}
PRIORITY_CLASS = "rollgate-test"
MARK = "rollgate.dev/placement-test"
DENY = "default-deny"
DEFAULT_DENY = {
    "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
    "metadata": {"name": DENY, "namespace": NAMESPACE},
    "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}}
# What the webhook pods need under default-deny (their look-ups go to the API server).
API_SERVER_EGRESS = [{"ports": [{"port": 443, "protocol": "TCP"},
                                {"port": 6443, "protocol": "TCP"}]}]
RENEWAL = "renew-now"


def node_name(plane: ControlPlane) -> str:
    (node,) = plane.get_json("nodes")["items"]
    name: str = node["metadata"]["name"]
    return name


def placement(node: str) -> dict[str, Any]:
    """The six values, set once on the webhook; every other pod falls back to them."""
    return {
        "nodeSelector": {"kubernetes.io/hostname": node},
        "tolerations": [{**TAINT, "operator": "Equal"}],
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{
                "key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}},
        "priorityClassName": PRIORITY_CLASS,
        "podLabels": {MARK: "labelled"},
        "podAnnotations": {MARK: "annotated"},
    }


@pytest.fixture(scope="module")
def installed(node: NodeCluster) -> Iterator[tuple[Release, PodWatch, str]]:
    """One install for the module: the node tainted, the namespace default-deny, the
    chart's policies on; every pod of the namespace watched from before the install to
    the end of the renewal run."""
    plane = node.plane
    name = node_name(plane)
    taint = f"{TAINT['key']}={TAINT['value']}:{TAINT['effect']}"
    plane.kubectl("create", "priorityclass", PRIORITY_CLASS, "--value=1000")
    rel = Release(node)
    try:
        plane.kubectl("create", "namespace", NAMESPACE)
        plane.kubectl("apply", "-f", "-", input=json.dumps(DEFAULT_DENY))
        plane.kubectl("taint", "node", name, taint)
        values = merged(image_values(node.images.rollgate), {
            "webhook": placement(name), "reconciler": placement(name),
            "networkPolicy": {"enabled": True, "webhook": {"egress": API_SERVER_EGRESS},
                              "reconciler": {"egress": API_SERVER_EGRESS}}})
        with PodWatch(plane, NAMESPACE) as watch:
            rel.install(values)
            yield rel, watch, name
    finally:
        plane.kubectl("taint", "node", name, f"{taint}-", check=False)
        rel.uninstall()
        plane.kubectl("delete", "priorityclass", PRIORITY_CLASS, check=False)


def test_every_pod_is_placed_and_marked(installed: tuple[Release, PodWatch, str],
                                        namespace: str) -> None:
    rel, watch, name = installed
    plane = rel.plane
    check_the_taint_keeps_other_pods_off(rel.cluster, namespace)
    wait_ready(plane, NAMESPACE, selector=WEBHOOK, count=2)
    wait_ready(plane, NAMESPACE, selector=RECONCILER, count=2)
    tested = rel.test()
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "3 of 3 checks passed" in tested.stdout + tested.stderr
    renew_now(plane, RENEWAL)
    want = placement(name)
    by_kind: dict[str, list[str]] = {}
    for pod_name, pod in watch.seen.items():
        kind = pod["metadata"]["labels"]["app.kubernetes.io/name"]
        by_kind.setdefault(kind, []).append(pod_name)
        spec = pod["spec"]
        assert spec["nodeName"] == name, pod_name
        for key in ("nodeSelector", "affinity", "priorityClassName"):
            assert spec[key] == want[key], (pod_name, key, spec.get(key))
        # The node adds the not-ready/unreachable tolerations; ours must be there.
        assert want["tolerations"][0] in spec["tolerations"], (pod_name, spec["tolerations"])
        assert pod["metadata"]["labels"][MARK] == "labelled", pod_name
        assert pod["metadata"]["annotations"][MARK] == "annotated", pod_name
    # Each pod ran: the Deployments', the two hook Jobs', the renewal's and the test's.
    certs = by_kind.get("rollgate-certs", [])
    assert sorted(n.rsplit("-", 1)[0] for n in certs) == [
        "renew-now", "rollgate-certs-inject", "rollgate-certs-secret"], certs
    assert by_kind.get("rollgate-selftest") == ["rollgate-selftest"], by_kind
    assert (len(by_kind["rollgate-webhook"]), len(by_kind["rollgate-reconciler"])) == (2, 2)
    check_policies(plane, watch, certs + by_kind["rollgate-selftest"])


def check_the_taint_keeps_other_pods_off(node: NodeCluster, namespace: str) -> None:
    """The premise: a pod of the same image without the toleration is refused by the
    scheduler for the taint (so the chart's pods ran because of their values)."""
    image = node.images.rollgate
    node.plane.kubectl("run", "untolerated", "-n", namespace,
                       f"--image={image.repository}:{image.tag}", "--image-pull-policy=Never",
                       "--restart=Never", "--command", "--", "true")

    def refused() -> str:
        pod = node.plane.get_json("-n", namespace, "pod", "untolerated")
        for condition in pod.get("status", {}).get("conditions") or []:
            if condition["type"] == "PodScheduled" and condition.get("reason") == "Unschedulable":
                return str(condition.get("message", ""))
        return ""

    message = wait_for("the scheduler to refuse a pod without the toleration", refused,
                       timeout=60)
    # The scheduler's message names no key; the node's only taint is the test's.
    assert "had untolerated taint" in message, message
    (stored,) = node.plane.get_json("nodes")["items"]
    assert [{k: t[k] for k in TAINT} for t in stored["spec"]["taints"]] == [TAINT]


def check_policies(plane: ControlPlane, watch: PodWatch, job_pods: list[str]) -> None:
    """The chart's policies, as stored, select every Job and test pod that ran and let
    it reach the API server's ports and the live webhook pods at the webhook port. (The
    CNI does not enforce them: see the module's docstring.)"""
    policies = [p for p in plane.get_json("-n", NAMESPACE, "networkpolicies")["items"]
                if p["metadata"]["name"] != DENY]
    webhook_pods = [p["metadata"]["labels"] for p in
                    plane.get_json("-n", NAMESPACE, "pods", "-l", WEBHOOK)["items"]]
    for pod_name in job_pods:
        labels = watch.seen[pod_name]["metadata"]["labels"]
        mine = [p["spec"] for p in policies if selects(p["spec"]["podSelector"], labels)]
        assert mine, (pod_name, labels)
        egress = [rule for spec in mine if "Egress" in spec["policyTypes"]
                  for rule in spec.get("egress") or []]
        ports = {(port["port"], bool(rule.get("to"))) for rule in egress
                 for port in rule["ports"]}
        assert {(443, False), (6443, False), (8443, True)} <= ports, (pod_name, egress)
        (to_webhook,) = [rule for rule in egress if rule.get("to")]
        (peer,) = to_webhook["to"]
        assert all(selects(peer["podSelector"], w) for w in webhook_pods), peer
