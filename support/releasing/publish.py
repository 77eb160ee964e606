"""``make publish REGISTRY=<host[:port][/path]>`` (``python -m releasing.publish``): the
release in ``dist/`` pushed to any OCI registry, as users of Kargo and Argo Rollouts
install from one (docs/install.md "Get the image and the chart"):

- the image, from its OCI archive, as ``<REGISTRY>/rollgate:<version>`` (``crane push``;
  the registry must answer with the digest ``make release`` printed);
- the chart as ``oci://<REGISTRY>/charts/rollgate``, version ``<version>`` (``helm push``).

Credentials and CAs are the user's, as for any push: crane and helm both read Docker's
config (``crane auth login``, ``docker login``; ``DOCKER_CONFIG``), and trust the system's
CAs or ``SSL_CERT_FILE``.

Before anything is pushed, the files are checked against ``SHA256SUMS`` and both tags are
looked up: a tag that holds something else is refused (a release is never overwritten);
one that already holds exactly this release's image or chart is left as it is, so a run
that stopped halfway is finished by the next. A registry that refuses (authentication,
TLS, a tag it will not overwrite, ...) is one line naming the registry and the cause,
exit 1, and the line says what was pushed: nothing half-pushed is reported as released.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import chart
from harness.paths import REPO_ROOT, BinaryMissing
from harness.registry import binary as registry_binary
from releasing.artifacts import ArtifactError, Artifacts, image_digest, verify_checksums
from releasing.release import ReleaseError, chart_version

IMAGE = "rollgate"
CHARTS = "charts"
_ABSENT = ("MANIFEST_UNKNOWN", "NAME_UNKNOWN", "404 Not Found", ": not found")
# (what the tool said, the cause in words), first match wins.
_CAUSES = (
    (("x509:", "tls: failed to verify", "certificate signed by unknown authority"),
     "TLS: its certificate is not trusted here (add its CA to the system's, or "
     "SSL_CERT_FILE=<ca.crt>)"),
    (("UNAUTHORIZED", "401 Unauthorized", "401"),
     "authentication: it refused the credentials (401 Unauthorized); log in first "
     "(crane auth login, docker login)"),
    (("DENIED", "403 Forbidden"), "denied (403): these credentials may not push there"),
    (("connection refused", "no such host", "i/o timeout", "network is unreachable"),
     "unreachable"),
)


class PublishError(RuntimeError):
    """What stops a publish: one line naming the registry and the cause."""


@dataclass(frozen=True)
class Published:
    image: str
    chart: str
    chart_digest: str


def cause(output: str) -> str:
    """A tool's error output as one cause (its last line when no known one matches)."""
    for needles, words in _CAUSES:
        if any(n in output for n in needles):
            detail = next((line.strip() for line in output.splitlines()
                           if any(n in line for n in needles)), "")
            return f"{words}: {detail[-200:]}" if words == "unreachable" else words
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    return lines[-1][-300:] if lines else "no output"


@dataclass(frozen=True)
class Tools:
    crane: Path
    helm: Path
    env: Mapping[str, str]

    def run(self, tool: Path, *args: str,
            timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(tool), *args], capture_output=True, text=True,
                              timeout=timeout, check=False, env=dict(self.env))


def existing(tools: Tools, registry: str, ref: str) -> dict[str, object] | None:
    """The manifest ``ref`` has now, or None when the registry has no such tag."""
    out = tools.run(tools.crane, "manifest", ref, timeout=120)
    if out.returncode == 0:
        manifest: dict[str, object] = json.loads(out.stdout)
        return manifest
    if any(marker in out.stderr for marker in _ABSENT):
        return None
    raise PublishError(f"{registry}: {cause(out.stderr)}")


def manifest_digest(tools: Tools, registry: str, ref: str) -> str:
    out = tools.run(tools.crane, "digest", ref, timeout=120)
    if out.returncode != 0:
        raise PublishError(f"{registry}: {cause(out.stderr)}")
    return out.stdout.strip()


def _layers(manifest: Mapping[str, object]) -> list[str]:
    layers = manifest.get("layers")
    return [str(x["digest"]) for x in layers] if isinstance(layers, list) else []


def check_tags(tools: Tools, registry: str, artifacts: Artifacts,
               digest: str) -> tuple[bool, bool]:
    """Whether the image and the chart are still to be pushed; refuses a tag that holds
    anything else."""
    version = artifacts.version
    image_ref = f"{registry}/{IMAGE}:{version}"
    image_there = existing(tools, registry, image_ref) is not None
    if image_there and (theirs := manifest_digest(tools, registry, image_ref)) != digest:
        raise PublishError(f"{registry}: {image_ref} already exists as {theirs}, not this "
                           f"release's {digest}; a released tag is never overwritten: "
                           "bump the version in charts/rollgate/Chart.yaml and make release")
    chart_ref = f"{registry}/{CHARTS}/rollgate:{version.replace('+', '_')}"
    chart_manifest = existing(tools, registry, chart_ref)
    ours = "sha256:" + hashlib.sha256(artifacts.chart.read_bytes()).hexdigest()
    if chart_manifest is not None and _layers(chart_manifest) != [ours]:
        raise PublishError(f"{registry}: chart {chart_ref} already exists with another "
                           f"package than {artifacts.chart.name}; a released version is never "
                           "overwritten: bump the version and make release")
    return not image_there, chart_manifest is None


def push_image(tools: Tools, registry: str, artifacts: Artifacts, digest: str) -> str:
    """The archive pushed as ``<registry>/rollgate:<version>``; the reference by digest."""
    ref = f"{registry}/{IMAGE}:{artifacts.version}"
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(artifacts.image) as tar:
            tar.extractall(tmp, filter="data")
        out = tools.run(tools.crane, "push", tmp, ref)
    if out.returncode != 0:
        raise PublishError(f"{registry}: nothing pushed: {cause(out.stderr)}")
    pushed = out.stdout.strip().rpartition("@")[2]
    if pushed != digest:
        raise PublishError(f"{registry}: the image came back as {pushed}, not {digest}; "
                           f"{artifacts.version} is not released there")
    return f"{registry}/{IMAGE}@{digest}"


def push_chart(tools: Tools, registry: str, artifacts: Artifacts, image: str) -> str:
    """The chart pushed to ``oci://<registry>/charts``; its manifest digest."""
    out = tools.run(tools.helm, "push", str(artifacts.chart), f"oci://{registry}/{CHARTS}")
    if out.returncode != 0:
        raise PublishError(f"{registry}: the chart was not pushed ({cause(out.stderr)}); "
                           f"the image {image} is there, but {artifacts.version} is not "
                           "released: fix the cause and run make publish again")
    said = out.stdout + out.stderr
    return next((line.split()[-1] for line in said.splitlines()
                 if line.startswith("Digest:")), "")


def publish(*, artifacts: Artifacts, registry: str, tools: Tools) -> Published:
    if "://" in registry or not registry.strip("/"):
        raise PublishError(f"REGISTRY={registry!r}: give host[:port][/path], no scheme "
                           "(e.g. ghcr.io/you)")
    registry = registry.strip("/")
    try:
        verify_checksums(artifacts)
        digest = image_digest(artifacts.image)
    except ArtifactError as err:
        raise PublishError(str(err)) from err
    image_missing, chart_missing = check_tags(tools, registry, artifacts, digest)
    image = (push_image(tools, registry, artifacts, digest) if image_missing
             else f"{registry}/{IMAGE}@{digest}")
    chart_digest = (push_chart(tools, registry, artifacts, image) if chart_missing
                    else manifest_digest(tools, registry,
                                         f"{registry}/{CHARTS}/rollgate:{artifacts.version}"))
    return Published(image=image, chart=f"oci://{registry}/{CHARTS}/rollgate",
                     chart_digest=chart_digest)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m releasing.publish",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--registry", required=True,
                        help="host[:port][/path] to push to (make publish REGISTRY=...)")
    parser.add_argument("--dist", type=Path, default=REPO_ROOT / "dist")
    args = parser.parse_args(argv)
    try:
        version = chart_version((chart.CHART / "Chart.yaml").read_text())
        tools = Tools(crane=registry_binary("crane"), helm=chart.helm_binary(),
                      env=dict(os.environ))
        done = publish(artifacts=Artifacts(args.dist, version), registry=args.registry,
                       tools=tools)
    except (PublishError, ReleaseError, chart.ChartToolMissing, BinaryMissing) as err:
        print(f"publish: {err}", file=sys.stderr)
        return 1
    print(f"published rollgate {version}:\n  image {done.image}\n"
          f"  chart {done.chart} --version {version} ({done.chart_digest})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
