"""rollgate installed as a user installs a release (docs/install.md "Get the image and
the chart"), on a node that never had rollgate's image: `make release` (on the local
stand-in base) and `make publish` to the harness's registry on the node's bridge address
(TLS from its test CA, which containerd trusts through hosts.toml's `ca`; basic auth),
then `helm install rollgate oci://<registry>/charts/rollgate --version <v>` with the image
by digest and an imagePullSecret: the kubelet pulls it (its Pulled event says so), every
pod is Ready and `helm test` passes; then the production kustomization with the same
image by digest. First, the two mistakes users make, each an ErrImagePull whose event says
which: a digest the registry does not have, and no pull secret.

These tests use ``bare_node`` (the session's node before rollgate's image was imported);
tests/node/conftest.py runs them right after the host tests, so nothing else imported it.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from harness.kits.node import (
    NAMESPACE,
    RECONCILER,
    WEBHOOK,
    Kustomized,
    ReadyWatch,
    Release,
    delete_namespace,
    events,
    wait_ready,
)
from harness.node import containerd
from harness.node.cluster import NodeCluster
from harness.plane import ControlPlane
from releasing import release
from releasing.artifacts import Artifacts
from testkit.paths import REPO_ROOT
from testkit.waits import wait_for
from tests.node.test_install import check_helm_test, installed_and_checked

PULL_SECRET = "rollgate-pull"
WRONG_DIGEST = "sha256:" + "0" * 64


@dataclass(frozen=True)
class Published:
    artifacts: Artifacts
    digest: str
    host: str

    @property
    def repository(self) -> str:
        return f"{self.host}/rollgate"

    @property
    def image(self) -> str:
        return f"{self.repository}@{self.digest}"


@pytest.fixture(scope="module")
def published(bare_node: NodeCluster,
              tmp_path_factory: pytest.TempPathFactory) -> Published:
    """`make release` and `make publish REGISTRY=<the node's registry>`, as their
    modules run."""
    root = tmp_path_factory.mktemp("release")
    built = release.release(changelog=root / "CHANGELOG.md", out_dir=root / "dist",
                            today=dt.date.today(), base=release.STAND_IN)
    reg = bare_node.registry
    out = subprocess.run([sys.executable, "-m", "releasing.publish", "--registry", reg.host,
                          "--dist", str(built.artifacts.directory)],
                         env=reg.client_env(dict(os.environ)), capture_output=True,
                         text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr
    assert f"image {reg.host}/rollgate@{built.image_digest}" in out.stdout, out.stdout
    return Published(artifacts=built.artifacts, digest=built.image_digest, host=reg.host)


def pull_secret(node: NodeCluster, namespace: str) -> None:
    """What a user makes for a registry that needs credentials."""
    reg = node.registry
    node.plane.kubectl("-n", namespace, "create", "secret", "docker-registry", PULL_SECRET,
                       f"--docker-server={reg.host}", f"--docker-username={reg.username}",
                       f"--docker-password={reg.password}")


def node_has(node: NodeCluster, digest: str) -> bool:
    """Whether containerd holds an image with this manifest digest, by any name."""
    listing = containerd.ctr(node.settings, "images", "ls").stdout
    return digest in listing


def pod(name: str, image: str, *, secret: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{
        "name": "rollgate", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["python", "-c", "import time; time.sleep(3600)"],
        "securityContext": {"runAsUser": 65532, "runAsNonRoot": True,
                            "allowPrivilegeEscalation": False}}]}
    if secret:
        spec["imagePullSecrets"] = [{"name": PULL_SECRET}]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name}, "spec": spec}


def pull_failure(plane: ControlPlane, namespace: str, name: str) -> tuple[str, str]:
    """The pod's waiting reason once it is ErrImagePull or ImagePullBackOff, and the
    kubelet's Failed event for it."""
    def failed() -> tuple[str, str] | None:
        got = plane.get_json("-n", namespace, "pod", name)
        states = [c.get("state", {}).get("waiting", {})
                  for c in got.get("status", {}).get("containerStatuses") or []]
        reasons = [s.get("reason", "") for s in states]
        # The kubelet's Failed events: "Failed to pull image ...: <cause>", then
        # "Error: ErrImagePull" and "Error: ImagePullBackOff"; the first says why.
        messages = [str(e.get("message", "")) for e in events(plane, namespace)
                    if e.get("involvedObject", {}).get("name") == name
                    and e.get("reason") == "Failed"
                    and str(e.get("message", "")).startswith("Failed to pull image")]
        if messages and any(r in ("ErrImagePull", "ImagePullBackOff") for r in reasons):
            return reasons[0], messages[0]
        return None
    return wait_for(f"pod {name} to fail its pull", failed, timeout=120)


@pytest.fixture
def user_namespace(bare_node: NodeCluster) -> Iterator[str]:
    name = f"pulls-{int(time.time())}"
    bare_node.plane.kubectl("create", "namespace", name)
    yield name
    delete_namespace(bare_node.plane, name)


def test_a_wrong_digest_and_a_missing_pull_secret_are_errimagepull(
        bare_node: NodeCluster, published: Published, user_namespace: str) -> None:
    """What docs/install.md "When a pod does not start" tells users to look for."""
    plane = bare_node.plane
    assert not node_has(bare_node, published.digest), "rollgate's image is on the node already"
    pull_secret(bare_node, user_namespace)
    wrong = pod("wrong-digest", f"{published.repository}@{WRONG_DIGEST}", secret=True)
    anonymous = pod("no-pull-secret", published.image, secret=False)
    for obj in (wrong, anonymous):
        plane.kubectl("apply", "-n", user_namespace, "-f", "-", input=json.dumps(obj))

    reason, message = pull_failure(plane, user_namespace, "wrong-digest")
    print(f"wrong digest: {reason}: {message}")
    assert "not found" in message, message
    reason, message = pull_failure(plane, user_namespace, "no-pull-secret")
    print(f"no pull secret: {reason}: {message}")
    assert "401 Unauthorized" in message, message
    assert not node_has(bare_node, published.digest), "a pull without credentials got it"


def pulled_events(plane: ControlPlane, namespace: str, image: str) -> list[str]:
    """The kubelet's Pulled events for ``image`` that say it was pulled (not 'already
    present on machine')."""
    return [str(e.get("message", "")) for e in events(plane, namespace)
            if e.get("reason") == "Pulled" and f'"{image}"' in str(e.get("message", ""))
            and "Successfully pulled" in str(e.get("message", ""))]


def check_pods_run(plane: ControlPlane, image: str) -> None:
    """Both Deployments' pods Ready, asking for ``image`` (by digest), and running it: the
    kubelet's imageID is that digest in that repository."""
    found = (wait_ready(plane, NAMESPACE, selector=WEBHOOK, count=2)
             + wait_ready(plane, NAMESPACE, selector=RECONCILER, count=2))
    for item in found:
        assert [c["image"] for c in item["spec"]["containers"]] == [image]
        for status in item["status"]["containerStatuses"]:
            assert status["imageID"] == image, status


def test_helm_install_from_oci_with_the_image_by_digest(bare_node: NodeCluster,
                                                        published: Published,
                                                        user_namespace: str) -> None:
    """As docs/install.md "Install from the registry" says; the image was never on the
    node, so the kubelet pulled it from the registry."""
    plane = bare_node.plane
    assert not node_has(bare_node, published.digest), "rollgate's image is on the node already"
    plane.kubectl("create", "namespace", NAMESPACE)
    pull_secret(bare_node, NAMESPACE)
    version = published.artifacts.version
    rel = Release(bare_node, chart_path=f"oci://{published.host}/charts/rollgate",
                  version=version, registry=bare_node.registry)
    values = {"image": {"repository": published.repository, "digest": published.digest},
              "imagePullSecrets": [{"name": PULL_SECRET}],
              "selftest": {"namespace": user_namespace}}
    with ReadyWatch(plane, NAMESPACE) as watch:
        out = rel.install(values)
    try:
        assert f"Pulled: {published.host}/charts/rollgate:{version}" in out.stderr + out.stdout
        pulls = pulled_events(plane, NAMESPACE, published.image)
        assert pulls, "no Pulled event for the image: was it pulled?"
        for line in pulls:
            print(f"kubelet: {line}")
        check_pods_run(plane, published.image)
        installed_and_checked(bare_node, user_namespace, watch)
        check_helm_test(rel)
    finally:
        rel.uninstall()


def test_the_kustomization_with_the_same_image_by_digest(bare_node: NodeCluster,
                                                         published: Published,
                                                         user_namespace: str,
                                                         tmp_path: Path) -> None:
    """`kustomize edit set image rollgate.invalid/rollgate=<REGISTRY>/rollgate@<digest>`
    in an overlay, the pull secret on both Deployments and the renewal CronJob, then the
    steps of docs/install.md "Deployment"."""
    plane = bare_node.plane
    secrets = [{"name": PULL_SECRET}]
    install = Kustomized(bare_node, tmp_path, image={
        "newName": published.repository, "digest": published.digest}, patches=[
        {"target": {"kind": "Deployment"}, "patch": json.dumps([
            {"op": "add", "path": "/spec/template/spec/imagePullSecrets", "value": secrets}])},
        {"target": {"kind": "CronJob"}, "patch": json.dumps([
            {"op": "add", "path": "/spec/jobTemplate/spec/template/spec/imagePullSecrets",
             "value": secrets}])}])
    plane.kubectl("apply", "-k", str(REPO_ROOT / "manifests" / "namespace"))
    pull_secret(bare_node, NAMESPACE)
    with ReadyWatch(plane, NAMESPACE) as watch:
        install.install()
    try:
        check_pods_run(plane, published.image)
        installed_and_checked(bare_node, user_namespace, watch)
        cronjob = plane.get_json("-n", NAMESPACE, "cronjob", "rollgate-certs-renew")
        pod = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        assert pod["imagePullSecrets"] == secrets
        assert pod["containers"][0]["image"] == published.image
    finally:
        install.uninstall()
