"""rollgate as users run it, on the node: its chart installed with helm (or its
kustomization applied), its pods, and what a user checks of them.

A pod that does not become Ready, a probe that fails or an install that times out fails
with what a user would look at next: each pod's phase, its containers' states and
restarts, its events and its containers' last log lines; never a bare timeout.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

from harness import chart
from harness.chart import merged as merged  # re-exported: callers layer values with it
from harness.kits.polling import Poller
from harness.node import images
from harness.node.cluster import NodeCluster
from harness.plane import ControlPlane
from harness.registry import Registry
from testkit.denials import EXAMPLES, assert_denied, documented_paths
from testkit.paths import REPO_ROOT
from testkit.waits import WaitTimeout, wait_for

RELEASE = "rollgate"
NAMESPACE = "rollgate-system"
WEBHOOK = "app.kubernetes.io/name=rollgate-webhook"
RECONCILER = "app.kubernetes.io/name=rollgate-reconciler"
PROBES = ("Readiness", "Liveness", "Startup")
INVALID = EXAMPLES / "invalid" / "stage.yaml"  # denied with its documented field paths


def image_values(image: images.Image) -> dict[str, Any]:
    """The chart's image values for an image imported into the node (never pulled)."""
    return {"image": {"repository": image.repository, "tag": image.tag,
                      "pullPolicy": "Never"}}


# --------------------------------------------------------------------------- pods


def pods(plane: ControlPlane, namespace: str, selector: str = "") -> list[dict[str, Any]]:
    args = ["get", "pods", "-n", namespace, "-o", "json"]
    if selector:
        args += ["-l", selector]
    items: list[dict[str, Any]] = json.loads(plane.kubectl(*args).stdout)["items"]
    return items


def ready(pod: Mapping[str, Any]) -> bool:
    if pod["metadata"].get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in pod.get("status", {}).get("conditions") or [])


def restarts(pod: Mapping[str, Any]) -> int:
    return sum(int(c.get("restartCount", 0))
               for c in pod.get("status", {}).get("containerStatuses") or [])


def events(plane: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads(
        plane.kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    return items


def _listed(plane: ControlPlane, namespace: str, selector: str) -> list[dict[str, Any]] | None:
    """The pods, or None when the API did not answer (a poller tries again)."""
    args = ["get", "pods", "-n", namespace, "-o", "json"] + (["-l", selector] if selector else [])
    out = plane.kubectl(*args, check=False, timeout=10)
    return json.loads(out.stdout)["items"] if out.returncode == 0 else None


@dataclass
class ReadyWatch(Poller):
    """When each pod of a namespace was first seen Ready, and first seen terminating
    (polled every half second in a thread), so that probe failures can be told apart:
    before a pod is first Ready they are part of its start; once it is being deleted
    (out of its Service's endpoints already), part of its stop; in between, failures."""

    plane: ControlPlane
    namespace: str
    first_ready: dict[str, float] = field(default_factory=dict)
    stopping: dict[str, float] = field(default_factory=dict)

    def poll_once(self) -> None:
        now = time.time()
        for pod in _listed(self.plane, self.namespace, "") or []:
            name = pod["metadata"]["name"]
            if pod["metadata"].get("deletionTimestamp"):
                self.stopping.setdefault(name, now)
            elif ready(pod):
                self.first_ready.setdefault(name, now)


@dataclass
class ReadyCount(Poller):
    """How many pods of ``selector`` were Ready, polled every half second in a thread: a
    roll that leaves none Ready shows in :meth:`seconds_without`."""

    plane: ControlPlane
    namespace: str
    selector: str
    samples: list[tuple[float, int]] = field(default_factory=list)

    def poll_once(self) -> None:
        items = _listed(self.plane, self.namespace, self.selector)
        if items is not None:
            self.samples.append((time.monotonic(), sum(ready(p) for p in items)))

    def seconds_without(self) -> float:
        """Time between polls that both saw no Ready pod, plus half a poll at each edge
        of such a stretch (it began or ended somewhere in between)."""
        total = 0.0
        for (t0, n0), (t1, n1) in itertools.pairwise(self.samples):
            if n0 == 0 and n1 == 0:
                total += t1 - t0
            elif n0 == 0 or n1 == 0:
                total += (t1 - t0) / 2
        return round(total, 1)

    @property
    def lowest(self) -> int:
        return min((n for _, n in self.samples), default=0)


@dataclass(frozen=True)
class ProbeFailures:
    """``Unhealthy`` events as ``pod: message`` lines: before the pod was first Ready
    (start-up: reported), once it was being deleted (its stop: reported), and in between
    (failures)."""

    at_start: list[str]
    after_ready: list[str]
    while_stopping: list[str] = field(default_factory=list)


def _event_time(event: Mapping[str, Any]) -> float:
    stamp = event.get("lastTimestamp") or event.get("eventTime") or ""
    try:
        return dt.datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return float("inf")


def probe_failures(plane: ControlPlane, namespace: str, first_ready: Mapping[str, float],
                   stopping: Mapping[str, float] | None = None) -> ProbeFailures:
    """Probe failures of the namespace's pods, split at each pod's first Ready and at
    the moment it was seen terminating (``ReadyWatch``; event times have one-second
    resolution: a failure within that second counts as start-up, or as the stop)."""
    found = ProbeFailures(at_start=[], after_ready=[])
    for event in events(plane, namespace):
        message = str(event.get("message", ""))
        if event.get("reason") != "Unhealthy" or not any(
                message.startswith(f"{kind} probe") for kind in PROBES):
            continue
        pod = event.get("involvedObject", {}).get("name", "?")
        line = f"{pod} (x{event.get('count', 1)}): {message}"
        when = _event_time(event)
        became_ready = first_ready.get(pod)
        deleted = (stopping or {}).get(pod)
        if deleted is not None and when >= deleted - 1:
            found.while_stopping.append(line)
        elif (became_ready is not None and not message.startswith("Startup")
              and when > became_ready + 1):
            found.after_ready.append(line)
        else:
            found.at_start.append(line)
    return found


def diagnostics(plane: ControlPlane, namespace: str, selector: str = "") -> str:
    """What a user looks at when pods are not Ready: each pod's phase, containers,
    events, and last log lines."""
    lines: list[str] = []
    by_pod: dict[str, list[str]] = {}
    for event in events(plane, namespace):
        involved = event.get("involvedObject", {})
        by_pod.setdefault(involved.get("name", ""), []).append(
            f"    {involved.get('kind')}/{involved.get('name')}: {event.get('type')} "
            f"{event.get('reason')}: {event.get('message')}")
    found = pods(plane, namespace, selector)
    for pod in found:
        name = pod["metadata"]["name"]
        status = pod.get("status", {})
        lines.append(f"pod {name}: phase {status.get('phase')}, ready {ready(pod)}, "
                     f"restarts {restarts(pod)}")
        for container in status.get("containerStatuses") or []:
            state = container.get("state", {})
            lines.append(f"  container {container['name']}: {json.dumps(state)}")
            log = plane.kubectl("logs", "-n", namespace, name, "-c", container["name"],
                                "--tail=15", check=False).stdout.strip()
            if log:
                lines += ["  last log lines:", *("    " + x for x in log.splitlines())]
        lines += by_pod.pop(name, [])[-10:]
    if not selector:
        # What happened to objects that are gone (a hook Job's pods, a ReplicaSet's).
        rest = [line for name, found_lines in by_pod.items() for line in found_lines[-5:]]
        lines += ["other events in the namespace:", *rest[-30:]] if rest else []
    return "\n".join(lines) or f"no pods in {namespace} for {selector!r}"


def wait_ready(plane: ControlPlane, namespace: str, *, selector: str, count: int,
               timeout: float = 180) -> list[dict[str, Any]]:
    """Until exactly ``count`` pods of ``selector`` exist, all Ready and none
    terminating; else fail with ``diagnostics``."""
    deadline = time.monotonic() + timeout
    while True:
        found = pods(plane, namespace, selector)
        if len(found) == count and all(ready(p) for p in found):
            return found
        if time.monotonic() > deadline:
            raise WaitTimeout(f"{count} Ready pods of {selector} in {namespace} not there "
                              f"after {timeout:.0f}s:\n{diagnostics(plane, namespace, selector)}")
        time.sleep(1)


def delete_namespace(plane: ControlPlane, namespace: str, *, timeout: float = 180) -> None:
    """Delete ``namespace`` and wait until it is gone (its pods have terminated)."""
    out = plane.kubectl("delete", "namespace", namespace, "--ignore-not-found",
                        f"--timeout={timeout:.0f}s", check=False, timeout=timeout + 10)
    if out.returncode != 0:
        raise AssertionError(f"namespace {namespace} not deleted after {timeout:.0f}s: "
                             f"{out.stderr}\n{diagnostics(plane, namespace)}")


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a LabelSelector (matchLabels, matchExpressions: In, NotIn, Exists,
    DoesNotExist) selects an object with ``labels``, as the API server decides it: a
    NetworkPolicy's podSelector checked against pods that may be gone by now."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for term in selector.get("matchExpressions") or []:
        key, values = term["key"], term.get("values") or []
        held = {"In": key in labels and labels[key] in values,
                "NotIn": labels.get(key) not in values,
                "Exists": key in labels,
                "DoesNotExist": key not in labels}[term["operator"]]
        if not held:
            return False
    return True


@dataclass
class PodWatch:
    """Every pod of a namespace as last seen (``kubectl get pods --watch``), also those
    of hook Jobs that Helm deletes once they succeeded, before a poll could list them."""

    plane: ControlPlane
    namespace: str
    seen: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __enter__(self) -> Self:
        argv = [str(self.plane.binaries.kubectl), f"--kubeconfig={self.plane.kubeconfig}",
                "get", "pods", "-n", self.namespace, "--watch", "--output-watch-events",
                "-o", "json"]
        self._process = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL, text=True)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._process.terminate()
        self._process.wait(15)
        self._thread.join(15)

    def _read(self) -> None:
        """Watch events are JSON documents one after another, each over several lines."""
        assert self._process.stdout is not None
        decoder = json.JSONDecoder()
        buffer = ""
        for line in self._process.stdout:
            buffer += line
            try:
                event, end = decoder.raw_decode(buffer.lstrip())
            except ValueError:
                continue
            buffer = buffer.lstrip()[end:]
            pod = event["object"]
            self.seen[pod["metadata"]["name"]] = pod


# --------------------------------------------------------------------------- releases


@dataclass
class Release:
    """One helm release of the chart on the node (``helm`` with the node's kubeconfig and
    a helm home of its own). ``chart_path`` may be an ``oci://`` reference with its
    ``version``; ``registry``'s credentials and CA are then helm's, as after a user's
    ``crane auth login``."""

    cluster: NodeCluster
    name: str = RELEASE
    namespace: str = NAMESPACE
    chart_path: Path | str = chart.CHART
    values: dict[str, Any] = field(default_factory=dict)
    version: str = ""
    registry: Registry | None = None

    @property
    def plane(self) -> ControlPlane:
        return self.cluster.plane

    def helm(self, *args: str, check: bool = True,
             timeout: float = 360) -> subprocess.CompletedProcess[str]:
        env = chart.cluster_env(self.plane.kubeconfig, self.plane.root / "helm")
        if self.registry is not None:
            env = self.registry.client_env(env)
        return chart.helm(*args, check=check, env=env, timeout=timeout)

    def _values_args(self, values: Mapping[str, Any]) -> list[str]:
        directory = self.plane.root / "helm-values"
        directory.mkdir(parents=True, exist_ok=True)
        return ["-f", str(chart.values_file(values, directory))]

    def install(self, values: Mapping[str, Any], *,
                wait: bool = True) -> subprocess.CompletedProcess[str]:
        """``helm install --create-namespace --wait``, what helm printed; a failure
        carries the pods' diagnostics."""
        self.values = dict(values)
        args = ["install", self.name, str(self.chart_path), *self._version_args(),
                "-n", self.namespace, "--create-namespace", *self._values_args(values)]
        if wait:
            args += ["--wait", "--timeout", "5m"]
        return self._run(args)

    def upgrade(self, values: Mapping[str, Any]) -> None:
        self.values = dict(values)
        self._run(["upgrade", self.name, str(self.chart_path), *self._version_args(),
                   "-n", self.namespace, *self._values_args(values), "--wait",
                   "--timeout", "5m"])

    def _version_args(self) -> list[str]:
        return ["--version", self.version] if self.version else []

    def _run(self, args: list[str]) -> subprocess.CompletedProcess[str]:
        out = self.helm(*args, check=False)
        if out.returncode != 0:
            raise AssertionError(f"helm {args[0]} failed ({out.returncode}):\n{out.stderr}"
                                 f"{out.stdout}\n{diagnostics(self.plane, self.namespace)}")
        return out

    def uninstall(self, *, keep_namespace: bool = False) -> None:
        """``helm uninstall --wait``; then, as a user cleaning up does, the namespace
        (``--create-namespace`` made it; helm leaves it and the hook Jobs' Secret)."""
        out = self.helm("uninstall", self.name, "-n", self.namespace, "--wait",
                        "--timeout", "3m", check=False)
        if out.returncode != 0 and "not found" not in out.stderr:
            raise AssertionError(f"helm uninstall failed:\n{out.stderr}{out.stdout}")
        if not keep_namespace:
            delete_namespace(self.plane, self.namespace)

    def test(self) -> subprocess.CompletedProcess[str]:
        """``helm test`` as the notes say to run it: Helm prints the test pod's lines
        itself, on stderr, before it deletes the pod (the chart's
        ``helm.sh/hook-output-log-policy``)."""
        return self.helm("test", self.name, "-n", self.namespace, check=False)

    def wait_pods(self, *, webhooks: int = 2, reconcilers: int = 2) -> list[dict[str, Any]]:
        return (wait_ready(self.plane, self.namespace, selector=WEBHOOK, count=webhooks)
                + wait_ready(self.plane, self.namespace, selector=RECONCILER,
                             count=reconcilers))


# --------------------------------------------------------------------------- kustomize


@dataclass
class Kustomized:
    """manifests/ installed as docs/install.md "Deployment" says, through an overlay of
    the user's in ``directory`` that points every image at ``image`` (a kustomize
    ``images`` entry's newName with newTag or digest; by default the node's imported
    image, which the Deployments then never pull) and adds ``patches`` (kustomize
    patches, each with its target): `rollgate certs generate` (with ``generate_args``),
    the namespace, `rollgate certs secret`, `kubectl apply -k`, `rollgate certs inject`."""

    cluster: NodeCluster
    directory: Path
    patches: list[dict[str, Any]] = field(default_factory=list)
    generate_args: tuple[str, ...] = ()
    image: dict[str, str] | None = None

    @property
    def plane(self) -> ControlPlane:
        return self.cluster.plane

    @property
    def overlay(self) -> Path:
        return self.directory / "overlay"

    @property
    def certs_dir(self) -> Path:
        return self.directory / "certs-out"

    def certs(self, *args: str) -> str:
        """``rollgate certs ARGS`` on the user's workstation, with the node's kubeconfig;
        what it printed."""
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env["KUBECONFIG"] = str(self.plane.kubeconfig)
        out = subprocess.run([str(Path(sys.executable).parent / "rollgate"), "certs", *args],
                             env=env, capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0, f"rollgate certs {' '.join(args)}: {out.stderr}"
        return out.stdout

    def write_overlay(self) -> None:
        patches = list(self.patches)
        image = self.image
        if image is None:
            imported = self.cluster.images.rollgate
            image = {"newName": imported.repository, "newTag": imported.tag}
            patches.insert(0, {"target": {"kind": "Deployment"}, "patch": json.dumps([
                {"op": "add", "path": "/spec/template/spec/containers/0/imagePullPolicy",
                 "value": "Never"}])})
        self.overlay.mkdir(parents=True, exist_ok=True)
        (self.overlay / "kustomization.yaml").write_text(json.dumps({
            "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
            "resources": [os.path.relpath(REPO_ROOT / "manifests", self.overlay)],
            "images": [{"name": "rollgate.invalid/rollgate", **image}],
            "patches": patches}))

    def install(self) -> None:
        """The documented steps, then until the API server calls the injected webhook
        (it loads a new caBundle within a second or so) and every pod is Ready."""
        self.write_overlay()
        self.certs("generate", "--out-dir", str(self.certs_dir), *self.generate_args)
        self.plane.kubectl("apply", "-k", str(REPO_ROOT / "manifests" / "namespace"))
        self.certs("secret", "--dir", str(self.certs_dir))
        self.apply()
        self.certs("inject", "--ca-file", str(self.certs_dir / "ca.crt"))
        wait_for("the API server to call the injected webhook", lambda: "denied the request"
                 in create_invalid(self.plane, "default").stderr, timeout=120)
        wait_ready(self.plane, NAMESPACE, selector=WEBHOOK, count=2)
        wait_ready(self.plane, NAMESPACE, selector=RECONCILER, count=2)

    def apply(self) -> None:
        """``kubectl apply -k`` of the overlay: the install, or a repair of what changed."""
        self.plane.kubectl("apply", "-k", str(self.overlay), timeout=120)

    def uninstall(self) -> None:
        """``kubectl delete -k`` of the overlay, then the namespace with the Secrets
        ``rollgate certs secret`` made."""
        self.plane.kubectl("delete", "-k", str(self.overlay), "--wait=true", check=False,
                           timeout=180)
        delete_namespace(self.plane, NAMESPACE)


RENEW_CRONJOB = "rollgate-certs-renew"


def renew_now(plane: ControlPlane, name: str, *, timeout: int = 180) -> str:
    """docs/install.md "Certificate renewal"'s run now: `kubectl create job
    --from=cronjob/rollgate-certs-renew <name>`, until it completes; its log (the
    failure names the log too)."""
    plane.kubectl("-n", NAMESPACE, "create", "job", f"--from=cronjob/{RENEW_CRONJOB}", name)
    done = plane.kubectl("-n", NAMESPACE, "wait", "--for=condition=complete", f"job/{name}",
                         f"--timeout={timeout}s", check=False, timeout=timeout + 20)
    logs = plane.kubectl("-n", NAMESPACE, "logs", f"job/{name}", check=False)
    assert done.returncode == 0, done.stderr + logs.stdout + logs.stderr
    return logs.stdout


def create_invalid(plane: ControlPlane, namespace: str) -> subprocess.CompletedProcess[str]:
    """A server-side dry run of the documented invalid Stage: what a user's create gets."""
    return plane.kubectl("create", "--dry-run=server", "-n", namespace, "-f", str(INVALID),
                         check=False, timeout=30)


def denied_by_rollgate(plane: ControlPlane, namespace: str) -> None:
    """Until rollgate denies the invalid Stage (a webhook that was down may take a moment
    to answer again), with every field path its example documents."""
    def denial() -> subprocess.CompletedProcess[str] | None:
        result = create_invalid(plane, namespace)
        return result if "denied the request" in result.stderr else None
    result = wait_for("rollgate to deny the invalid Stage", denial, timeout=60)
    assert_denied(result, "validate-stages.rollgate.dev", documented_paths(INVALID))
