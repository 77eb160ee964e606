"""A release's files in ``dist/`` and what can be read from them without a registry: the
image's digest (an OCI archive's ``index.json``) and the checksums (``SHA256SUMS``, as
``sha256sum -c`` reads it)."""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import tarfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from harness.node import images

CHECKSUMS = "SHA256SUMS"


class ArtifactError(RuntimeError):
    """A release's files are missing, damaged or not what they claim."""


@dataclass(frozen=True)
class Artifacts:
    """The files of version ``version`` of a release in ``directory``."""

    directory: Path
    version: str

    @property
    def image(self) -> Path:
        """The image as an OCI archive (``skopeo``/``crane``/``podman load`` read it)."""
        return self.directory / f"rollgate-{self.version}.oci.tar"

    @property
    def chart(self) -> Path:
        return self.directory / f"rollgate-{self.version}.tgz"

    @property
    def sbom(self) -> Path:
        return self.directory / f"rollgate-{self.version}.cdx.json"

    @property
    def checksums(self) -> Path:
        return self.directory / CHECKSUMS

    @property
    def files(self) -> tuple[Path, Path, Path]:
        return (self.image, self.chart, self.sbom)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_checksums(paths: Iterable[Path], out: Path) -> None:
    """``sha256sum``'s format, names relative to ``out``'s directory."""
    out.write_text("".join(f"{sha256_file(p)}  {p.name}\n" for p in paths))


def verify_checksums(artifacts: Artifacts) -> None:
    """Every file of the release is there and matches ``SHA256SUMS``."""
    if not artifacts.checksums.is_file():
        raise ArtifactError(f"{artifacts.checksums}: missing; run `make release` first")
    listed = {}
    for line in artifacts.checksums.read_text().splitlines():
        digest, _, name = line.partition("  ")
        listed[name] = digest
    for path in artifacts.files:
        if not path.is_file():
            raise ArtifactError(f"{path}: missing; run `make release` first")
        if listed.get(path.name) != sha256_file(path):
            raise ArtifactError(f"{path}: does not match {artifacts.checksums.name}; "
                                "run `make release` again")


def _index(archive: Path) -> dict[str, object]:
    with tarfile.open(archive) as tar:
        member = tar.extractfile("index.json")
        if member is None:
            raise ArtifactError(f"{archive}: no index.json: not an OCI archive")
        index: dict[str, object] = json.load(member)
    return index


def image_digest(archive: Path) -> str:
    """The digest of the image an OCI archive holds (what the registry serves it as)."""
    try:
        return images.archive_digest(archive)
    except images.ImageError as err:
        raise ArtifactError(str(err)) from err


def copy_archive(source: Path, dest: Path, *, ref_name: str) -> None:
    """``source`` (an OCI archive) as ``dest``, its one image named ``ref_name`` in
    ``index.json`` (the name ``skopeo``/``podman load`` give it); the image itself, and
    so its digest, is unchanged. Written aside, then renamed."""
    index = _index(source)
    manifests = index["manifests"]
    assert isinstance(manifests, list)
    manifests[0].setdefault("annotations", {})["org.opencontainers.image.ref.name"] = ref_name
    data = json.dumps(index).encode()
    partial = dest.with_name(dest.name + ".partial")
    with tarfile.open(source) as src, tarfile.open(partial, "w") as out:
        for member in src:
            if member.name == "index.json":
                member.size = len(data)
                out.addfile(member, io.BytesIO(data))
            elif member.isfile():
                out.addfile(member, src.extractfile(member))
            else:
                out.addfile(member)
    shutil.move(partial, dest)
