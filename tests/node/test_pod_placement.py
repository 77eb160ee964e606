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

The release namespace has a default-deny NetworkPolicy (ingress and egress), the
chart's NetworkPolicies are enabled, and kube-router's firewall enforces them all on the
node (harness.upstream.kube_router) from before the install to the end: the hook Jobs
ran under them, and so do `helm test` and a renewal run (`kubectl create job
--from=cronjob/rollgate-certs-renew`) that must reach every webhook pod (a second CA in
the caBundles leaves them only once a TLS handshake to each pod shows the serving
certificate). That the policies are enforced is shown first: a pod of the namespace that
no policy of the chart selects cannot open a connection to a webhook pod, and the same
pod labelled as a certificate pod can. The stored policies are checked too: they select
every certificate and `helm test` pod that ran.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterator
from typing import Any

import pytest
from cryptography import x509

from certs.pki import build_ca, cert_pem
from harness.kits.node import (
    NAMESPACE,
    RECONCILER,
    RENEW_CRONJOB,
    WEBHOOK,
    PodWatch,
    Release,
    image_values,
    merged,
    renew_now,
    selects,
    wait_ready,
)
from harness.kits.plane import ca_bundles
from harness.node.cluster import NodeCluster
from harness.plane import ControlPlane
from harness.upstream import kube_router
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
CERTS_POD = {"app.kubernetes.io/name": "rollgate-certs"}
# A probe connects this long after it starts, by when kube-router filters its traffic
# (the test checks that it did before the probe connected).
PROBE_DELAY = 20
PROBES = UNSELECTED, AS_CERTS = "probe-unselected", "probe-as-certs"


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
        with kube_router.running_firewall(node), PodWatch(plane, NAMESPACE) as watch:
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
    check_the_policies_are_enforced(rel.cluster)
    tested = rel.test()
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "3 of 3 checks passed" in tested.stdout + tested.stderr
    check_a_renewal_reaches_every_webhook_pod(plane)
    want = placement(name)
    by_kind: dict[str, list[str]] = {}
    for pod_name, pod in watch.seen.items():
        if pod_name in PROBES:  # the test's own, placed by hand
            continue
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
    # The CronJob's own hourly run (renewSchedule "17 * * * *") may fall in the test: one
    # more certificate pod, checked like the others, besides the three every run has.
    ours = [n for n in certs if not n.startswith(f"{RENEW_CRONJOB}-")]
    assert sorted(n.rsplit("-", 1)[0] for n in ours) == [
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


def probe(node: NodeCluster, name: str, *, labels: dict[str, str], ip: str) -> str:
    """A pod of the release namespace with ``labels`` opens a TCP connection to ``ip``
    at the webhook port once kube-router filters its traffic: ``connected``, or
    ``blocked`` and why."""
    image = node.images.rollgate
    script = ("import socket, sys, time\n"
              f"time.sleep({PROBE_DELAY})\n"
              "try:\n"
              f"    socket.create_connection(({ip!r}, 8443), timeout=10).close()\n"
              "except OSError as e:\n"
              "    sys.exit(f'blocked: {e!r}')\n"
              "print('connected')\n")
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
           "spec": {"restartPolicy": "Never", "priorityClassName": PRIORITY_CLASS,
                    "tolerations": [{**TAINT, "operator": "Equal"}],
                    "containers": [{"name": "probe", "image": f"{image.repository}:{image.tag}",
                                    "imagePullPolicy": "Never",
                                    "command": ["python3", "-c", script]}]}}
    plane = node.plane
    plane.kubectl("apply", "-f", "-", input=json.dumps(pod))

    def stored() -> dict[str, Any]:
        found: dict[str, Any] = plane.get_json("-n", NAMESPACE, "pod", name)
        return found
    pod_ip = wait_for(f"{name}'s address", lambda: stored()["status"].get("podIP"),
                      timeout=60)
    # Within half the probe's delay, so the rule was there before it connected.
    wait_for(f"kube-router to filter {name}'s traffic", lambda: kube_router.filters(pod_ip),
             timeout=PROBE_DELAY / 2, interval=0.5)

    def finished() -> str | None:
        phase = str(stored()["status"]["phase"])
        return phase if phase in ("Succeeded", "Failed") else None
    phase = wait_for(f"{name} to finish", finished, timeout=PROBE_DELAY + 60)
    log = plane.kubectl("-n", NAMESPACE, "logs", name, check=False)
    plane.kubectl("-n", NAMESPACE, "delete", "pod", name, "--wait=false")
    said = (log.stdout + log.stderr).strip()
    assert said.startswith("connected" if phase == "Succeeded" else "blocked: "), (phase, said)
    return said


def check_the_policies_are_enforced(node: NodeCluster) -> None:
    """A pod no policy of the chart selects is cut off from a webhook pod by the
    default-deny policy; labelled as the certificate pods are, it gets through."""
    webhook_pod = node.plane.get_json("-n", NAMESPACE, "pods", "-l", WEBHOOK)["items"][0]
    ip = webhook_pod["status"]["podIP"]
    # kube-router rejects what no policy allows (an ICMP port unreachable): the webhook
    # pod, which the second probe reaches at the same port, is never asked.
    blocked = probe(node, UNSELECTED, labels={"app.kubernetes.io/name": "probe"}, ip=ip)
    assert blocked == "blocked: ConnectionRefusedError(111, 'Connection refused')", blocked
    assert probe(node, AS_CERTS, labels=CERTS_POD, ip=ip) == "connected"


def check_a_renewal_reaches_every_webhook_pod(plane: ControlPlane) -> None:
    """A second CA next to the active one in every caBundle: the renewal run retires it
    only after a TLS handshake to each webhook pod showed the serving certificate."""
    (active,) = ca_bundles(plane)
    extra, _ = build_ca(common_name="rollgate-test-extra", lifetime=dt.timedelta(hours=1))
    both = base64.b64encode(base64.b64decode(active) + cert_pem(extra)).decode()
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        config = plane.get_json(f"{kind}/rollgate")
        patch = [{"op": "replace", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": both}
                 for i in range(len(config["webhooks"]))]
        plane.kubectl("patch", f"{kind}/rollgate", "--type=json", "-p", json.dumps(patch))
    assert ca_bundles(plane) == {both}
    log = renew_now(plane, RENEWAL)
    assert ("caBundle: every webhook endpoint serves a certificate of the active CA: the "
            "other CAs leave the caBundles") in log, log
    assert ca_bundles(plane) == {active}, log
    assert len(x509.load_pem_x509_certificates(base64.b64decode(active))) == 1


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
