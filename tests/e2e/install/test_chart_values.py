"""The chart's values as users meet them: values.schema.json refuses a wrong type and an
unknown key in `helm lint` and `helm template` with the value's path, and takes
`global`; every default renders; the pod values (extraEnv, volumes, podLabels, security
contexts, priorityClassName, topologySpreadConstraints, probe timings, PDBs) reach the
pods; the image tag defaults to the appVersion; the NetworkPolicies; NOTES.txt for each
certificate source, whose invalid Stage rollgate denies on the test plane; and the chart
README's values table is what `make chart-docs` generates."""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

import jsonschema
import pytest
import yaml

from docgen import chart_values
from harness import chart
from harness.kits.node import selects
from harness.kits.plane import tool_or_fail
from testkit.paths import REPO_ROOT

SCHEMA = json.loads((chart.CHART / "values.schema.json").read_text())
DEFAULTS = yaml.safe_load((chart.CHART / "values.yaml").read_text())


def deployment(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == "Deployment"
                and o["metadata"]["name"] == name]
    return found


def pod_spec(objects: list[dict[str, Any]], name: str) -> dict[str, Any]:
    spec: dict[str, Any] = deployment(objects, name)["spec"]["template"]["spec"]
    return spec


def named(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}


# ---------------------------------------------------------------- the schema


@pytest.mark.parametrize(("values", "says"), [
    ({"webhook": {"replicas": "two"}}, "at '/webhook/replicas': got string, want integer"),
    ({"webhook": {"replicaz": 2}}, "at '/webhook': additional properties 'replicaz' not allowed"),
    ({"reconciler": {"podDisruptionBudget": {"minAvailible": 1}}},
     "at '/reconciler/podDisruptionBudget': additional properties 'minAvailible' not allowed"),
    ({"certificates": {"source": "jobs"}}, "at '/certificates/source'"),
    ({"webhook": {"startupProbe": {"periodSeconds": "1s"}}},
     "at '/webhook/startupProbe/periodSeconds': got string, want integer"),
    ({"networkPolicy": {"reconciler": {"metricsNamespaceSelector": {"matchLabel": {}}}}},
     "additional properties 'matchLabel' not allowed"),
    ({"replicas": 2}, "additional properties 'replicas' not allowed"),
    ({"webhook": {"failurePolicy": "Warn"}}, "at '/webhook/failurePolicy'"),
    ({"admissionPolicy": {"enabled": "yes"}},
     "at '/admissionPolicy/enabled': got string, want boolean"),
    # What would crash-loop a pod or never run: log levels the processes do not know, a
    # schedule that is not five cron fields, durations the Jobs or cert-manager refuse.
    ({"reconciler": {"logLevel": "verbose"}}, "at '/reconciler/logLevel': value must be one of"),
    ({"reconciler": {"logLevel": "trace"}}, "at '/reconciler/logLevel': value must be one of"),
    ({"webhook": {"logLevel": "DEBUG"}}, "at '/webhook/logLevel': value must be one of"),
    ({"certificates": {"job": {"renewSchedule": "hourly"}}},
     "at '/certificates/job/renewSchedule': 'hourly' does not match pattern"),
    ({"certificates": {"job": {"renewSchedule": "17 * * *"}}},
     "at '/certificates/job/renewSchedule': '17 * * *' does not match pattern"),
    ({"certificates": {"job": {"lifetime": "1y"}}},
     "at '/certificates/job/lifetime': '1y' does not match pattern"),
    ({"certificates": {"job": {"caLifetime": "0h"}}}, "at '/certificates/job/caLifetime'"),
    ({"certificates": {"certManager": {"renewBefore": "30 days"}}},
     "at '/certificates/certManager/renewBefore': '30 days' does not match pattern"),
    ({"monitoring": {"serviceMonitor": {"interval": "30 s"}}},
     "at '/monitoring/serviceMonitor/interval': '30 s' does not match pattern"),
    # Removed: the chart never renders the release namespace (docs/install.md "Helm").
    ({"namespace": {"create": True}}, "additional properties 'namespace' not allowed"),
], ids=["wrong-type", "unknown-key", "nested-typo", "enum", "probe", "label-selector",
        "top-level", "failure-policy", "admission-policy", "reconciler-log-level",
        "reconciler-log-trace", "webhook-log-level", "cron-word", "cron-four-fields",
        "lifetime-unit", "lifetime-zero", "cert-manager-duration", "scrape-interval",
        "namespace-create"])
def test_lint_and_template_refuse_a_value_the_schema_does_not_allow(values, says):
    tool_or_fail()
    lint = chart.lint(values)
    assert lint.returncode != 0
    assert says in lint.stdout + lint.stderr, lint.stdout + lint.stderr
    template = chart.template(values, check=False)
    assert template.returncode != 0
    assert "values don't meet the specifications of the schema" in template.stderr
    assert says in template.stderr, template.stderr


@pytest.mark.parametrize(("values", "says"), [
    ({"webhook": {"preStopSeconds": 25}},
     "webhook.terminationGracePeriodSeconds (30) must be at least webhook.preStopSeconds "
     "(25) + 10 s"),
    ({"webhook": {"terminationGracePeriodSeconds": 14}},
     "webhook.terminationGracePeriodSeconds (14) must be at least webhook.preStopSeconds "
     "(5) + 10 s"),
    ({"webhook": {"replicas": 1}},
     "webhook.podDisruptionBudget.minAvailable (1) with webhook.replicas (1) blocks every "
     "node drain"),
    ({"reconciler": {"replicas": 1}},
     "reconciler.podDisruptionBudget.minAvailable (1) with reconciler.replicas (1) blocks "
     "every node drain"),
    ({"reconciler": {"replicas": 2, "podDisruptionBudget": {"minAvailable": 3}}},
     "reconciler.podDisruptionBudget.minAvailable (3) with reconciler.replicas (2)"),
    ({"webhook": {"podDisruptionBudget": {"minAvailable": "100%"}}},
     "webhook.podDisruptionBudget.minAvailable (100%) blocks every node drain"),
], ids=["pre-stop", "grace-period", "webhook-one-replica", "reconciler-one-replica",
        "more-than-replicas", "percent"])
def test_template_refuses_values_that_block_with_both_values_named(values, says):
    """What JSON schema cannot compare (two values) the chart refuses itself (`fail`):
    `helm template`, `install` and `upgrade` stop; `helm lint`, which renders in lint
    mode, reports the message without failing."""
    tool_or_fail()
    lint = chart.lint(values)
    assert f"Fail: {says}" in lint.stdout + lint.stderr, lint.stdout + lint.stderr
    template = chart.template(values, check=False)
    assert template.returncode != 0
    assert says in template.stderr, template.stderr


@pytest.mark.parametrize("values", [
    {"webhook": {"preStopSeconds": 20}},  # 30 = 20 + 10: fits exactly
    {"webhook": {"replicas": 1, "podDisruptionBudget": {"enabled": False}},
     "reconciler": {"replicas": 1, "podDisruptionBudget": {"minAvailable": 0}}},
    {"webhook": {"replicas": 3, "podDisruptionBudget": {"minAvailable": 2}},
     "reconciler": {"podDisruptionBudget": {"minAvailable": "50%"}}},
    {"reconciler": {"logLevel": "debug"}, "webhook": {"logLevel": "warning"},
     "certificates": {"job": {"renewSchedule": "@hourly", "lifetime": "1h30m"},
                      "certManager": {"duration": "2160h0m0s", "renewBefore": "1.5h"}},
     "monitoring": {"serviceMonitor": {"interval": "1m30s"}}},
], ids=["grace-exact", "one-replica-without-blocking", "spare-pods", "well-formed"])
def test_the_neighbours_of_each_refusal_render(values):
    """The refusals are no wider than what would block or crash-loop."""
    tool_or_fail()
    out = chart.lint(values)
    assert out.returncode == 0, out.stdout + out.stderr
    assert chart.render(values)


def test_global_values_are_accepted():
    """A parent chart's `global` (or a user's) is Helm's, not a typo."""
    tool_or_fail()
    values = {"global": {"foo": "bar", "imageRegistry": "registry.invalid"}}
    out = chart.lint(values)
    assert out.returncode == 0, out.stdout + out.stderr
    assert chart.render(values) == chart.render()


def test_every_default_renders_and_keeps_the_schema():
    """values.yaml passed back as a values file (with the one value every install sets,
    image.repository) renders what no values render, lints clean, and validates against
    the schema (a draft-07 schema, checked as one)."""
    tool_or_fail()
    jsonschema.Draft7Validator.check_schema(SCHEMA)
    jsonschema.Draft7Validator(SCHEMA).validate(DEFAULTS)
    given = chart.merged(DEFAULTS, chart.REQUIRED)
    assert chart.render(given) == chart.render()
    out = chart.lint(given)
    assert out.returncode == 0, out.stdout + out.stderr


# Items of Kubernetes' own lists, of which the schema names only the fields they need.
FREE_ITEMS = ("/definitions/envVars/items", "/definitions/volumes/items",
              "/definitions/volumeMounts/items")


def test_every_object_the_chart_defines_is_closed():
    """additionalProperties: false wherever the schema lists properties (the free-form
    maps list none) but in FREE_ITEMS, and every value is typed."""
    def walk(node: Any, path: str) -> list[str]:
        open_ = []
        if isinstance(node, dict):
            if ("properties" in node and node.get("additionalProperties") is not False
                    and path not in FREE_ITEMS):
                open_.append(path)
            for key, child in node.items():
                open_ += walk(child, f"{path}/{key}")
        elif isinstance(node, list):
            for i, child in enumerate(node):
                open_ += walk(child, f"{path}/{i}")
        return open_

    assert walk(SCHEMA, "") == []
    # Raises on a key of values.yaml without a schema entry, or the other way round.
    rows = chart_values.rows((chart.CHART / "values.yaml").read_text(), SCHEMA)
    assert all(r.type != "any" for r in rows), [r.key for r in rows if r.type == "any"]


def test_the_schema_enums_are_the_processes_choices():
    from reconciler.controllers import REGISTRY
    from reconciler.options import DEFAULT_CONTROLLERS
    from reconciler.plugins.decisions import FLAG_MODES
    from reconciler.verification.options import MODES

    reconciler = SCHEMA["properties"]["reconciler"]["properties"]
    assert sorted(reconciler["stageVerification"]["enum"]) == sorted(MODES)
    assert sorted(reconciler["pluginsMode"]["enum"]) == sorted(FLAG_MODES)
    assert sorted(reconciler["controllers"]["items"]["enum"]) == sorted(
        k for k in REGISTRY if "/" not in k)
    assert DEFAULTS["reconciler"]["controllers"] == list(DEFAULT_CONTROLLERS)


def test_the_log_level_enums_are_what_each_process_accepts():
    """The webhook's enum is its parser's choices; every level of the reconciler's enum
    is one its logging set-up (root.setLevel(level.upper())) takes, so none crash-loops
    the pod, and the names that did (`verbose`, `trace`) are not in it."""
    import logging

    from webhook.__main__ import parser

    webhook = SCHEMA["properties"]["webhook"]["properties"]["logLevel"]["enum"]
    (action,) = [a for a in parser()._actions if "--log-level" in a.option_strings]
    assert action.choices is not None
    assert sorted(v for v in webhook if v is not None) == sorted(action.choices)
    levels = [v for v in SCHEMA["properties"]["reconciler"]["properties"]["logLevel"]["enum"]
              if v is not None]
    for level in levels:
        logging.getLogger("rollgate-schema-check").setLevel(level.upper())
    for wrong in ("verbose", "trace"):
        assert wrong not in levels
        with pytest.raises(ValueError, match="Unknown level"):
            logging.getLogger("rollgate-schema-check").setLevel(wrong.upper())


# ---------------------------------------------------------------- pod values


def test_pod_values_reach_both_deployments():
    tool_or_fail()
    env = [{"name": "HTTPS_PROXY", "value": "http://proxy.invalid:3128"}]
    volume = {"name": "corp-ca", "configMap": {"name": "corp-ca"}}
    mount = {"name": "corp-ca", "mountPath": "/etc/corp-ca", "readOnly": True}
    zone = {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule"}
    common = {"extraEnv": env, "volumes": [volume], "volumeMounts": [mount],
              "podLabels": {"team": "platform", "app.kubernetes.io/name": "not-this"},
              "priorityClassName": "system-cluster-critical",
              "topologySpreadConstraints": [zone],
              "podSecurityContext": {"runAsUser": None, "runAsGroup": None},
              "containerSecurityContext": {"allowPrivilegeEscalation": None},
              "readinessProbe": {"periodSeconds": 7}}
    openshift = {"runAsUser": None, "runAsGroup": None, "fsGroup": None}
    objects = chart.render({
        "webhook": {**common, "podSecurityContext": openshift},
        "reconciler": {**common, "pluginsCA": {"configMap": "corp"}}})
    for name, chart_env, chart_volumes in (
            ("rollgate-webhook", ["TMPDIR", "POD_NAME", "POD_NAMESPACE", "POD_UID"],
             ["tls", "tmp"]),
            ("rollgate-reconciler", ["PYTHONDONTWRITEBYTECODE", "POD_NAMESPACE"],
             ["plugins-ca"])):
        template = deployment(objects, name)["spec"]["template"]
        spec = template["spec"]
        (container,) = spec["containers"]
        # The chart's own come first; the user's are appended.
        assert [e["name"] for e in container["env"]] == [*chart_env, "HTTPS_PROXY"]
        assert [v["name"] for v in spec["volumes"]] == [*chart_volumes, "corp-ca"]
        assert container["volumeMounts"][-1] == mount
        assert spec["volumes"][-1] == volume
        # The selector label stays the chart's.
        assert template["metadata"]["labels"] == {
            "app.kubernetes.io/name": name, "app.kubernetes.io/part-of": "rollgate",
            "team": "platform"}
        assert spec["priorityClassName"] == "system-cluster-critical"
        # A constraint without labelSelector selects the pods' own name.
        assert spec["topologySpreadConstraints"] == [
            {**zone, "labelSelector": {"matchLabels": {"app.kubernetes.io/name": name}}}]
        # null removes a default key: OpenShift's restricted SCC assigns the user.
        assert spec["securityContext"] == {"runAsNonRoot": True,
                                           "seccompProfile": {"type": "RuntimeDefault"}}
        assert container["securityContext"] == {"readOnlyRootFilesystem": True,
                                                 "capabilities": {"drop": ["ALL"]}}
        assert container["readinessProbe"]["periodSeconds"] == 7
        assert container["readinessProbe"]["timeoutSeconds"] == 3
    # The certificate Jobs, the renewal CronJob and the test pod follow the webhook's
    # security contexts.
    hooks = [o for o in objects if o["kind"] in ("Job", "CronJob", "Pod")]
    assert len(hooks) == 4
    for obj in hooks:
        spec = {"Job": lambda o: o["spec"]["template"]["spec"],
                "CronJob": lambda o: o["spec"]["jobTemplate"]["spec"]["template"]["spec"],
                "Pod": lambda o: o["spec"]}[obj["kind"]](obj)
        assert spec["securityContext"] == {"runAsNonRoot": True,
                                           "seccompProfile": {"type": "RuntimeDefault"}}
        assert spec["containers"][0]["securityContext"] == {
            "readOnlyRootFilesystem": True, "capabilities": {"drop": ["ALL"]}}


PLACEMENT = {
    "nodeSelector": {"pool": "system"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "system",
                     "effect": "NoSchedule"}],
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "pool", "operator": "In", "values": ["system"]}]}]}}},
    "priorityClassName": "platform-critical",
    "podLabels": {"team": "platform"},
    "podAnnotations": {"sidecar.example/inject": "true"},
}


def other_pods(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The pod templates (metadata and spec) of every pod the chart makes besides the
    Deployments': the two hook Jobs', the renewal CronJob's and the `helm test` pod."""
    found = {}
    for obj in objects:
        template = {"Job": lambda o: o["spec"]["template"],
                    "CronJob": lambda o: o["spec"]["jobTemplate"]["spec"]["template"],
                    "Pod": lambda o: o}.get(obj["kind"])
        if template is not None:
            found[f"{obj['kind']}/{obj['metadata']['name']}"] = template(obj)
    return found


def placed(pod: dict[str, Any]) -> dict[str, Any]:
    """A pod template's six values as the chart rendered them (labels and annotations
    without the chart's own)."""
    spec, metadata = pod["spec"], pod["metadata"]
    own = ("app.kubernetes.io/", "helm.sh/")
    return {
        **{k: spec[k] for k in ("nodeSelector", "tolerations", "affinity",
                                "priorityClassName") if k in spec},
        "podLabels": {k: v for k, v in metadata["labels"].items() if not k.startswith(own)},
        "podAnnotations": {k: v for k, v in (metadata.get("annotations") or {}).items()
                           if not k.startswith(own)},
    }


def test_every_other_pod_takes_the_webhooks_placement():
    """The certificate Jobs, the CronJob's Jobs and the `helm test` pod fall back to the
    webhook's scheduling and pod-metadata values (as argo-helm's charts fall back to
    global.*): on a tainted node pool the pre-install hook runs where the webhook does.
    The chart's labels and hook annotations stay; the reconciler's values are its own;
    imagePullSecrets reach every pod."""
    tool_or_fail()
    secrets = [{"name": "registry-credentials"}]
    objects = chart.render({"webhook": PLACEMENT, "reconciler": {"podLabels": {"r": "1"}},
                            "imagePullSecrets": secrets})
    pods = other_pods(objects)
    for name in ("rollgate-webhook", "rollgate-reconciler"):
        pods[f"Deployment/{name}"] = deployment(objects, name)["spec"]["template"]
    assert all(p["spec"]["imagePullSecrets"] == secrets for p in pods.values())
    assert placed(pods.pop("Deployment/rollgate-reconciler"))["podLabels"] == {"r": "1"}
    assert placed(pods.pop("Deployment/rollgate-webhook")) == PLACEMENT
    assert sorted(pods) == ["CronJob/rollgate-certs-renew", "Job/rollgate-certs-inject",
                            "Job/rollgate-certs-secret", "Pod/rollgate-selftest"]
    for name, pod in pods.items():
        assert placed(pod) == PLACEMENT, name
        want = "rollgate-selftest" if name.startswith("Pod/") else "rollgate-certs"
        assert pod["metadata"]["labels"]["app.kubernetes.io/name"] == want
    assert pods["Pod/rollgate-selftest"]["metadata"]["annotations"]["helm.sh/hook"] == "test"
    # Nothing set: nothing rendered (the defaults place no pod).
    for name, pod in other_pods(chart.render()).items():
        assert placed(pod) == {"podLabels": {}, "podAnnotations": {}}, name


def test_the_jobs_and_the_test_pod_have_their_own_placement():
    """certificates.job.* and selftest.* win over the webhook's; an empty one removes
    the webhook's (a sidecar annotation that would keep a Job from completing)."""
    tool_or_fail()
    jobs = {"nodeSelector": {"pool": "batch"}, "tolerations": [], "affinity": {},
            "priorityClassName": "", "podLabels": {"job": "certs"}, "podAnnotations": {}}
    selftest = {"nodeSelector": {"pool": "test"}, "podLabels": {"app.kubernetes.io/name": "x"}}
    pods = other_pods(chart.render({"webhook": PLACEMENT, "certificates": {"job": jobs},
                                    "selftest": selftest}))
    for name in ("CronJob/rollgate-certs-renew", "Job/rollgate-certs-inject",
                 "Job/rollgate-certs-secret"):
        assert placed(pods[name]) == {"nodeSelector": {"pool": "batch"},
                                      "podLabels": {"job": "certs"}, "podAnnotations": {}}
    test_pod = pods["Pod/rollgate-selftest"]
    # Its own podLabels replace the webhook's, and the chart's name label wins over them.
    assert placed(test_pod) == {**PLACEMENT, "nodeSelector": {"pool": "test"}, "podLabels": {}}
    assert test_pod["metadata"]["labels"]["app.kubernetes.io/name"] == "rollgate-selftest"
    refused = chart.template({"certificates": {"job": {"tolerations": {"key": "x"}}}},
                             check=False)
    assert refused.returncode != 0
    assert "/certificates/job/tolerations" in refused.stderr, refused.stderr


def test_pod_defaults_are_the_fixed_values_they_replace():
    """The defaults render what the templates hard-coded before they became values."""
    tool_or_fail()
    objects = chart.render()
    restricted = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                  "capabilities": {"drop": ["ALL"]}}
    timings = {"startupProbe": (1, 3, 60), "readinessProbe": (5, 3, 3),
               "livenessProbe": (10, 3, 3)}
    for name, fs_group in (("rollgate-webhook", {"fsGroup": 65532}),
                           ("rollgate-reconciler", {})):
        spec = pod_spec(objects, name)
        assert spec["securityContext"] == {
            "runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, **fs_group,
            "seccompProfile": {"type": "RuntimeDefault"}}
        (container,) = spec["containers"]
        assert container["securityContext"] == restricted
        assert spec["topologySpreadConstraints"] == [{
            "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": name}}}]
        assert "priorityClassName" not in spec
        for probe, (period, timeout, failures) in timings.items():
            assert (container[probe]["periodSeconds"], container[probe]["timeoutSeconds"],
                    container[probe]["failureThreshold"]) == (period, timeout, failures)
    pdbs = named(objects, "PodDisruptionBudget")
    assert {n: p["spec"]["minAvailable"] for n, p in pdbs.items()} == {
        "rollgate-webhook": 1, "rollgate-reconciler": 1}
    assert pdbs["rollgate-reconciler"]["spec"]["selector"] == {
        "matchLabels": {"app.kubernetes.io/name": "rollgate-reconciler"}}
    off = chart.render({"reconciler": {"podDisruptionBudget": {"enabled": False}}})
    assert list(named(off, "PodDisruptionBudget")) == ["rollgate-webhook"]


def test_image_tag_defaults_to_the_app_version():
    """image.tag "" is the chart's appVersion, which is the project's version."""
    tool_or_fail()
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert chart.app_version() == project["version"]
    assert re.fullmatch(r"\d+\.\d+\.\d+", chart.app_version())

    def images(values: dict[str, Any]) -> set[str]:
        objects = chart.render(values)
        specs = [o["spec"]["jobTemplate"]["spec"] if o["kind"] == "CronJob" else o["spec"]
                 for o in objects if o["kind"] in ("Deployment", "Job", "CronJob", "Pod")]
        return {c["image"] for spec in specs
                for c in spec.get("template", {"spec": spec})["spec"]["containers"]}

    assert images({}) == {f"{chart.REQUIRED['image']['repository']}:{chart.app_version()}"}
    assert images({"image": {"repository": "registry.invalid/rg", "tag": "1.2.3"}}) == {
        "registry.invalid/rg:1.2.3"}
    # A tag YAML reads as a number: the schema takes it, the image names it as written.
    for tag, want in ((1.2, "1.2"), (12, "12"), (20240101, "20240101")):
        assert images({"image": {"repository": "registry.invalid/rg", "tag": tag}}) == {
            f"registry.invalid/rg:{want}"}, tag
    given = chart.template(extra=("--set", "image.tag=12")).stdout
    assert "image: registry.invalid/rollgate:12\n" in given
    digest = "sha256:" + "0123456789abcdef" * 4
    assert images({"image": {"repository": "registry.invalid/rg", "tag": "1.2.3",
                             "digest": digest}}) == {f"registry.invalid/rg@{digest}"}


def test_the_image_repository_is_required_and_a_digest_is_a_digest():
    """No default image (nobody publishes one): without image.repository every install
    fails naming the value and the page that says where to get it; a digest that is not
    sha256:<64 hex> is refused by the schema with its path."""
    tool_or_fail()
    bare = chart.template({}, required=False, check=False)
    assert bare.returncode != 0
    assert ('image.repository is required: the registry path you pushed rollgate\'s image '
            'to' in bare.stderr), bare.stderr
    assert '(docs/install.md "Get the image and the chart")' in bare.stderr, bare.stderr
    for wrong in ("sha256:abc", "0123456789abcdef" * 4, "sha256:" + "A" * 64):
        refused = chart.template({"image": {"digest": wrong}}, check=False)
        assert refused.returncode != 0
        assert "/image/digest" in refused.stderr, refused.stderr


def test_every_object_of_a_component_has_its_label_scheme():
    """The objects of the webhook and of the reconciler (Deployment, Service, PDB, RBAC,
    ServiceMonitor, NetworkPolicy) carry one set of labels per component, its pods' name;
    the ServiceMonitor selects the reconciler's metrics Service by it."""
    tool_or_fail()
    objects = chart.render({"monitoring": {"serviceMonitor": {"enabled": True}},
                            "networkPolicy": {"enabled": True},
                            "reconciler": {"stageVerification": "engine",
                                           "refreshLagging": True}})
    for name in ("rollgate-webhook", "rollgate-reconciler"):
        want = deployment(objects, name)["metadata"]["labels"]
        assert want["app.kubernetes.io/name"] == name
        assert want["app.kubernetes.io/part-of"] == "rollgate"
        mine = [o for o in objects if o["metadata"]["name"].startswith(name)
                and o["kind"] not in ("Job", "Pod")]
        assert len(mine) >= 8, [o["kind"] for o in mine]
        for obj in mine:
            assert obj["metadata"]["labels"] == want, (obj["kind"], obj["metadata"]["name"])
    service = named(objects, "Service")["rollgate-reconciler-metrics"]
    monitor = named(objects, "ServiceMonitor")["rollgate-reconciler"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert not [o for o in objects if (o["metadata"].get("labels") or {}).get(
        "app.kubernetes.io/name") == "rollgate"]


# ---------------------------------------------------------------- NetworkPolicy


def test_network_policies_only_when_enabled():
    tool_or_fail()
    assert not named(chart.render(), "NetworkPolicy")
    selector = {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}
    egress = [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}]}]
    objects = chart.render({"networkPolicy": {
        "enabled": True, "reconciler": {"metricsNamespaceSelector": selector,
                                        "egress": egress}}})
    policies = named(objects, "NetworkPolicy")
    webhook, reconciler = (policies["rollgate-webhook"]["spec"],
                           policies["rollgate-reconciler"]["spec"])
    # The webhook port from anywhere (no `from`): the API server's address is unknowable.
    assert webhook == {
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "rollgate-webhook"}},
        "policyTypes": ["Ingress"],
        "ingress": [{"ports": [{"port": 8443, "protocol": "TCP"}]}]}
    assert reconciler == {
        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "rollgate-reconciler"}},
        "policyTypes": ["Ingress", "Egress"],
        "ingress": [{"from": [{"namespaceSelector": selector}],
                     "ports": [{"port": 8080, "protocol": "TCP"}]}],
        "egress": egress}
    # Without a selector: every namespace ({} selects all).
    default = named(chart.render({"networkPolicy": {"enabled": True}}), "NetworkPolicy")
    assert default["rollgate-reconciler"]["spec"]["ingress"][0]["from"] == [
        {"namespaceSelector": {}}]


def test_the_jobs_policy_selects_the_certificate_and_test_pods():
    """With networkPolicy.enabled, rollgate-jobs selects the pods of the certificate
    Jobs, the CronJob and `helm test` (a default-deny namespace would drop their calls):
    no ingress, egress to the webhook pods' port and networkPolicy.jobs.apiServerEgress.
    A hook copy exists before the pre-install Job runs, and only with the job source."""
    tool_or_fail()
    narrow = [{"to": [{"ipBlock": {"cidr": "10.0.0.1/32"}}], "ports": [{"port": 6443}]}]
    objects = chart.render({"networkPolicy": {"enabled": True,
                                              "jobs": {"apiServerEgress": narrow}},
                            "webhook": {"port": 9443, "podLabels": {"team": "platform"}}})
    policies = named(objects, "NetworkPolicy")
    spec = policies["rollgate-jobs"]["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in spec
    (to_webhook, *api_server) = spec["egress"]
    assert to_webhook["ports"] == [{"port": 9443, "protocol": "TCP"}]
    (peer,) = to_webhook["to"]
    webhook = deployment(objects, "rollgate-webhook")["spec"]["template"]["metadata"]
    assert selects(peer["podSelector"], webhook["labels"])
    assert api_server == narrow
    for name, pod in other_pods(objects).items():
        assert selects(spec["podSelector"], pod["metadata"]["labels"]), name
    for name in ("rollgate-webhook", "rollgate-reconciler"):
        template = deployment(objects, name)["spec"]["template"]["metadata"]
        assert not selects(spec["podSelector"], template["labels"]), name
    hook = policies["rollgate-jobs-hook"]
    assert hook["spec"] == spec
    (secret_job,) = [o for o in objects if o["kind"] == "Job"
                     and o["metadata"]["name"] == "rollgate-certs-secret"]
    annotations, job = hook["metadata"]["annotations"], secret_job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == job["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert int(annotations["helm.sh/hook-weight"]) < int(job["helm.sh/hook-weight"])
    default = named(chart.render({"networkPolicy": {"enabled": True}}), "NetworkPolicy")
    assert default["rollgate-jobs"]["spec"]["egress"][1:] == [
        {"ports": [{"port": 443, "protocol": "TCP"}, {"port": 6443, "protocol": "TCP"}]}]
    other = named(chart.render({"networkPolicy": {"enabled": True},
                                "certificates": {"source": "secret"}}), "NetworkPolicy")
    assert sorted(other) == ["rollgate-jobs", "rollgate-reconciler", "rollgate-webhook"]


def test_failure_policy_and_the_admission_policy_follow_the_values():
    """webhook.failurePolicy sets the two validating webhooks (the mutating one only
    normalises, so it stays Ignore); admissionPolicy.enabled adds the policies, off by
    default."""
    tool_or_fail()

    def policies(objects: list[dict[str, Any]]) -> dict[str, str]:
        return {w["name"]: w["failurePolicy"] for o in objects
                if o["kind"].endswith("WebhookConfiguration") for w in o["webhooks"]}

    default = chart.render()
    assert set(policies(default).values()) == {"Fail", "Ignore"}
    assert policies(default)["mutate-rolloutmanagers.rollgate.dev"] == "Ignore"
    assert not [o for o in default if o["kind"].startswith("ValidatingAdmissionPolicy")]
    backstop = chart.render({"webhook": {"failurePolicy": "Ignore"},
                             "admissionPolicy": {"enabled": True}})
    assert set(policies(backstop).values()) == {"Ignore"}
    bound = {o["metadata"]["name"]: o["spec"]["policyName"] for o in backstop
             if o["kind"] == "ValidatingAdmissionPolicyBinding"}
    assert bound == {"rollgate-stages": "rollgate-stages",
                     "rollgate-rolloutmanagers": "rollgate-rolloutmanagers"}
    for policy in named(backstop, "ValidatingAdmissionPolicy").values():
        # The same namespaces as the webhooks: the release's own and excludedNamespaces.
        assert policy["spec"]["matchConstraints"]["namespaceSelector"][
            "matchExpressions"][0]["values"] == ["kube-system", "rollgate-system"]


# ---------------------------------------------------------------- NOTES.txt


def stage_example(notes: str) -> tuple[str, str]:
    """The notes' `kubectl apply --dry-run=server ... <<'EOF'` line and its document."""
    match = re.search(r"^(kubectl apply --dry-run=server .*) <<'EOF'\n(.*?)^EOF$", notes,
                      re.MULTILINE | re.DOTALL)
    assert match, notes
    return match.group(1), match.group(2)


@pytest.mark.parametrize("source", ["job", "cert-manager", "secret"])
def test_notes_say_what_was_installed_and_where_the_certificate_comes_from(source):
    tool_or_fail()
    notes = chart.notes({"certificates": {"source": source}})
    for line in ("release\nrollgate in namespace rollgate-system",
                 "Deployment rollgate-webhook (2 pods)",
                 "Deployment rollgate-reconciler (2 pods, leader-elected)",
                 f"Secret rollgate-webhook-tls (certificates.source={source})",
                 "kubectl -n rollgate-system get pods",
                 "helm test rollgate -n rollgate-system\n",
                 "kubectl apply --dry-run=server -n default -f - <<'EOF'"):
        assert line in notes, (line, notes)
    flat = " ".join(notes.split())
    if source == "job":
        assert "a serving certificate valid 8760h (certificates.job.lifetime)" in flat
        assert "CronJob rollgate-certs-renew (\"17 * * * *\") re-issues" in flat
        assert "rotates the CA (43800h)" in flat
    elif source == "cert-manager":
        assert "Issuer/rollgate-ca" in flat
        assert "for 8760h" in flat and "renews it 720h before it expires" in flat
    else:
        assert "You created it" in flat
        assert "rollgate certs inject --ca-file ca.crt" in flat


def test_notes_follow_the_values():
    tool_or_fail()
    notes = " ".join(chart.notes({
        "certificates": {"source": "job", "job": {"lifetime": "720h",
                                                       "renewSchedule": "*/5 * * * *"}},
        "selftest": {"enabled": False, "namespace": "shop"},
        "webhook": {"replicas": 3}}).split())
    assert "valid 720h" in notes and '("*/5 * * * *")' in notes
    assert "Deployment rollgate-webhook (3 pods)" in notes
    assert "helm test" not in notes
    assert "kubectl apply --dry-run=server -n shop -f -" in notes
    secret = " ".join(chart.notes({"certificates": {"source": "secret",
                                                    "caBundle": "Y2E="}}).split())
    assert "caBundle is certificates.caBundle" in secret
    assert "certs inject" not in secret
    issuer = " ".join(chart.notes({"certificates": {"source": "cert-manager", "certManager": {
        "issuerRef": {"name": "corp", "kind": "ClusterIssuer"}}}}).split())
    assert "(issuer ClusterIssuer/corp)" in issuer


def test_the_notes_invalid_stage_is_denied_by_rollgate(control_plane, namespace):
    """The notes' command, run as written (in a fresh namespace), gets rollgate's
    denial through the test plane's API server, naming both field paths."""
    tool_or_fail()
    command, document = stage_example(chart.notes())
    assert command == "kubectl apply --dry-run=server -n default -f -"
    out = control_plane.kubectl("apply", "--dry-run=server", "-n", namespace, "-f", "-",
                                input=document, check=False)
    assert out.returncode != 0
    assert 'admission webhook "validate-stages.rollgate.dev" denied the request' in (
        out.stderr), out.stderr
    for path in ("spec.verification.analysisTemplates[0].name",
                 "spec.verification.args[0].name"):
        assert path in out.stderr, out.stderr


# ---------------------------------------------------------------- the chart README


def test_chart_readme_values_table_is_generated():
    """charts/rollgate/README.md carries what `make chart-docs` writes."""
    readme = chart_values.README.read_text()
    assert chart_values.with_table(readme, chart_values.generated_table()) == readme, (
        "charts/rollgate/README.md's values table is out of date: run `make chart-docs`")
    # Every value (leaf or commented object) has its row.
    for key in ("webhook.extraEnv", "reconciler.podDisruptionBudget.minAvailable",
                "networkPolicy.reconciler.metricsNamespaceSelector", "image.tag"):
        assert f"| `{key}` |" in readme


def test_chart_docs_takes_the_comment_above_each_key_and_refuses_gaps():
    text = """# file header, not a description

# The section.
top:
  # First line
  # second line.
  a: 1
  list:
  # Not a value: inside a list.
  - name: x
    b: 2
  # Described.
  c: {d: 1}

  # After a blank line.
  e: ""
"""
    assert chart_values.comments(text) == {"top": "The section.",
                                         "top.a": "First line second line.",
                                         "top.c": "Described.",
                                         "top.e": "After a blank line."}
    closed: dict[str, Any] = {"type": "object", "additionalProperties": False}
    top: dict[str, Any] = {**closed, "properties": {
        "a": {"type": "integer"}, "list": {"type": "array", "items": {"type": "object"}},
        "c": {"type": "object"}, "e": {"enum": ["", "x"]}}}
    schema = {**closed, "properties": {"top": top}}
    with pytest.raises(chart_values.ValuesDocError, match=r"top\.list: no comment"):
        chart_values.rows(text, schema)
    described = text.replace("  list:\n", "  # A list.\n  list:\n")
    rows = chart_values.rows(described, schema)
    assert [(r.key, r.type, r.default) for r in rows] == [
        ("top", "object", ""), ("top.a", "integer", "1"), ("top.list", "list of object",
                                                          '[{"name": "x", "b": 2}]'),
        ("top.c", "object", '{"d": 1}'), ("top.e", '"" | "x"', '""')]
    assert '| `top.e` | "" \\| "x" | `""` | After a blank line. |' in chart_values.table(rows)
    with pytest.raises(chart_values.ValuesDocError, match=r"top\.f: in values\.yaml, not in"):
        chart_values.rows(described + "  # New.\n  f: 1\n", schema)
    top["properties"]["g"] = {"type": "string"}
    with pytest.raises(chart_values.ValuesDocError, match=r"top\.g: in the schema, not in"):
        chart_values.rows(described, schema)
