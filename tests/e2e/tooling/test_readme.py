"""The README and the docs pages as a user follows them.

- Every command of the ``sh`` blocks of the README and then of the docs pages (in the
  site's nav order) runs as written, top to bottom in one shell, from a clean environment:
  no venv on ``PATH`` but what the README itself activates, an empty ``HOME``, a copy of
  ``examples/``, the kubectl built next to the server on ``PATH`` and the test plane in
  ``KUBECONFIG`` (what ``make dev`` prints to export). Each must exit 0, or the status its
  comment names (``(exit 1...``). For docs/install.md "Get the image and the chart": a
  release's files in ``dist/`` (``make release`` of this commit, on the local stand-in
  base), the harness's registry (TLS from its own CA, basic auth) as ``REGISTRY``, logged
  in as ``crane auth login`` leaves a user (Docker's config, the CA in ``SSL_CERT_FILE``),
  and crane and helm on ``PATH``; afterwards the registry holds the image under the
  release's digest and the chart as packaged.
  ``bash`` blocks are shown but not run (docs/commands.md "The rollgate command" says which).
- The sample denial is what ``kubectl apply -f examples/invalid/stage.yaml`` prints.
- The sample Stage status is what the real Kargo writes for ``make dev``'s example
  promotion: the sample's keys and every value it spells out (``...`` elides the rest),
  with the ids that are deterministic (the example Freight's name and collection id).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shlex
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import chart, registry
from harness.dev import demo as dev
from harness.kits.kargo import fresh_project, running_kargo
from harness.plane import ControlPlane
from harness.process import free_port
from reconciler.verification.naming import freight_collection_id
from releasing import release
from schemas.kinds import GROUP_KARGO, VERSION_KARGO
from testkit.paths import REPO_ROOT, documentation
from testkit.waits import wait_for
from webhook.admission import review

FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(kind: str) -> list[str]:
    """The ``kind`` blocks of the README and the docs pages, in reading order."""
    return [body for page in documentation() for lang, body in FENCE.findall(page.read_text())
            if lang == kind]


def commands(block: str) -> list[str]:
    """The block's commands: continuation lines joined, blank and comment lines left out."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [line.strip() for line in joined.splitlines()
            if line.strip() and not line.strip().startswith("#")]


def expected_exit(command: str) -> int:
    found = re.search(r"#.*\(exit (\d+)", command)
    return int(found.group(1)) if found else 0


def script(all_commands: list[str], venv: Path) -> str:
    """One shell session running every command, stopping at the first wrong exit."""
    lines = ["set -u"]
    for command in all_commands:
        if command.split("#")[0].strip() == "make venv":
            # Done before the tests (`make test` runs it); here: that it is done.
            lines.append(f"test -x {shlex.quote(str(venv / 'bin' / 'rollgate'))} || "
                         "{ echo 'make venv: no .venv/bin/rollgate' >&2; exit 97; }")
            continue
        want = expected_exit(command)
        lines += [command, f"rc=$?; if [ $rc -ne {want} ]; then echo "
                  f"{shlex.quote(f'documented command exited $rc, not {want}: {command}')}"
                  " >&2; exit 97; fi"]
    return "\n".join(lines) + "\n"


@pytest.fixture
def demo_stage(control_plane: ControlPlane) -> Iterator[str]:
    """``make dev``'s namespace with the example Stage, for the explain commands."""
    ns = dev.DEMO_NAMESPACE
    control_plane.kubectl("create", "namespace", ns, check=False)
    for example in ("analysistemplate.yaml", "stage-test.yaml"):
        control_plane.kubectl("apply", "-n", ns, "-f", str(REPO_ROOT / "examples" / example))
    yield ns
    control_plane.kubectl("delete", "namespace", ns, "--wait=false", check=False)


@pytest.fixture
def oci(control_plane: ControlPlane, tmp_path: Path) -> Iterator[registry.Registry]:
    """The harness's registry on the loopback, for "Get the image and the chart"."""
    reg = registry.start(control_plane, address="127.0.0.1", port=free_port(),
                         directory=tmp_path / "registry", name="registry-readme")
    yield reg
    control_plane.stop_process(control_plane.process("registry-readme"))


def test_every_readme_sh_command_runs_as_written(
        control_plane: ControlPlane, demo_stage: str, oci: registry.Registry,
        tmp_path: Path) -> None:
    found = [c for block in blocks("sh") for c in commands(block)]
    # The README's own promises: the venv, validate, migrate, certs, explain; install.md's:
    # a release's files checked, pushed and read back from a registry.
    for needed in ("make venv", "source .venv/bin/activate", "rollgate validate examples/",
                   "rollgate migrate", "rollgate certs generate", "rollgate explain stage",
                   "kubectl rollgate explain stage", "(cd dist && sha256sum -c SHA256SUMS)",
                   "crane push image", "helm push dist/", "helm template rollgate \"oci://"):
        assert any(c.startswith(needed) for c in found), needed
    work = tmp_path / "clone"
    work.mkdir()
    shutil.copytree(REPO_ROOT / "examples", work / "examples")
    (work / ".venv").symlink_to(REPO_ROOT / ".venv")
    built = release.release(changelog=tmp_path / "CHANGELOG.md", out_dir=work / "dist",
                            today=dt.date.today(), base=release.STAND_IN)
    home = tmp_path / "home"
    home.mkdir()
    tools = f"{registry.binary('crane').parent}:{chart.helm_binary().parent}"
    env = oci.client_env({
        "PATH": f"{control_plane.binaries.kubectl.parent}:{tools}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home), "KUBECONFIG": str(control_plane.kubeconfig), "LANG": "C.UTF-8",
        "REGISTRY": f"{oci.host}/readme"})

    result = subprocess.run(["bash", "-c", script(found, REPO_ROOT / ".venv")], cwd=work, env=env,
                            capture_output=True, text=True, timeout=300, check=False)

    assert result.returncode == 0, result.stderr[-4000:]
    # What the commands left behind is what the README says they write.
    findings = json.loads((work / "findings.json").read_text())
    assert findings["summary"]["exitCode"] == 0
    assert {p.name for p in (work / "certs-out").iterdir()} == {
        "ca.crt", "ca.key", "tls.crt", "tls.key"}
    migrated = yaml.safe_load((work / "examples" / "migrate" / "stage-analysis.yaml")
                              .read_text())
    assert "verification" in migrated["spec"] and "analysis" not in migrated["spec"]
    version = built.artifacts.version
    assert f"image: {oci.host}/readme/rollgate@{built.image_digest}" in result.stdout
    assert oci.status(f"/v2/readme/rollgate/manifests/{built.image_digest}") == 200
    chart_manifest = oci.status(f"/v2/readme/charts/rollgate/manifests/{version}")
    assert chart_manifest == 200


def test_without_the_venv_the_readme_says_what_to_do() -> None:
    """The fresh shell of the issue: ``rollgate`` is not on PATH until activated, and
    ``.venv/bin/rollgate`` works without activating."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"}
    bare = subprocess.run(["bash", "-c", "command -v rollgate"], env=env, capture_output=True,
                          text=True, check=False)
    assert bare.returncode != 0
    direct = subprocess.run([str(REPO_ROOT / ".venv" / "bin" / "rollgate"), "validate",
                             "examples/stage-test.yaml"], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, check=False)
    assert direct.returncode == 0, direct.stderr


# ---------------------------------------------------------------- the sample denial


def test_the_sample_denial_is_what_kubectl_prints(kubectl: Any, namespace: str) -> None:
    sample = next(b for b in blocks("text") if b.startswith('The Stage "broken" is invalid:'))

    result = kubectl("apply", "-n", namespace, "-f",
                     str(REPO_ROOT / "examples" / "invalid" / "stage.yaml"), check=False)

    assert result.returncode == 1
    assert [line.rstrip() for line in result.stderr.splitlines()] == (
        sample.splitlines()), result.stderr


def test_the_sample_denial_lists_the_webhooks_causes_in_its_order() -> None:
    """The webhook's own answer (its AdmissionReview response, no kubectl in between):
    the same causes, in the same order, as the README's lines."""
    sample = next(b for b in blocks("text") if b.startswith('The Stage "broken" is invalid:'))
    obj = yaml.safe_load((REPO_ROOT / "examples" / "invalid" / "stage.yaml").read_text())
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u", "operation": "CREATE", "namespace": "ns", "name": "broken",
        "kind": {"group": GROUP_KARGO, "version": VERSION_KARGO, "kind": "Stage"},
        "resource": {"group": GROUP_KARGO, "version": VERSION_KARGO, "resource": "stages"},
        "object": obj}}

    answer = review(body, action="validate", resource="stages").body["response"]

    causes = answer["status"]["details"]["causes"]
    assert [f"* {c['field']}: {c['message']}" for c in causes] == sample.splitlines()[1:]


# ---------------------------------------------------------------- the sample status


@pytest.fixture(scope="module")
def kargo(control_plane: ControlPlane) -> Iterator[Any]:
    """Kargo's controller and its webhooks, as ``make dev`` runs them (the webhooks
    complete ``examples/kargo/promotion.yaml`` as they complete every Promotion)."""
    with running_kargo(control_plane, name="kargo-readme", webhooks=True) as proc:
        yield proc


@pytest.fixture
def demo_health() -> Iterator[str]:
    """``make dev``'s stand-in health endpoint, on a free port (18089 may be taken)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), dev.DemoHealth)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def matches(sample: Any, real: Any, where: str = "status") -> list[str]:
    """Where ``real`` differs from ``sample``: every key the sample has, every value it
    spells out; a string with ``...`` stands for any text between its two ends."""
    if isinstance(sample, dict):
        return _map_matches(sample, real, where)
    if isinstance(sample, list) and sample and all(
            isinstance(v, dict) and "type" in v for v in sample):
        return _conditions_match(sample, real, where)
    if isinstance(sample, list):
        return _list_matches(sample, real, where)
    if isinstance(sample, str) and "..." in sample:
        head, _, tail = sample.partition("...")
        ok = isinstance(real, str) and real.startswith(head) and real.endswith(tail)
        return [] if ok else [f"{where}: {real!r} is not {sample!r}"]
    return [] if sample == real else [f"{where}: {real!r}, the README says {sample!r}"]


def _map_matches(sample: dict[str, Any], real: Any, where: str) -> list[str]:
    if not isinstance(real, dict):
        return [f"{where}: {real!r} is not a map"]
    return [m for k, v in sample.items()
            for m in (matches(v, real[k], f"{where}.{k}") if k in real
                      else [f"{where}.{k}: missing"])]


def _conditions_match(sample: list[dict[str, Any]], real: Any, where: str) -> list[str]:
    """Conditions: by type, whatever order the writer keeps them in."""
    by_type = {c.get("type"): c for c in real if isinstance(c, dict)} if isinstance(
        real, list) else {}
    return [m for v in sample for m in (
        matches(v, by_type[v["type"]], f"{where}[type={v['type']}]")
        if v["type"] in by_type else [f"{where}[type={v['type']}]: missing"])]


def _list_matches(sample: list[Any], real: Any, where: str) -> list[str]:
    if not isinstance(real, list) or len(real) < len(sample):
        return [f"{where}: {real!r} is shorter than the sample"]
    return [m for i, v in enumerate(sample) for m in matches(v, real[i], f"{where}[{i}]")]


@pytest.fixture
def project(control_plane: ControlPlane, kargo: Any) -> Iterator[str]:
    """A Kargo Project's namespace, as ``make dev``'s is one (Kargo's webhooks admit its
    kinds nowhere else); deleted, Promotion included, while Kargo still runs."""
    with fresh_project(control_plane) as ns:
        yield ns


def test_the_sample_status_is_what_kargo_writes_for_the_example_promotion(
        control_plane: ControlPlane, project: str, argo_rollouts: Any,
        demo_health: str, tmp_path: Path) -> None:
    freight_name = dev.DEMO_FREIGHT["guestbook"]
    ns = project
    examples = REPO_ROOT / "examples"
    for path in (examples / "kargo" / "warehouse.yaml", examples / "freight.yaml",
                 examples / "analysistemplate.yaml"):
        control_plane.kubectl("apply", "-n", ns, "-f", str(path))
    stage = yaml.safe_load((examples / "stage-test.yaml").read_text())
    stage["spec"]["verification"]["args"][0]["value"] = demo_health
    control_plane.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(stage))
    # What the README tells users to run.
    control_plane.kubectl("create", "-n", ns, "-f", str(examples / "kargo" / "promotion.yaml"))

    def verified() -> dict[str, Any] | None:
        obj = json.loads(control_plane.kubectl("get", "stage", "test", "-n", ns, "-o",
                                               "json").stdout)
        conditions = (obj.get("status") or {}).get("conditions") or []
        done = any(c.get("type") == "Verified" and c.get("status") == "True"
                   for c in conditions)
        return obj if done else None

    real = wait_for("Kargo to verify the example promotion", verified, timeout=120)["status"]

    (tmp_path / "status.yaml").write_text(yaml.safe_dump(real))
    sample_block = next(b for b in blocks("yaml") if b.startswith("status:\n  freightHistory:"))
    sample = yaml.safe_load(sample_block.replace(dev.DEMO_NAMESPACE, ns))["status"]
    assert dev.DEMO_NAMESPACE in sample_block  # the README shows make dev's namespace
    assert freight_name in sample_block
    assert freight_collection_id([freight_name]) in sample_block
    assert matches(sample, real) == [], yaml.safe_dump(real)
    freight = json.loads(control_plane.kubectl("get", "freight", freight_name, "-n", ns,
                                               "-o", "json").stdout)
    assert "test" in freight["status"]["verifiedIn"]
