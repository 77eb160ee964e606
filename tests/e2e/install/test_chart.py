"""The Helm chart (charts/rollgate) against the real API server: `helm lint`, `helm
template` with the default values and each certificate source applied as a server-side
dry run (the cert-manager and monitoring.coreos.com CRDs from their projects' modules,
hack/k8s/build.sh crds), the same objects as manifests/ for the same settings, and the
job source's hook Jobs and renewal CronJob run end to end on a plane of its own: Secrets
created, CA injected, a CA rotated, and the webhook serving through the API server after
every step."""

from __future__ import annotations

import base64
import copy
import json
import os
import ssl
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import chart, crds, webhook_probes
from harness.host_rollgate import HostRollgate
from harness.kits.plane import ca_bundles, rollgate_on, running_plane, tool_or_fail
from harness.plane import ControlPlane
from harness.process import free_port, host_address, http_ok
from testkit.paths import REPO_ROOT

SOURCES = ("secret", "cert-manager", "job")
MONITORING = {"serviceMonitor": {"enabled": True}, "prometheusRule": {"enabled": True},
              "dashboard": {"enabled": True}}
HOOK = "helm.sh/hook"
# Every pod value of the chart set away from its default, on both processes.
POD_VALUES = {
    "extraEnv": [{"name": "HTTPS_PROXY", "value": "http://proxy.invalid:3128"},
                 {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {
                     "name": "corp", "key": "token", "optional": True}}}],
    "volumes": [{"name": "corp-ca", "configMap": {"name": "corp-ca", "optional": True}}],
    "volumeMounts": [{"name": "corp-ca", "mountPath": "/etc/corp-ca", "readOnly": True}],
    "podLabels": {"team": "platform"},
    "podSecurityContext": {"runAsUser": None, "runAsGroup": None},
    "containerSecurityContext": {"runAsNonRoot": True},
    "priorityClassName": "system-cluster-critical",
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                   "whenUnsatisfiable": "DoNotSchedule"}],
    "startupProbe": {"periodSeconds": 2, "timeoutSeconds": 4, "failureThreshold": 30},
    "readinessProbe": {"periodSeconds": 7, "timeoutSeconds": 2, "failureThreshold": 2},
    "livenessProbe": {"periodSeconds": 20, "timeoutSeconds": 5, "failureThreshold": 6},
    "podDisruptionBudget": {"minAvailable": "50%"},
}
NETWORK_POLICY = {
    "enabled": True,
    "webhook": {"egress": [{"ports": [{"port": 53, "protocol": "UDP"}]}]},
    "reconciler": {"metricsNamespaceSelector": {
        "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},
}


@pytest.fixture(scope="module")
def chart_crds(control_plane: ControlPlane) -> None:
    """cert-manager's and the Prometheus Operator's CRDs on the session plane."""
    tool_or_fail()
    control_plane.install_crds([c for d in chart.crd_dirs() for c in crds.from_dir(d)])


def test_helm_lint_default_and_every_source():
    tool_or_fail()
    for values in ({}, *({"certificates": {"source": s}} for s in SOURCES)):
        out = chart.lint({**values, "monitoring": MONITORING, "networkPolicy": NETWORK_POLICY})
        assert out.returncode == 0, out.stdout + out.stderr
        assert "0 chart(s) failed" in out.stdout


def test_helm_lint_refuses_a_broken_chart(tmp_path):
    """The lint can fail: a template that does not parse fails it."""
    tool_or_fail()
    broken = tmp_path / "rollgate"
    import shutil

    shutil.copytree(chart.CHART, broken)
    (broken / "templates" / "broken.yaml").write_text("{{ .Values.nothing.here }\n")
    out = chart.helm("lint", str(broken), check=False)
    assert out.returncode != 0


def kinds(objects: list[dict[str, Any]]) -> set[str]:
    return {o["kind"] for o in objects}


@pytest.mark.parametrize("values", [
    {},
    *({"certificates": {"source": s}, "monitoring": MONITORING} for s in SOURCES),
    {"reconciler": {"stageVerification": "engine"}, "certificates": {"source": "secret"}},
    {"reconciler": {"refreshLagging": True, "shard": "east", "defaultShard": True,
                    "namespaces": ["a", "b"], "pluginsCA": {"configMap": "corp-ca"},
                    "pluginsMaxDownloadBytes": 1048576, "observeLagSeconds": 30},
     "webhook": {"maxConnections": 500, "logLevel": "debug", "allowHttpPlugins": True}},
    {"webhook": POD_VALUES, "reconciler": {**POD_VALUES, "pluginsCA": {"configMap": "corp"}}},
    {"networkPolicy": NETWORK_POLICY},
    {"admissionPolicy": {"enabled": True}, "webhook": {"failurePolicy": "Ignore",
                                                       "allowHttpPlugins": True}},
], ids=["default", *SOURCES, "engine", "flags", "pod-values", "network-policy",
        "admission-policy"])
def test_template_applies_as_server_side_dry_run(control_plane, chart_crds, values):
    objects = chart.render(values)
    source = values.get("certificates", {}).get("source", "job")
    if source == "cert-manager":
        assert {"Certificate", "Issuer"} <= kinds(objects)
    if source == "job":
        assert {"Job", "CronJob"} <= kinds(objects)
    if values.get("monitoring"):
        assert {"ServiceMonitor", "PrometheusRule"} <= kinds(objects)
    if values.get("networkPolicy"):
        # The webhook's, the reconciler's, the Jobs' and its pre-install hook copy.
        assert [o["kind"] for o in objects].count("NetworkPolicy") == 4
    if values.get("admissionPolicy"):  # the API server compiles the CEL: a typo is refused
        assert [o["kind"] for o in objects].count("ValidatingAdmissionPolicy") == 2
    # The session plane has its own `rollgate` webhook configurations (by URL); a
    # dry-run apply would merge this clientConfig.service into their url. Under another
    # name the API server validates the same content.
    for obj in objects:
        if obj["kind"].endswith("WebhookConfiguration"):
            obj["metadata"]["name"] = "rollgate-chart-dry-run"
    doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    # A server-side dry run creates nothing, so the objects in a namespace the chart
    # renders itself (helm test's) need it to exist for real meanwhile.
    made = [o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"
            and control_plane.kubectl("get", "namespace", o["metadata"]["name"],
                                      check=False).returncode != 0]
    for name in made:
        control_plane.kubectl("create", "namespace", name)
    try:
        out = control_plane.kubectl("apply", "--server-side", "--force-conflicts",
                                    "--field-manager=helm-dry-run", "--dry-run=server",
                                    "-f", "-", input=doc, check=False)
    finally:
        for name in made:
            control_plane.kubectl("delete", "namespace", name)
    assert out.returncode == 0, out.stderr + out.stdout
    assert out.stdout.count("(server dry run)") == len(objects)


def test_cert_manager_source_injects_instead_of_a_cabundle():
    tool_or_fail()
    objects = chart.render({"certificates": {"source": "cert-manager"}})
    configs = [o for o in objects if o["kind"].endswith("WebhookConfiguration")]
    assert len(configs) == 2
    for config in configs:
        assert config["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": "rollgate-system/rollgate-webhook"}
        assert all("caBundle" not in w["clientConfig"] for w in config["webhooks"])
    (cert,) = [o for o in objects if o["kind"] == "Certificate"
               and o["metadata"]["name"] == "rollgate-webhook"]
    assert cert["spec"]["secretName"] == "rollgate-webhook-tls"
    assert "rollgate-webhook.rollgate-system.svc" in cert["spec"]["dnsNames"]
    assert not [o for o in objects if o["kind"] in ("Job", "CronJob")]


# ---------------------------------------------------------------- chart == manifests/


def essence(objects: list[dict[str, Any]]) -> dict[tuple[str, str, str], Any]:
    """What must agree between the chart and manifests/: every object whole, except
    metadata labels and annotations (the chart adds Helm's), the order of container args
    (argparse ignores it) and the whitespace of CEL expressions."""
    out: dict[tuple[str, str, str], Any] = {}
    for obj in copy.deepcopy(objects):
        meta = obj["metadata"]
        obj["metadata"] = {k: meta[k] for k in ("name", "namespace") if k in meta}
        spec = pod_spec(obj)
        for container in spec.get("containers", []):
            container["args"] = sorted(container.get("args", []))
        # kustomize re-folds the `>-` CEL blocks with an extra blank line before the
        # more-indented lines (helm keeps them as written): the same expression.
        for hook in obj.get("webhooks", []):
            for condition in hook.get("matchConditions", []):
                condition["expression"] = " ".join(condition["expression"].split())
        out[(obj["kind"], meta.get("namespace", ""), meta["name"])] = obj
    return out


def kustomized(kubectl, *parts: str) -> list[dict[str, Any]]:
    """manifests/ ``parts`` rendered, without the release namespace: Helm needs it before
    the release (`--create-namespace`, or `kubectl apply -k manifests/namespace` for its
    Pod Security labels), so the chart never renders it."""
    objects: list[dict[str, Any]] = []
    for part in parts:
        out = kubectl("kustomize", str(REPO_ROOT / "manifests" / part)).stdout
        objects += [d for d in yaml.safe_load_all(out) if d and d["kind"] != "Namespace"]
    return objects


# The image both sides are compared with: neither has a usable default, each install sets
# its own (docs/install.md "Get the image and the chart").
IMAGE = {"repository": "registry.invalid/rollgate", "tag": "compare"}


def pod_spec(obj: dict[str, Any]) -> dict[str, Any]:
    """The pod template's spec of a Deployment, a Job or a CronJob; {} for other kinds."""
    spec = obj.get("spec", {})
    template = spec.get("jobTemplate", {}).get("spec", spec).get("template", {})
    found: dict[str, Any] = template.get("spec", {})
    return found


def set_image(objects: list[dict[str, Any]], image: str) -> list[dict[str, Any]]:
    """manifests/ pointed at ``image``, as `kustomize edit set image
    rollgate.invalid/rollgate=<image>` does (only that image's references)."""
    for obj in objects:
        for container in pod_spec(obj).get("containers", []):
            assert container["image"].startswith("rollgate.invalid/rollgate:"), container
            container["image"] = image
    return objects


def set_reconciler_args(objects, replace: dict[str, str], add: list[str]):
    for obj in objects:
        if obj["kind"] == "Deployment" and obj["metadata"]["name"] == "rollgate-reconciler":
            (container,) = obj["spec"]["template"]["spec"]["containers"]
            container["args"] = [replace.get(a, a) for a in container["args"]] + add
    return objects


@pytest.mark.parametrize("setting", ["production", "engine", "refresh-lagging", "audit"])
def test_chart_renders_the_objects_of_manifests(kubectl, setting):
    """The same settings render the same kinds, names, args, RBAC rules and webhook
    configurations (matchConditions included) from both, pointed at the same image; the
    chart's `job` source renders manifests/certificates (the renewal CronJob, its
    ServiceAccount and RBAC) besides its hooks."""
    tool_or_fail()
    base = {"certificates": {"source": "job"}, "image": IMAGE}
    if setting == "production":
        ours = chart.render(base)
        theirs = kustomized(kubectl, "")
    elif setting == "engine":
        ours = chart.render({**base, "reconciler": {"stageVerification": "engine"}})
        theirs = set_reconciler_args(
            kustomized(kubectl, "", "reconciler-engine"),
            {"--stage-verification=observe": "--stage-verification=engine"}, [])
    elif setting == "refresh-lagging":
        ours = chart.render({**base, "reconciler": {"refreshLagging": True}})
        theirs = set_reconciler_args(kustomized(kubectl, "", "reconciler-refresh"), {},
                                     ["--refresh-lagging"])
    else:  # the overlay sets --plugins-mode=audit and leaves out the plugins' writes
        ours = chart.render({**base, "reconciler": {"pluginsMode": "audit"}})
        theirs = kustomized(kubectl, "overlays/audit")
    theirs = set_image(theirs, f"{IMAGE['repository']}:{IMAGE['tag']}")
    mine, want = essence(without_hooks(ours)), essence(theirs)
    assert sorted(mine) == sorted(want)
    for key in want:
        assert mine[key] == want[key], key
    assert ("CronJob", "rollgate-system", "rollgate-certs-renew") in want


def without_hooks(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The chart's objects but its hooks: `helm test`'s (templates/tests/) and the
    certificate Jobs around install and upgrade, whose steps a kustomize user runs
    (`rollgate certs secret`, `rollgate certs inject`: docs/install.md "Deployment")."""
    return [o for o in objects if HOOK not in (o["metadata"].get("annotations") or {})]


@pytest.mark.parametrize(("kind", "name"), [("ClusterRole", "rollgate-webhook"),
                                           ("Role", "rollgate-certs-renew")])
def test_essence_tells_a_changed_rule_apart(kubectl, kind, name):
    """The comparison can fail: one verb less in a ClusterRole, or in the renewal's Role,
    is a difference."""
    tool_or_fail()
    theirs = set_image(kustomized(kubectl, ""), f"{IMAGE['repository']}:{IMAGE['tag']}")
    ours = without_hooks(chart.render({"certificates": {"source": "job"}, "image": IMAGE}))
    assert essence(ours) == essence(theirs)
    for obj in ours:
        if obj["kind"] == kind and obj["metadata"]["name"] == name:
            obj["rules"][0]["verbs"] = obj["rules"][0]["verbs"][1:]
    assert essence(ours) != essence(theirs)


# ---------------------------------------------------------------- the hook Job for real


@pytest.fixture(scope="module")
def job_rollgate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostRollgate]:
    """A plane of its own with rollgate's RBAC: the Job rewrites the `rollgate` webhook
    configurations, which the session plane's webhook depends on."""
    with running_plane(tmp_path_factory.mktemp("chart-job")) as plane:
        yield rollgate_on(plane, webhook=False)


def run_job(plane: ControlPlane, job: dict[str, Any], tmp: Path) -> str:
    """The Job's container command as the Job's ServiceAccount, on this host: the
    venv's python first on PATH, TMPDIR a fresh directory (the pod's emptyDir)."""
    import subprocess

    (container,) = job["spec"]["template"]["spec"]["containers"]
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update({e["name"]: e["value"] for e in container.get("env", [])})
    env["TMPDIR"] = str(tmp)
    env["KUBECONFIG"] = str(plane.serviceaccount_kubeconfig(
        job["metadata"]["namespace"], job["spec"]["template"]["spec"]["serviceAccountName"]))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(REPO_ROOT)
    out = subprocess.run([*container["command"], *container["args"]], env=env,
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
                         check=False)
    assert out.returncode == 0, out.stderr + out.stdout
    return out.stdout


@dataclass
class JobInstall:
    """A release of the job source on the plane, its webhook served on this host from
    the serving Secret's files (``served``: the pod's Secret volume)."""

    rollgate: HostRollgate
    jobs: dict[str, dict[str, Any]]
    cronjob: dict[str, Any]
    served: Path
    tmp: Path
    runs: int = 0

    @property
    def plane(self) -> ControlPlane:
        return self.rollgate.plane

    def run(self, name: str) -> str:
        """Run hook Job ``name``, or the CronJob's job for ``rollgate-certs-renew``."""
        self.runs += 1
        job = self.jobs.get(name) or {"metadata": self.cronjob["metadata"],
                                      "spec": self.cronjob["spec"]["jobTemplate"]["spec"]}
        return run_job(self.plane, job, self.tmp / f"run-{self.runs}")

    def secret(self, name: str) -> dict[str, Any]:
        secret: dict[str, Any] = json.loads(self.plane.kubectl(
            "get", "-n", "rollgate-system", f"secret/{name}", "-o", "json").stdout)
        return secret

    def secret_files(self, name: str = "rollgate-webhook-tls") -> dict[str, bytes]:
        return {k: base64.b64decode(v) for k, v in self.secret(name)["data"].items()}

    def kubelet_refresh(self) -> None:
        """What the kubelet does a minute after the Secret changed: the mounted files."""
        for name, data in self.secret_files().items():
            (self.served / name).write_bytes(data)


@pytest.fixture(scope="module")
def job_install(job_rollgate: HostRollgate, tmp_path_factory: pytest.TempPathFactory
                ) -> JobInstall:
    tool_or_fail()
    plane = job_rollgate.plane
    objects = chart.render({"certificates": {"source": "job"}})
    hooks = [o for o in objects if HOOK in (o["metadata"].get("annotations") or {})]
    jobs = {o["metadata"]["name"]: o for o in hooks if o["kind"] == "Job"}
    assert {n: j["metadata"]["annotations"][HOOK] for n, j in jobs.items()} == {
        "rollgate-certs-secret": "pre-install,pre-upgrade",
        "rollgate-certs-inject": "post-install,post-upgrade"}
    (cronjob,) = [o for o in objects if o["kind"] == "CronJob"]
    tmp = tmp_path_factory.mktemp("job-install")
    install = JobInstall(job_rollgate, jobs, cronjob, tmp / "served", tmp)
    # What `helm install` does: the pre-install hooks (RBAC, the Secrets' Job), the
    # release's objects, the post-install hook (the caBundle's Job).
    plane.apply_objects([o for o in hooks if o["kind"] != "Job"], server_side=True)
    first = install.run("rollgate-certs-secret")
    assert "Secret/rollgate-system/rollgate-webhook-tls: created" in first
    assert "Secret/rollgate-system/rollgate-webhook-ca: created" in first
    plane.apply_objects([o for o in objects if o not in hooks], server_side=True)
    assert ca_bundles(plane) == {""}
    injected = install.run("rollgate-certs-inject")
    assert "ValidatingWebhookConfiguration/rollgate: caBundle set" in injected
    assert "MutatingWebhookConfiguration/rollgate: caBundle set" in injected

    # The webhook serves that Secret's certificate; the API server, trusting only the
    # injected caBundle, calls it (by URL: this plane has no Service routing), and
    # `rollgate certs renew` finds it through an EndpointSlice of the Service.
    job_rollgate.serve_files(install.secret_files(), install.served)
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        config = json.loads(plane.kubectl("get", f"{kind}/rollgate", "-o", "json").stdout)
        ops = []
        for i, hook in enumerate(config["webhooks"]):
            path = hook["clientConfig"]["service"]["path"]
            ops += [{"op": "remove", "path": f"/webhooks/{i}/clientConfig/service"},
                    {"op": "add", "path": f"/webhooks/{i}/clientConfig/url",
                     "value": job_rollgate.webhook_url + path}]
        plane.kubectl("patch", f"{kind}/rollgate", "--type=json", "-p", json.dumps(ops))
    address, port = _second_webhook(plane, install.served)
    plane.apply_objects([{
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "rollgate-webhook-host", "namespace": "rollgate-system",
                     "labels": {"kubernetes.io/service-name": "rollgate-webhook"}},
        "addressType": "IPv4", "ports": [{"name": "https", "port": port, "protocol": "TCP"}],
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
    }], server_side=True)
    return install


def _second_webhook(plane: ControlPlane, served: Path) -> tuple[str, int]:
    """A second webhook "pod" on the same files, on the host's own address (an
    EndpointSlice refuses loopback, where the first serves the API server)."""
    try:
        address = host_address()
    except OSError as err:
        pytest.fail(f"no host address for the EndpointSlice: {err}", pytrace=False)
    port = free_port()
    url = f"https://{address}:{port}"
    context = ssl.create_default_context()
    context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
    plane.spawn("webhook-endpoint", [
        sys.executable, "-m", "webhook", "--bind", f"{address}:{port}",
        "--tls-cert-file", str(served / "tls.crt"), "--tls-key-file", str(served / "tls.key"),
    ], url=url, env=plane.child_env(PYTHONPATH=str(REPO_ROOT)), cwd=REPO_ROOT,
        ready_check=lambda: http_ok(url + "/readyz", context)).wait_ready(30)
    return address, port


def _admission_works(plane: ControlPlane) -> None:
    """An invalid Stage denied and a valid RolloutManager defaulted: both webhooks
    answered, over TLS the API server verified with the caBundle."""
    probe_invalid, probe_valid = webhook_probes.probes()
    deadline = time.monotonic() + 30  # the API server loads a new configuration
    while True:
        denied = plane.kubectl("create", "--dry-run=server", "-f", "-",
                               input=json.dumps(probe_invalid), check=False)
        if "denied the request" in denied.stderr or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert 'admission webhook "validate-stages.rollgate.dev" denied the request' in (
        denied.stderr), denied.stderr
    allowed = plane.kubectl("create", "--dry-run=server", "-o", "json", "-f", "-",
                            input=json.dumps(probe_valid))
    # The mutating webhook answered too (it lowercases the probe's digest).
    assert webhook_probes.PROBE_DIGEST in allowed.stdout


def _versions(plane: ControlPlane) -> list[str]:
    """resourceVersions of everything renewal may write."""
    refs = (("-n", "rollgate-system", "secret/rollgate-webhook-tls"),
            ("-n", "rollgate-system", "secret/rollgate-webhook-ca"),
            ("validatingwebhookconfiguration/rollgate",),
            ("mutatingwebhookconfiguration/rollgate",))
    return [plane.kubectl("get", *ref, "-o", "jsonpath={.metadata.resourceVersion}").stdout
            for ref in refs]


def test_job_source_issues_injects_and_the_webhook_serves(job_install: JobInstall) -> None:
    plane = job_install.plane
    secret = job_install.secret("rollgate-webhook-tls")
    assert secret["type"] == "kubernetes.io/tls"
    files = job_install.secret_files()
    assert ca_bundles(plane) == {base64.b64encode(files["ca.crt"]).decode()}
    assert job_install.secret_files("rollgate-webhook-ca")["ca.crt"] == files["ca.crt"]
    _admission_works(plane)

    # An upgrade runs both Jobs again, the CronJob runs: nothing is due, nothing written.
    before = _versions(plane)
    again = job_install.run("rollgate-certs-secret")
    assert "rollgate-webhook-tls: kept" in again and "rollgate-webhook-ca: kept" in again
    for name in ("rollgate-certs-inject", "rollgate-certs-renew"):
        assert job_install.run(name).startswith("nothing to do"), name
    assert _versions(plane) == before
    _admission_works(plane)


def test_renew_rotates_a_lost_ca_without_a_failed_call(job_install: JobInstall) -> None:
    """A release from before the CA Secret (its CA key gone): the CronJob's runs bring in
    a new CA, re-issue the certificate, and retire the old CA only once the webhook
    serves the new certificate; admission works after every step."""
    plane = job_install.plane
    old = job_install.secret_files()
    plane.kubectl("patch", "-n", "rollgate-system", "secret/rollgate-webhook-ca",
                  "--type=json", "-p", json.dumps([{"op": "remove", "path": "/data/ca.key"}]))

    first = job_install.run("rollgate-certs-renew")
    assert first.splitlines()[0] == "new CA: the CA Secret has no readable CA", first
    assert "stopping:" in first
    new_ca = job_install.secret_files("rollgate-webhook-ca")["ca.crt"]
    assert new_ca != old["ca.crt"]
    both = base64.b64encode(old["ca.crt"] + new_ca).decode()
    assert ca_bundles(plane) == {both}
    _admission_works(plane)

    second = job_install.run("rollgate-certs-renew")
    assert second.splitlines() == [
        "serving certificate: the serving certificate was signed by another CA",
        "waiting: 1 of 1 webhook endpoints do not serve the renewed certificate yet "
        "(the kubelet refreshes the Secret volume)"], second
    renewed = job_install.secret_files()
    assert renewed["ca.crt"] == new_ca and renewed["tls.crt"] != old["tls.crt"]
    assert ca_bundles(plane) == {both}
    _admission_works(plane)  # the old certificate is still served, and still trusted

    job_install.kubelet_refresh()
    _admission_works(plane)  # the new one is served (the webhook re-reads its files)
    third = job_install.run("rollgate-certs-renew")
    assert third.splitlines()[0].startswith("caBundle: every webhook endpoint serves"), third
    assert ca_bundles(plane) == {base64.b64encode(new_ca).decode()}
    _admission_works(plane)

    before = _versions(plane)
    assert job_install.run("rollgate-certs-renew").startswith("nothing to do")
    assert _versions(plane) == before


def test_build_sh_reuses_helm_and_the_crds_at_the_pinned_versions():
    """`hack/k8s/build.sh helm crds` after `make k8s`: nothing is rebuilt, and the helm
    there is the pinned one (another pin is another directory, so it is built anew)."""
    import subprocess

    from harness import versions

    tool_or_fail()
    build = REPO_ROOT / "hack" / "k8s" / "build.sh"
    for target, line in (("helm", f"helm: cached at {chart.helm_binary()}"),
                         ("crds", "cert-manager-crds: cached at")):
        out = subprocess.run(["bash", str(build), target], capture_output=True, text=True,
                             timeout=600, check=False)
        assert out.returncode == 0, out.stderr
        assert line in out.stderr
    version = chart.helm("version", "--short").stdout.strip()
    assert version.startswith(versions.get("HELM_VERSION") + "+")
    assert f"helm-{versions.get('HELM_VERSION')}" in str(chart.helm_binary())


def container_args(objects: list[dict[str, Any]], name: str) -> list[str]:
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"
                     and o["metadata"]["name"] == name]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def test_values_become_the_documented_flags(tmp_path):
    tool_or_fail()
    objects = chart.render({
        "webhook": {"port": 9443, "maxConnections": 500, "requestTimeout": 7,
                    "cacheTTL": 2.5, "logLevel": "debug", "allowHttpPlugins": True,
                    "lookupTimeout": None},
        "reconciler": {"leaderElect": False, "stageVerification": "engine",
                       "observeGraceSeconds": 90, "shard": "east", "defaultShard": True,
                       "pluginsMode": "audit", "pluginsCA": {"configMap": "corp-ca"},
                       "pluginsMaxDownloadBytes": 268435456, "pluginsDownloadTimeout": 60,
                       "namespaces": ["a", "b"], "rolloutsDeployment": "rollouts",
                       "allowHttpPlugins": True, "logLevel": "DEBUG",
                       "leaderElectionID": "other"},
    })
    webhook = container_args(objects, "rollgate-webhook")
    assert webhook == ["--bind=0.0.0.0:9443", "--tls-cert-file=/etc/rollgate/tls/tls.crt",
                       "--tls-key-file=/etc/rollgate/tls/tls.key", "--workers=2",
                       "--threads=4", "--max-connections=500", "--request-timeout=7",
                       "--cache-ttl=2.5", "--log-level=debug", "--allow-http-plugins"]
    reconciler = container_args(objects, "rollgate-reconciler")
    assert reconciler == [
        "--bind-address=0.0.0.0:8080", "--no-leader-elect",
        "--controllers=stage-verification,rollout-plugins", "--stage-verification=engine",
        "--observe-grace-seconds=90", "--shard=east", "--default-shard",
        "--plugins-mode=audit", "--plugins-ca-file=/etc/rollgate/plugins-ca/ca.crt",
        "--plugins-max-download-bytes=268435456", "--plugins-download-timeout=60",
        "--namespaces=a,b", "--workers=32", "--resync-period=300",
        "--rollouts-deployment=rollouts", "--allow-http-plugins", "--log-level=DEBUG"]
    # The flags every process parses: the reconciler's parser accepts them all.
    import certs
    from reconciler.cli import parser

    ca = certs.generate(tmp_path / "ca").ca_cert
    parser().parse_args([f"--plugins-ca-file={ca}" if a.startswith("--plugins-ca-file")
                         else a for a in reconciler])
    from webhook.__main__ import parse_args

    parse_args(webhook)
    rules = {o["metadata"]["name"]: o for o in objects if o["kind"] in ("ClusterRole", "Role")}
    assert "rollgate-reconciler-engine" in rules
    assert {"get", "update"} <= set(rules["rollgate-reconciler-leader-election"]["rules"][1]
                                    ["verbs"])
    assert rules["rollgate-reconciler-leader-election"]["rules"][1]["resourceNames"] == [
        "other"]
    deployments = [r for r in rules["rollgate-reconciler-plugins"]["rules"]
                   if r["resources"] == ["deployments"]]
    assert deployments[0]["resourceNames"] == ["rollouts"]
