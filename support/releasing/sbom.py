"""The SBOM of a release image's Python dependencies: CycloneDX 1.5 JSON, written from
``requirements.lock`` (docs/install.md "Get the image and the chart").

Written from the lock rather than by a scanner (``cyclonedx-bom`` reads an installed
environment): the Dockerfile installs exactly the lock (``pip install -c
requirements.lock .`` then ``pip check``), so the lock is the list, known before the
image is built and the same on every machine, with no new dependency. A test reads the
release image's layers and checks that the distributions pip installed there are the
SBOM's components and rollgate itself, so the two cannot drift apart.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SPEC_VERSION = "1.5"
_PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;#]+)")


@dataclass(frozen=True, order=True)
class Pin:
    name: str
    version: str

    @property
    def normalized(self) -> str:
        """The name as PyPI and package URLs compare it (PEP 503)."""
        return re.sub(r"[-_.]+", "-", self.name).lower()

    @property
    def purl(self) -> str:
        return f"pkg:pypi/{self.normalized}@{self.version}"


def pins(lock: str) -> list[Pin]:
    """``name==version`` lines of a lock file; anything else but comments is an error,
    so an SBOM never silently leaves a dependency out."""
    found: list[Pin] = []
    for number, raw in enumerate(lock.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _PIN.match(line)
        if match is None:
            raise ValueError(f"requirements.lock line {number}: not name==version: {raw!r}")
        found.append(Pin(match["name"], match["version"]))
    return sorted(found)


def document(*, lock: str, version: str, image_digest: str, base: str,
             created: dt.datetime, serial: uuid.UUID | None = None) -> dict[str, Any]:
    """The CycloneDX document: rollgate ``version`` (its image, by digest, on ``base``)
    and one library component per pin."""
    properties = [{"name": "rollgate:image-digest", "value": image_digest},
                  {"name": "rollgate:base-image", "value": base}]
    return {
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "serialNumber": f"urn:uuid:{serial or uuid.uuid4()}",
        "version": 1,
        "metadata": {
            "timestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": {"components": [{"type": "application", "name": "rollgate releasing",
                                      "version": version}]},
            "component": {"type": "container", "bom-ref": "rollgate-image",
                          "name": "rollgate", "version": version,
                          "purl": f"pkg:oci/rollgate@{image_digest.replace(':', '%3A')}",
                          "properties": properties},
        },
        "components": [_component(pin) for pin in pins(lock)],
    }


def _component(pin: Pin) -> dict[str, Any]:
    return {"type": "library", "bom-ref": pin.purl, "name": pin.name,
            "version": pin.version, "purl": pin.purl}


def components(sbom: Mapping[str, Any]) -> list[Pin]:
    """The (name, version) of each component of a CycloneDX document, as in the lock."""
    items: Sequence[Mapping[str, Any]] = sbom.get("components") or []
    return sorted(Pin(str(c["name"]), str(c["version"])) for c in items)


def dumps(sbom: Mapping[str, Any]) -> str:
    return json.dumps(sbom, indent=2, sort_keys=False) + "\n"
