"""The node's images, made here (no registry is reachable) and cached as OCI archives.

- ``pause``: the pod sandbox, ``hack/node/pause.c`` built statically into a scratch image.
- ``base``: a stand-in for ``python:3.11-slim``: Debian bookworm (``debootstrap
  --variant=minbase``, from the mirror apt uses) with Debian's Python 3.11 and pip. This
  machine's extra CA certificates are added so pip inside a build reaches PyPI through
  its egress proxy; the image is a local test stand-in and never leaves the machine.
- ``rollgate``: the repository's unchanged ``Dockerfile``, only ``FROM`` overridden
  (``buildah build --from``), built with ``--pull=never``. :func:`rollgate_on` builds the
  same Dockerfile on a base pulled from its registry instead (a release where the real
  ``python:3.11-slim`` can be pulled: ``make release``), never cached.
- ``noop-webhook``: hack/noop-webhook (the Go webhook that allows everything,
  ``bench/apply_overhead_node.py``'s floor), the binary ``make k8s`` builds alone in a
  scratch image, as a Go webhook is shipped; built only when a benchmark asks for it.
- ``argo-rollouts``: Argo Rollouts as its upstream image is made (distroless, numeric
  ``USER 999``, working directory ``/home/argo-rollouts``, ``/bin/rollouts-controller``)
  from the ``rollouts-controller`` ``make k8s`` builds, with the test plugins CA as its
  only CA bundle at Go's default path (the operator's Deployment cannot mount one), and
  the sample metric plugin at :data:`IMAGE_SAMPLE_PLUGIN` (the operator's
  ``OPENSHIFT_ROUTE_PLUGIN_LOCATION`` points there, so nothing points off the machine).

The plugins CA (:func:`plugins_ca`) is made once and kept with the images: the image
trusts it, and the plugin servers the pods download from are issued from it.

Each archive's name carries a digest of its inputs (for rollgate's: the Dockerfile, the
lock, every file the build copies, and the base's digest), so a change rebuilds exactly
what it affects and nothing else is ever rebuilt. buildah runs with a storage of its own
under the cache, removed after each build.

``python -m harness.node.images`` (``make image``) builds what is missing and prints the
archives and rollgate's image size.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from certs.pki import build_ca, cert_pem, key_pem
from harness import versions
from harness.node.hoststate import OUTSIDE_PATHS
from harness.paths import REPO_ROOT, user_cache
from harness.upstream import rollouts as rollouts_binaries

PAUSE_SOURCE = REPO_ROOT / "hack" / "node" / "pause.c"
DOCKERFILE = REPO_ROOT / "Dockerfile"
SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-pip", "python3-venv", "python-is-python3",
                 "ca-certificates")
HOST_CAS = Path("/usr/local/share/ca-certificates")
# Bump when the way an image is made changes, so cached archives are not reused.
RECIPE = "1"
PAUSE_NAME = "rollgate.local/pause:3.10"
BASE_NAME = "rollgate.local/python:3.11-slim"
ROLLGATE_REPOSITORY = "rollgate.local/rollgate"
ROLLOUTS_REPOSITORY = "rollgate.local/argo-rollouts"
NOOP_REPOSITORY = "rollgate.local/noop-webhook"
NOOP_UID = 65532  # distroless's nonroot, as Go webhooks' images run
ROLLOUTS_UID = 999  # upstream's numeric USER
IMAGE_SAMPLE_PLUGIN = "/usr/local/lib/argo-rollouts/metrics-plugin-sample"
GO_CA_BUNDLE = "etc/ssl/certs/ca-certificates.crt"  # the first path Go's x509 tries
# Labelled so that nobody mistakes the archive for a release image.
TEST_ONLY_LABEL = "dev.rollgate.test-only=true"


class ImageError(RuntimeError):
    """An image could not be built; the message has the tool's output."""


@dataclass(frozen=True, slots=True)
class Image:
    name: str
    archive: Path
    digest: str

    @property
    def repository(self) -> str:
        return self.name.rsplit(":", 1)[0]

    @property
    def tag(self) -> str:
        return self.name.rsplit(":", 1)[1]


def cache_dir() -> Path:
    return Path(os.environ.get("ROLLGATE_IMAGE_CACHE")
                or user_cache() / "images")


def digest_of(parts: Iterable[bytes]) -> str:
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(hashlib.sha256(part).digest())
    return hasher.hexdigest()


def _files(paths: Iterable[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.is_file()
                            and "__pycache__" not in p.parts and not p.name.endswith(".pyc"))
        elif path.is_file():
            found.append(path)
    return found


def dockerfile_sources(dockerfile: Path = DOCKERFILE) -> list[Path]:
    """What the Dockerfile's COPY lines take from the build context."""
    sources: list[Path] = []
    for line in dockerfile.read_text().splitlines():
        words = line.split()
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            sources += [dockerfile.parent / w for w in words[1:-1] if not w.startswith("--")]
    return sources


def rollgate_inputs(base_digest: str) -> str:
    """The digest of everything rollgate's image is made of."""
    files = _files([DOCKERFILE, *dockerfile_sources()])
    return digest_of([RECIPE.encode(), base_digest.encode()]
                     + [str(p.relative_to(REPO_ROOT)).encode() + b"\0" + p.read_bytes()
                        for p in files])


def base_inputs(mirror: str) -> str:
    cas = sorted(HOST_CAS.glob("*.crt")) if HOST_CAS.is_dir() else []
    return digest_of([RECIPE.encode(), SUITE.encode(), mirror.encode(),
                      " ".join(BASE_PACKAGES).encode(), *(p.read_bytes() for p in cas)])


def pause_inputs() -> str:
    return digest_of([RECIPE.encode(), PAUSE_SOURCE.read_bytes()])


def noop_inputs(binary: Path) -> str:
    return digest_of([RECIPE.encode(), binary.read_bytes()])


def rollouts_inputs(binaries: rollouts_binaries.RolloutsBinaries, ca: PluginsCA) -> str:
    return digest_of([RECIPE.encode(), binaries.controller.read_bytes(),
                      binaries.metrics_plugin_sample.read_bytes(), ca.cert.read_bytes()])


@dataclass(frozen=True, slots=True)
class PluginsCA:
    """The CA the Argo Rollouts image trusts, and its key, to issue plugin servers'
    certificates."""

    cert: Path
    key: Path


def plugins_ca() -> PluginsCA:
    """Made once (ten years) and kept with the images: a new CA would mean a new image."""
    directory = cache_dir() / "plugins-ca"
    out = PluginsCA(cert=directory / "ca.crt", key=directory / "ca.key")
    if out.cert.is_file() and out.key.is_file():
        return out
    directory.mkdir(parents=True, exist_ok=True)
    ca, key = build_ca(common_name="rollgate test plugins CA", lifetime=dt.timedelta(days=3650))
    out.key.write_bytes(key_pem(key))
    out.key.chmod(0o600)
    out.cert.write_bytes(cert_pem(ca))
    return out


def debian_mirror() -> str:
    """The mirror apt uses here (deb822 ``URIs:`` or a one-line ``deb`` entry)."""
    if os.environ.get("DEBIAN_MIRROR"):
        return os.environ["DEBIAN_MIRROR"]
    for path in sorted(Path("/etc/apt").glob("sources.list.d/*.sources")):
        for line in path.read_text().splitlines():
            if line.startswith("URIs:") and "security" not in line:
                return line.split()[1]
    for line in Path("/etc/apt/sources.list").read_text().splitlines():
        words = line.split()
        if words[:1] == ["deb"] and "security" not in line:
            return next(w for w in words[1:] if "://" in w)
    raise ImageError("no Debian mirror found in /etc/apt; set DEBIAN_MIRROR")


# --------------------------------------------------------------------------- building


class Buildah:
    """buildah with a storage of its own (removed by ``close``), as root, overlay."""

    def __init__(self, work: Path) -> None:
        self.work = work
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        # buildah creates some of these even with its own storage (CNI's and runc's
        # directories); whichever it created goes again in close().
        self._absent = [Path(p) for p in OUTSIDE_PATHS if not Path(p).exists()]

    def __call__(self, *args: str, timeout: float = 900) -> str:
        argv = ["buildah", "--root", str(self.work / "root"), "--runroot",
                str(self.work / "run"), "--storage-driver", "overlay", *args]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                             check=False)
        if out.returncode != 0:
            raise ImageError(f"{' '.join(argv)} failed ({out.returncode}):\n"
                             f"{out.stderr[-4000:]}{out.stdout[-2000:]}")
        return out.stdout.strip()

    def scratch_image(self, name: str, *, add: Path, to: str, config: Sequence[str]) -> None:
        container = self("from", "scratch")
        self("add" if add.suffix == ".tar" else "copy", container, str(add), to)
        self("config", *config, container)
        self("commit", "-q", container, name)
        self("rm", container)

    def save(self, name: str, archive: Path) -> None:
        """``name`` as an OCI archive (written aside, then renamed: never half a file)."""
        partial = archive.with_suffix(".partial")
        partial.unlink(missing_ok=True)
        self("push", "-q", name, f"oci-archive:{partial}:{name}")
        partial.rename(archive)

    def close(self) -> None:
        subprocess.run(["buildah", "--root", str(self.work / "root"), "--runroot",
                        str(self.work / "run"), "--storage-driver", "overlay", "unmount",
                        "--all"], capture_output=True, timeout=60, check=False)
        subprocess.run(["umount", "-R", "-l", str(self.work)], capture_output=True,
                       timeout=60, check=False)
        shutil.rmtree(self.work, ignore_errors=True)
        for path in self._absent:
            shutil.rmtree(path, ignore_errors=True)


def _say(message: str) -> None:
    print(f"[images] {message}", file=sys.stderr, flush=True)


def build_pause(buildah: Buildah, archive: Path) -> None:
    binary = buildah.work / "pause"
    out = subprocess.run(["gcc", "-static", "-O2", "-o", str(binary), str(PAUSE_SOURCE)],
                         capture_output=True, text=True, timeout=120, check=False)
    if out.returncode != 0:
        raise ImageError(f"gcc {PAUSE_SOURCE}: {out.stderr}")
    buildah.scratch_image(PAUSE_NAME, add=binary, to="/pause", config=[
        "--entrypoint", '["/pause"]', "--user", "65535:65535", "--label", TEST_ONLY_LABEL])
    buildah.save(PAUSE_NAME, archive)


def build_noop(buildah: Buildah, archive: Path, *, name: str, binary: Path) -> None:
    buildah.scratch_image(name, add=binary, to="/noop-webhook", config=[
        "--entrypoint", '["/noop-webhook"]', "--user", f"{NOOP_UID}:{NOOP_UID}",
        "--label", TEST_ONLY_LABEL])
    buildah.save(name, archive)


def build_base(buildah: Buildah, archive: Path, mirror: str) -> None:
    rootfs = buildah.work / "rootfs"
    out = subprocess.run(
        ["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", SUITE,
         str(rootfs), mirror], capture_output=True, text=True, timeout=1200, check=False)
    if out.returncode != 0:
        raise ImageError(f"debootstrap: {out.stderr[-4000:]}{out.stdout[-2000:]}")
    if HOST_CAS.is_dir():
        for ca in HOST_CAS.glob("*.crt"):
            shutil.copy(ca, rootfs / "usr/local/share/ca-certificates" / ca.name)
        subprocess.run(["chroot", str(rootfs), "update-ca-certificates"],
                       capture_output=True, timeout=120, check=True)
    # PEP 668: the image's pip installs into the system Python, as python:3.11-slim's does.
    for marker in rootfs.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
        marker.unlink()
    for leftover in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for path in (rootfs / leftover).glob("*"):
            if path.is_file():
                path.unlink()
    tarball = buildah.work / "rootfs.tar"
    with tarfile.open(tarball, "w") as tar:
        tar.add(rootfs, arcname=".")
    buildah.scratch_image(BASE_NAME, add=tarball, to="/", config=[
        "--env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--env", "LANG=C.UTF-8", "--cmd", '["python3"]', "--label", TEST_ONLY_LABEL])
    buildah.save(BASE_NAME, archive)


def build_rollgate(buildah: Buildah, base: Image, name: str, archive: Path,
                   labels: Sequence[str] = (TEST_ONLY_LABEL,)) -> None:
    buildah("pull", "-q", f"oci-archive:{base.archive}")
    # Host network: buildah has no CNI configured here, and pip must reach PyPI.
    buildah("build", "--from", base.name, "--pull=never", "--network", "host",
            "--isolation", "oci", "--layers=false",
            *(arg for label in labels for arg in ("--label", label)),
            "-t", name, "-f", str(DOCKERFILE), str(REPO_ROOT), timeout=1800)
    buildah.save(name, archive)


def archive_digest(archive: Path) -> str:
    """The digest of the one image manifest an OCI archive holds: what a registry serves
    it as, and what the kubelet pulls by."""
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        if member is None:
            raise ImageError(f"{archive}: no index.json: not an OCI archive")
        manifests = json.load(member).get("manifests")
    if not isinstance(manifests, list) or len(manifests) != 1:
        raise ImageError(f"{archive}: expected one image in index.json")
    return str(manifests[0]["digest"])


def release_labels(version: str, *, base_name: str, base_digest: str) -> list[str]:
    """What a release image says of itself (OCI's annotation keys, as labels): its title
    and version, and the base it was built on."""
    return ["org.opencontainers.image.title=rollgate",
            f"org.opencontainers.image.version={version}",
            f"org.opencontainers.image.base.name={base_name}",
            f"org.opencontainers.image.base.digest={base_digest}"]


def dockerfile_base(dockerfile: Path = DOCKERFILE) -> str:
    """The Dockerfile's ``FROM``, fully qualified as Docker resolves a short name
    (``python:3.11-slim`` is ``docker.io/library/python:3.11-slim``)."""
    line = next(x for x in dockerfile.read_text().splitlines() if x.split()[:1] == ["FROM"])
    ref = line.split()[1]
    first = ref.split("/", 1)[0]
    if "/" not in ref:
        return f"docker.io/library/{ref}"
    if "." not in first and ":" not in first and first != "localhost":
        return f"docker.io/{ref}"
    return ref


def rollgate_on(base_ref: str, *, version: str, name: str, archive: Path) -> str:
    """rollgate's image ``version`` on ``base_ref`` pulled from its registry (the host's
    buildah credentials and CAs), as ``archive``, with :func:`release_labels`; not
    test-only, never cached. Returns the base's digest."""
    buildah = Buildah(cache_dir() / f"work-release-{os.getpid()}")
    try:
        buildah("pull", "-q", base_ref, timeout=900)
        digest = buildah("inspect", "--type", "image", "--format", "{{.FromImageDigest}}",
                         base_ref)
        labels = release_labels(version, base_name=base_ref, base_digest=digest)
        buildah("build", "--from", base_ref, "--pull=never", "--network", "host",
                "--isolation", "oci", "--layers=false",
                *(arg for label in labels for arg in ("--label", label)),
                "-t", name, "-f", str(DOCKERFILE), str(REPO_ROOT), timeout=1800)
        buildah.save(name, archive)
    finally:
        buildah.close()
    return digest


def build_rollouts(buildah: Buildah, archive: Path, *, name: str,
                   binaries: rollouts_binaries.RolloutsBinaries, ca: PluginsCA) -> None:
    rootfs = buildah.work / "rootfs"
    for path, source in ((f"bin/{binaries.controller.name}", binaries.controller),
                         (IMAGE_SAMPLE_PLUGIN.lstrip("/"), binaries.metrics_plugin_sample)):
        (rootfs / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, rootfs / path)
    (rootfs / GO_CA_BUNDLE).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(ca.cert, rootfs / GO_CA_BUNDLE)
    home = rootfs / "home" / "argo-rollouts"
    home.mkdir(parents=True)
    os.chown(home, ROLLOUTS_UID, ROLLOUTS_UID)
    (rootfs / "tmp").mkdir(mode=0o1777)
    tarball = buildah.work / "rootfs.tar"
    with tarfile.open(tarball, "w") as tar:
        tar.add(rootfs, arcname=".")
    buildah.scratch_image(name, add=tarball, to="/", config=[
        "--user", str(ROLLOUTS_UID), "--workingdir", "/home/argo-rollouts",
        "--entrypoint", f'["/bin/{binaries.controller.name}"]',
        "--label", TEST_ONLY_LABEL])
    buildah.save(name, archive)


def _cached(kind: str, digest: str) -> Path:
    return cache_dir() / f"{kind}-{digest[:16]}.tar"


def ensure(kind: str, digest: str, name: str,
           build: Callable[[Buildah, Path], None]) -> Image:
    """The cached archive of ``kind`` for ``digest``, built first when missing (older
    archives of the same kind go: they are never used again)."""
    archive = _cached(kind, digest)
    if archive.is_file():
        return Image(name=name, archive=archive, digest=digest)
    cache_dir().mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    _say(f"{kind}: building {name}")
    buildah = Buildah(cache_dir() / f"work-{kind}-{os.getpid()}")
    try:
        build(buildah, archive)
        size = buildah("images", "--format", "{{.Size}}", name)
    finally:
        buildah.close()
    for old in cache_dir().glob(f"{kind}-*.tar"):
        if old != archive:
            old.unlink()
    _say(f"{kind}: built in {time.monotonic() - started:.0f}s; image {size}, archive "
         f"{archive.stat().st_size / 2**20:.0f} MiB")
    return Image(name=name, archive=archive, digest=digest)


def pause() -> Image:
    return ensure("pause", pause_inputs(), PAUSE_NAME, build_pause)


def base() -> Image:
    mirror = debian_mirror()
    return ensure("base", base_inputs(mirror), BASE_NAME,
                  lambda buildah, archive: build_base(buildah, archive, mirror))


def rollgate() -> Image:
    """rollgate's image, tagged with the first 12 hex digits of its inputs' digest."""
    from_image = base()
    digest = rollgate_inputs(from_image.digest)
    name = f"{ROLLGATE_REPOSITORY}:{digest[:12]}"
    return ensure("rollgate", digest, name,
                  lambda buildah, archive: build_rollgate(buildah, from_image, name, archive))


def rollgate_release(version: str) -> Image:
    """rollgate's image for release ``version`` on the stand-in base: the test image's
    build plus :func:`release_labels`, cached by its inputs and those labels. It is not the
    node's test image (other labels, so another image ID): the node's tests pull this one
    from the registry with a pull secret, and kubelet 1.35 ties an image pulled with a
    secret to that secret by its ID (a pod without it gets ErrImageNeverPull)."""
    from_image = base()
    labels = [TEST_ONLY_LABEL, *release_labels(version, base_name=BASE_NAME,
                                               base_digest=archive_digest(from_image.archive))]
    digest = digest_of([rollgate_inputs(from_image.digest).encode(),
                        *(label.encode() for label in labels)])
    name = f"{ROLLGATE_REPOSITORY}:{version}-{digest[:12]}"
    return ensure("release", digest, name, lambda buildah, archive: build_rollgate(
        buildah, from_image, name, archive, labels))


def rollouts() -> Image:
    """Argo Rollouts' image, tagged ``v<version>-<first 12 hex digits of its inputs>``."""
    binaries = rollouts_binaries.find_binaries()
    ca = plugins_ca()
    digest = rollouts_inputs(binaries, ca)
    name = f"{ROLLOUTS_REPOSITORY}:{versions.argo_rollouts()}-{digest[:12]}"
    return ensure("argo-rollouts", digest, name, lambda buildah, archive: build_rollouts(
        buildah, archive, name=name, binaries=binaries, ca=ca))


def noop_webhook(binary: Path) -> Image:
    """The no-op webhook's image (``binary``: harness.noop_webhook.noop_binary()),
    tagged with the first 12 hex digits of its digest."""
    digest = noop_inputs(binary)
    name = f"{NOOP_REPOSITORY}:{digest[:12]}"
    return ensure("noop-webhook", digest, name, lambda buildah, archive: build_noop(
        buildah, archive, name=name, binary=binary))


@dataclass(frozen=True, slots=True)
class NodeImages:
    """The images a node imports: its sandbox, rollgate's and Argo Rollouts'."""

    pause: Image
    rollgate: Image
    rollouts: Image

    @property
    def all(self) -> tuple[Image, ...]:
        return (self.pause, self.rollgate, self.rollouts)


def for_node() -> NodeImages:
    """Every image the node's pods run, built where missing."""
    return NodeImages(pause=pause(), rollgate=rollgate(), rollouts=rollouts())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.node.images",
                                     description="Build the node's images where missing.")
    parser.parse_args(argv)
    try:
        images = for_node()
    except (ImageError, rollouts_binaries.RolloutsBinariesMissing) as err:
        _say(str(err))
        return 1
    for image in images.all:
        print(f"{image.name}\t{image.archive}\t{image.archive.stat().st_size / 2**20:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
