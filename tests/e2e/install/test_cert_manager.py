"""The chart's `certificates.source=cert-manager` with the real cert-manager (docs/install.md
"Certificate sources"): its controller issues the webhook's certificate from the chart's
own CA chain, its cainjector puts that CA into both webhook configurations, and the
API server, trusting only the injected caBundle, calls the webhook serving the Secret
cert-manager wrote, by the chart's Service reference and so by the name the Certificate
carries. cert-manager is the pinned release built by `hack/k8s/build.sh cert-manager`;
its CRDs are that release's (`build.sh crds`)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from cryptography import x509

from harness import chart, crds, versions, webhook_probes
from harness.host_rollgate import HostRollgate
from harness.kits.plane import ca_bundles, rollgate_on, running_plane, tool_or_fail
from harness.plane import ControlPlane, PlaneError
from harness.upstream import cert_manager, trees
from testkit.paths import REPO_ROOT
from testkit.waits import wait_for

BUILD = REPO_ROOT / "hack" / "k8s" / "build.sh"
SECRET = "rollgate-webhook-tls"
ISSUING = ("Issuer", "Certificate")


@pytest.fixture(scope="module")
def cm_rollgate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostRollgate]:
    """A plane of its own, with cert-manager's CRDs and processes and rollgate's RBAC: its
    `rollgate` webhook configurations become the chart's, which the session plane's
    webhook must not get."""
    tool_or_fail()
    try:
        cert_manager.binary(cert_manager.CONTROLLER)
    except trees.UpstreamMissing as err:
        pytest.fail(str(err), pytrace=False)
    with running_plane(tmp_path_factory.mktemp("cert-manager")) as plane:
        rollgate = rollgate_on(plane, webhook=False)
        plane.install_crds(crds.from_dir(chart.crd_dirs()[0]))
        try:
            cert_manager.start(plane)
        except PlaneError as err:
            pytest.fail(f"cert-manager did not start: {err}", pytrace=False)
        yield rollgate


def issued_secret(plane: ControlPlane) -> dict[str, bytes] | None:
    """The Secret's files once cert-manager has written all three, else None."""
    out = plane.kubectl("get", "-n", chart.NAMESPACE, f"secret/{SECRET}", "-o", "json",
                        check=False)
    if out.returncode != 0:
        return None
    data = json.loads(out.stdout).get("data") or {}
    files = {k: base64.b64decode(v) for k, v in data.items()}
    return files if all(files.get(k) for k in ("ca.crt", "tls.crt", "tls.key")) else None


def reached_by_service(config: dict[str, Any], port: int) -> dict[str, Any]:
    """The chart's configuration as rendered, but for the Service port: the API server
    resolves the Service reference (see `external_name_service`) and dials that port,
    where this host's webhook listens instead of 443."""
    for hook in config["webhooks"]:
        assert hook["clientConfig"]["service"]["port"] == 443
        hook["clientConfig"]["service"]["port"] = port
    return config


def external_name_service(service: dict[str, Any]) -> dict[str, Any]:
    """The chart's webhook Service as an ExternalName for `localhost`: this plane has no
    Pods behind a ClusterIP. The API server resolves a Service reference of that type to
    `https://localhost:<port>` and still verifies the serving certificate against
    `<name>.<namespace>.svc`, which is what the chart's Certificate names (it names no
    IP, so a URL client config to 127.0.0.1 would not prove the chart right)."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": service["metadata"]["name"],
                         "namespace": service["metadata"]["namespace"]},
            "spec": {"type": "ExternalName", "externalName": "localhost"}}


def test_cert_manager_issues_injects_and_the_webhook_serves(cm_rollgate, tmp_path):
    plane = cm_rollgate.plane
    objects = chart.render({"certificates": {"source": "cert-manager"}})
    issuing = [o for o in objects if o["kind"] in ISSUING]
    assert sorted((o["kind"], o["metadata"]["name"]) for o in issuing) == [
        ("Certificate", "rollgate-ca"), ("Certificate", "rollgate-webhook"),
        ("Issuer", "rollgate-ca"), ("Issuer", "rollgate-selfsigned")]
    plane.apply_objects(issuing, server_side=True)
    files = wait_for(f"cert-manager to issue Secret {SECRET}", lambda: issued_secret(plane))

    # Issued by the chart's CA for the chart's names; ca.crt is that CA.
    (certificate,) = [o for o in issuing if o["metadata"]["name"] == "rollgate-webhook"]
    leaf = x509.load_pem_x509_certificate(files["tls.crt"])
    ca = x509.load_pem_x509_certificate(files["ca.crt"])
    names = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == certificate["spec"]["dnsNames"]
    assert leaf.issuer == ca.subject
    assert ca.subject.rfc4514_string() == "CN=rollgate-ca"
    leaf.verify_directly_issued_by(ca)

    # The webhook serves that Secret's certificate (cert-manager writes no CA key, and
    # nothing here reads one).
    cm_rollgate.serve_files(files, tmp_path / "served")
    port = urlsplit(cm_rollgate.webhook_url).port
    assert port
    (service,) = [o for o in objects if o["kind"] == "Service"
                  and o["metadata"]["name"] == "rollgate-webhook"]
    configs = [reached_by_service(o, port) for o in objects
               if o["kind"].endswith("WebhookConfiguration")]
    assert all("caBundle" not in w["clientConfig"] for c in configs for w in c["webhooks"])
    plane.apply_objects([external_name_service(service), *configs], server_side=True)

    bundle = base64.b64encode(files["ca.crt"]).decode()
    wait_for("the cainjector to inject the CA into both configurations",
             lambda: ca_bundles(plane) == {bundle})

    # The API server takes configuration changes up asynchronously: until it does, the
    # validating webhook may fail closed instead of answering.
    probe_invalid, probe_valid = webhook_probes.probes()

    def denial() -> str:
        out = plane.kubectl("create", "--dry-run=server", "-f", "-",
                            input=json.dumps(probe_invalid), check=False)
        return out.stderr if "denied the request" in out.stderr else ""

    denied = wait_for("rollgate's denial through the API server", denial)
    assert 'admission webhook "validate-stages.rollgate.dev" denied the request' in denied
    allowed = plane.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                            input=json.dumps(probe_valid))
    # The mutating webhook answered too (it lowercases the probe's digest).
    assert webhook_probes.PROBE_DIGEST in allowed.stdout


def test_the_plain_crds_are_the_pinned_release_without_template_actions():
    """`build.sh crds` fills in the labels cert-manager's chart templates; nothing else of
    the release's files changes and no template action is left."""
    tool_or_fail()
    found = crds.from_dir(chart.crd_dirs()[0])
    assert sorted(c["spec"]["names"]["kind"] for c in found) == [
        "Certificate", "CertificateRequest", "Challenge", "ClusterIssuer", "Issuer", "Order"]
    for crd in found:
        assert crd["metadata"]["labels"] == {"app": "cert-manager",
                                             "app.kubernetes.io/name": "cert-manager",
                                             "app.kubernetes.io/instance": "cert-manager"}
        assert "{{" not in json.dumps(crd)
    assert f"crds-cert-manager-{versions.cert_manager()}" in str(chart.crd_dirs()[0])


def test_build_sh_reuses_cert_manager_at_the_pinned_version():
    tool_or_fail()
    out = subprocess.run(["bash", str(BUILD), "cert-manager"], capture_output=True,
                         text=True, timeout=600, check=False)
    assert out.returncode == 0, out.stderr
    for name in (cert_manager.CONTROLLER, cert_manager.CAINJECTOR):
        assert f"{name}: cached at {cert_manager.binary(name)}" in out.stderr
    assert f"cert-manager-{versions.cert_manager()}" in out.stdout


def test_build_sh_refuses_a_wrapper_module_that_pins_another_release(tmp_path: Path):
    """versions.env and hack/cert-manager/go.mod must agree; a copy of hack/ whose
    versions.env pins another release is refused before anything is built."""
    hack = tmp_path / "hack"
    shutil.copytree(REPO_ROOT / "hack", hack,
                    ignore=shutil.ignore_patterns("__pycache__"))
    env_file = hack / "versions.env"
    pinned = versions.cert_manager()
    env_file.write_text(env_file.read_text().replace(
        f"CERT_MANAGER_VERSION={pinned}", "CERT_MANAGER_VERSION=v1.11.4"))
    out = subprocess.run(["bash", str(hack / "k8s" / "build.sh"), "cert-manager"],
                         capture_output=True, text=True, timeout=120, check=False,
                         env={**os.environ, "ROLLGATE_K8S_CACHE": str(tmp_path / "cache")})
    assert out.returncode == 1
    assert (f"{hack}/cert-manager/go.mod requires github.com/cert-manager/cert-manager "
            f"{pinned}, hack/versions.env pins v1.11.4") in out.stderr
    assert "building" not in out.stderr
