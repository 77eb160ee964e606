"""``make release`` and ``make publish`` (support/releasing): the artifacts, the
CHANGELOG entry and what they refuse; the push to an OCI registry (the harness's, with
TLS and basic auth, on the loopback) and each way a registry refuses it. The node installs
what they publish (tests/node/test_install_from_registry.py).

The releases here build on the local stand-in base (``--base stand-in``): the flow after
the build (archive, digest, SBOM, checksums, push) is the same as on the real one.
"""

from __future__ import annotations

import email.parser
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness import chart, registry
from harness.kits.plane import tool_or_fail
from harness.node import images
from harness.plane import ControlPlane
from harness.process import free_port
from releasing import release, sbom
from releasing.artifacts import Artifacts, image_digest

ENTRY = release.Entry(version="1.2.0", date="2026-12-03", commit="1a2b3c4d5e6f")
VERSION = chart.app_version()


def run_release(tmp_path: Path, *extra: str,
                changelog: str = "CHANGELOG.md") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "releasing",
                           "--changelog", str(tmp_path / changelog),
                           "--out-dir", str(tmp_path / "dist"), "--base", release.STAND_IN,
                           *extra],
                          capture_output=True, text=True, timeout=1800, check=False)


def run_publish(dist: Path, to: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "releasing.publish", "--registry", to,
                           "--dist", str(dist)], env=env, capture_output=True, text=True,
                          timeout=600, check=False)


@dataclass(frozen=True)
class Released:
    out: subprocess.CompletedProcess[str]
    root: Path

    @property
    def artifacts(self) -> Artifacts:
        return Artifacts(self.root / "dist", VERSION)


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Released:
    """One ``make release`` into a directory of its own (its CHANGELOG.md there too)."""
    tool_or_fail()
    root = tmp_path_factory.mktemp("release")
    out = run_release(root)
    assert out.returncode == 0, out.stderr
    return Released(out, root)


def test_a_release_writes_every_artifact_then_its_entry(released: Released) -> None:
    out, root, artifacts = released.out, released.root, released.artifacts
    digest = image_digest(artifacts.image)
    assert f"{artifacts.image}\timage {digest}" in out.stdout
    assert "test-only" in out.stdout  # the stand-in base says so
    labels = image_config(artifacts.image)["config"]["Labels"]
    assert {k: labels.get(k) for k in (
        "org.opencontainers.image.version", "org.opencontainers.image.base.name",
        "dev.rollgate.test-only")} == {
        "org.opencontainers.image.version": VERSION,
        "org.opencontainers.image.base.name": "rollgate.local/python:3.11-slim",
        "dev.rollgate.test-only": "true"}
    assert labels["org.opencontainers.image.base.digest"].startswith("sha256:")
    # sha256sum reads the checksums as written, in the directory users download into.
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=artifacts.directory,
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout + check.stderr
    assert sorted(check.stdout.split()) == sorted(
        [f"{p.name}:" for p in artifacts.files] + ["OK"] * 3)
    with tarfile.open(artifacts.chart) as archive:
        meta = yaml.safe_load(archive.extractfile("rollgate/Chart.yaml").read())  # type: ignore[union-attr]
        values = yaml.safe_load(archive.extractfile("rollgate/values.yaml").read())  # type: ignore[union-attr]
        names = archive.getnames()
    assert (meta["version"], meta["appVersion"]) == (VERSION, VERSION)
    assert values["image"] == {"repository": "", "digest": "", "tag": "",
                               "pullPolicy": "IfNotPresent"}
    assert "rollgate/values.schema.json" in names
    changelog = (root / "CHANGELOG.md").read_text()
    [entry] = release.entries(changelog)
    assert entry.version == VERSION
    assert (f"helm install rollgate oci://<registry>/charts/rollgate --version {VERSION}"
            in changelog)

    again = run_release(root)
    assert again.returncode == 1
    assert f"already has {VERSION}: bump version and appVersion" in again.stderr
    assert (root / "CHANGELOG.md").read_text() == changelog


def test_a_released_version_s_files_are_rebuilt_without_a_new_entry(released: Released,
                                                                    tmp_path: Path) -> None:
    """`make release-artifacts` at a release's tag: the files again, the entry kept; for
    a version that was never released it refuses (a release is never made that way)."""
    shutil.copy(released.root / "CHANGELOG.md", tmp_path / "CHANGELOG.md")
    rebuilt = run_release(tmp_path, "--artifacts-only")
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert "CHANGELOG.md: entry kept" in rebuilt.stdout
    assert (tmp_path / "CHANGELOG.md").read_text() == (
        released.root / "CHANGELOG.md").read_text()
    check = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path / "dist",
                           capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stdout
    never = run_release(tmp_path, "--artifacts-only", changelog="EMPTY.md")
    assert never.returncode == 1
    assert f"EMPTY.md has no {VERSION}: it was never released" in never.stderr


def _last_layer(archive: Path) -> tarfile.TarFile:
    """The image's top layer: everything the Dockerfile added on the base (buildah builds
    it with --layers=false, one layer)."""
    with tarfile.open(archive) as oci:
        def blob(digest: str) -> bytes:
            member = oci.extractfile(f"blobs/sha256/{digest.split(':')[1]}")
            assert member is not None
            return member.read()
        index = json.loads(oci.extractfile("index.json").read())  # type: ignore[union-attr]
        manifest = json.loads(blob(index["manifests"][0]["digest"]))
        data = blob(manifest["layers"][-1]["digest"])
    return tarfile.open(fileobj=io.BytesIO(data), mode="r:*")


def installed_distributions(archive: Path) -> list[sbom.Pin]:
    """(name, version) of every ``*.dist-info`` the Dockerfile's ``pip install`` wrote."""
    found = []
    with _last_layer(archive) as layer:
        for member in layer:
            if re.fullmatch(r"(\./)?usr/local/lib/python3[.0-9]*/(site|dist)-packages/"
                            r"[^/]+\.dist-info/METADATA", member.name):
                meta = email.parser.Parser().parsestr(
                    layer.extractfile(member).read().decode())  # type: ignore[union-attr]
                found.append(sbom.Pin(meta["Name"], meta["Version"]))
    return sorted(found)


def test_the_sbom_lists_what_pip_installed_in_the_image(released: Released) -> None:
    """The SBOM's components are exactly the distributions in the image's own layer,
    rollgate aside, with the same versions; it names the image by digest and its base."""
    artifacts = released.artifacts
    document = json.loads(artifacts.sbom.read_text())
    assert (document["bomFormat"], document["specVersion"]) == ("CycloneDX", "1.5")
    component = document["metadata"]["component"]
    assert (component["name"], component["version"]) == ("rollgate", VERSION)
    props = {p["name"]: p["value"] for p in component["properties"]}
    assert props["rollgate:image-digest"] == image_digest(artifacts.image)
    assert props["rollgate:base-image"].startswith("rollgate.local/python:3.11-slim")
    installed = {p.normalized: p.version for p in installed_distributions(artifacts.image)}
    assert installed.pop("rollgate") == VERSION
    assert installed == {p.normalized: p.version for p in sbom.components(document)}
    assert len(installed) == len(sbom.pins(release.LOCK.read_text())) > 20
    assert all(c["purl"] == f"pkg:pypi/{sbom.Pin(c['name'], c['version']).normalized}"
                            f"@{c['version']}" for c in document["components"])


def test_the_next_entry_lists_the_commits_since_the_previous_one() -> None:
    first = release.with_entry(release.TITLE, release.entry_text(ENTRY, ["a change"]))
    later = release.Entry(version="1.3.0", date="2026-12-10", commit="abcdefabcdef")
    both = release.with_entry(first, release.entry_text(later, ["another", "and more"]))
    assert release.entries(both) == [later, ENTRY]
    assert both.startswith("# Changelog\n\n## 1.3.0 (2026-12-10, commit abcdefabcdef)\n\n"
                           "- another\n- and more\n")
    assert both.count("# Changelog") == 1
    assert "- a change\n" in both


@pytest.mark.parametrize(("chart_yaml", "says"), [
    ("version: 1.2.0\nappVersion: '1.2.1'\n", "version 1.2.0 and appVersion 1.2.1 differ"),
    ("version: 1.2.0\n", "version 1.2.0 and appVersion None differ"),
])
def test_a_chart_whose_version_is_not_its_app_version_is_refused(chart_yaml: str,
                                                                 says: str) -> None:
    with pytest.raises(release.ReleaseError, match=says):
        release.chart_version(chart_yaml)
    assert release.chart_version("version: 1.2.0\nappVersion: '1.2.0'\n") == "1.2.0"


def test_a_lock_line_that_is_not_a_pin_is_refused() -> None:
    """An SBOM never leaves a dependency out silently."""
    with pytest.raises(ValueError, match="line 2: not name==version"):
        sbom.pins("# comment\nflask>=3\n")


# ---------------------------------------------------------------- make publish


@pytest.fixture(scope="module")
def oci(control_plane: ControlPlane,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[registry.Registry]:
    """The harness's registry (TLS from its own CA, basic auth), on the loopback."""
    reg = registry.start(control_plane, address="127.0.0.1", port=free_port(),
                         directory=tmp_path_factory.mktemp("registry"),
                         name="registry-release")
    yield reg
    control_plane.stop_process(control_plane.process("registry-release"))


def crane(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(registry.binary("crane")), *args], env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_publish_pushes_the_image_by_digest_and_the_chart(released, oci, tmp_path) -> None:
    artifacts = released.artifacts
    digest = image_digest(artifacts.image)
    env = oci.client_env(dict(os.environ))
    to = f"{oci.host}/team"

    published = run_publish(artifacts.directory, to, env)

    assert published.returncode == 0, published.stderr
    assert f"image {to}/rollgate@{digest}" in published.stdout
    assert f"chart oci://{to}/charts/rollgate --version {VERSION}" in published.stdout
    assert crane("digest", f"{to}/rollgate:{VERSION}", env=env).stdout.strip() == digest
    helm_env = chart.cluster_env(tmp_path / "kubeconfig", tmp_path / "helm")
    pulled = chart.helm("pull", f"oci://{to}/charts/rollgate", "--version", VERSION,
                        "--destination", str(tmp_path), env=oci.client_env(helm_env))
    assert pulled.returncode == 0
    assert (tmp_path / artifacts.chart.name).read_bytes() == artifacts.chart.read_bytes()
    # Published again: the tags already hold this release, nothing is overwritten.
    again = run_publish(artifacts.directory, to, env)
    assert again.returncode == 0, again.stderr
    assert f"image {to}/rollgate@{digest}" in again.stdout


def test_an_unauthenticated_pull_gets_401(released, oci) -> None:
    env = oci.client_env(dict(os.environ))
    to = f"{oci.host}/pull"
    assert run_publish(released.artifacts.directory, to, env).returncode == 0
    path = f"/v2/pull/rollgate/manifests/{VERSION}"
    assert (oci.status(path), oci.status(path, auth=False)) == (200, 401)
    anonymous = {**env, "DOCKER_CONFIG": str(released.root / "no-credentials")}
    refused = crane("manifest", f"{to}/rollgate:{VERSION}", env=anonymous)
    assert refused.returncode != 0
    assert "UNAUTHORIZED" in refused.stderr, refused.stderr


def one_line_refusal(result: subprocess.CompletedProcess[str], registry_ref: str,
                     cause: str) -> None:
    """Exit 1, one line naming the registry and the cause, nothing reported published."""
    assert result.returncode == 1, result.stdout + result.stderr
    assert result.stdout == "", result.stdout
    [line] = result.stderr.splitlines()
    assert line.startswith(f"publish: {registry_ref}: "), line
    assert cause in line, line


def test_a_registry_that_refuses_is_one_line_naming_it_and_the_cause(released, oci,
                                                                     tmp_path) -> None:
    dist = released.artifacts.directory
    env = oci.client_env(dict(os.environ))
    to = f"{oci.host}/refusals"
    # Credentials the registry does not accept.
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    (wrong / "config.json").write_text(json.dumps({"auths": {oci.host: {
        "auth": "cm9sbGdhdGU6bm90LXRoZS1wYXNzd29yZA=="}}}))
    one_line_refusal(run_publish(dist, to, {**env, "DOCKER_CONFIG": str(wrong)}), to,
                     "authentication: it refused the credentials (401 Unauthorized)")
    # A certificate nothing here trusts (the system's CAs only).
    untrusted = {k: v for k, v in env.items() if k != "SSL_CERT_FILE"}
    one_line_refusal(run_publish(dist, to, untrusted), to,
                     "TLS: its certificate is not trusted here")
    # The tag already holds another image: refused before anything is pushed.
    other = f"{oci.host}/other/rollgate:{VERSION}"
    assert run_publish(dist, f"{oci.host}/other", env).returncode == 0
    mutated = crane("mutate", other, "--label", "another=build", "-t",
                    f"{to}/rollgate:{VERSION}", env=env)
    assert mutated.returncode == 0, mutated.stderr
    one_line_refusal(run_publish(dist, to, env), to,
                     f"{to}/rollgate:{VERSION} already exists as sha256:")
    refused_chart = crane("manifest", f"{to}/charts/rollgate:{VERSION}", env=env)
    assert "MANIFEST_UNKNOWN" in refused_chart.stderr or "NAME_UNKNOWN" in refused_chart.stderr


def image_config(archive: Path) -> dict[str, Any]:
    """The image config of the one image in an OCI archive."""
    with tarfile.open(archive) as oci:
        def blob(digest: str) -> Any:
            return json.loads(oci.extractfile(  # type: ignore[union-attr]
                f"blobs/sha256/{digest.split(':')[1]}").read())
        manifest = blob(json.loads(oci.extractfile("index.json").read())  # type: ignore[union-attr]
                        ["manifests"][0]["digest"])
        config: dict[str, Any] = blob(manifest["config"]["digest"])
    return config


def test_a_release_on_a_base_pulled_from_a_registry(oci, tmp_path) -> None:
    """The path of a real release (``--base`` a reference buildah pulls, as
    python:3.11-slim from Docker Hub): here the stand-in base, pushed to the harness's
    registry first, is that reference. The image records the base's name and digest."""
    base = images.base()
    layout = tmp_path / "base"
    with tarfile.open(base.archive) as tar:
        tar.extractall(layout, filter="data")
    env = oci.client_env(dict(os.environ))
    ref = f"{oci.host}/library/python:3.11-slim"
    pushed = crane("push", str(layout), ref, env=env)
    assert pushed.returncode == 0, pushed.stderr
    base_digest = pushed.stdout.strip().rpartition("@")[2]
    # buildah reads the credentials from REGISTRY_AUTH_FILE, the CA from SSL_CERT_FILE.
    env["REGISTRY_AUTH_FILE"] = str(Path(env["DOCKER_CONFIG"]) / "config.json")
    out = subprocess.run([sys.executable, "-m", "releasing", "--base", ref,
                          "--changelog", str(tmp_path / "CHANGELOG.md"),
                          "--out-dir", str(tmp_path / "dist")], env=env,
                         capture_output=True, text=True, timeout=1800, check=False)
    assert out.returncode == 0, out.stderr
    assert f"base: {ref}@{base_digest}" in out.stdout
    artifacts = Artifacts(tmp_path / "dist", VERSION)
    labels = image_config(artifacts.image)["config"]["Labels"]
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.base.name"] == ref
    assert labels["org.opencontainers.image.base.digest"] == base_digest
    document = json.loads(artifacts.sbom.read_text())
    props = {p["name"]: p["value"] for p in document["metadata"]["component"]["properties"]}
    assert props["rollgate:base-image"] == f"{ref}@{base_digest}"


def test_publish_refuses_files_that_do_not_match_their_checksums(released, oci,
                                                                  tmp_path) -> None:
    dist = tmp_path / "dist"
    dist.mkdir()
    for path in released.artifacts.directory.iterdir():
        (dist / path.name).symlink_to(path)
    (dist / f"rollgate-{VERSION}.cdx.json").unlink()
    (dist / f"rollgate-{VERSION}.cdx.json").write_text("{}\n")
    result = run_publish(dist, f"{oci.host}/damaged", oci.client_env(dict(os.environ)))
    assert result.returncode == 1
    assert result.stderr.strip() == (f"publish: {dist}/rollgate-{VERSION}.cdx.json: does not "
                                     "match SHA256SUMS; run `make release` again")
