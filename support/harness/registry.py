"""The harness's OCI registry: what ``make publish`` pushes to and the node pulls from.

``registry serve`` (hack/registry: go-containerregistry's ``pkg/registry`` behind TLS and
HTTP basic auth, ``hack/k8s/build.sh registry``) runs as a process of a plane, so it
stops with it. Each start makes its own CA (the node's containerd trusts it through
``hosts.toml``'s ``ca``, clients through ``SSL_CERT_FILE``), a serving certificate for
the address it listens on, and a user with a random password in a bcrypt htpasswd file;
blobs go under ``directory``, which goes with the node's state (docs/development.md "The
registry").

:meth:`Registry.client_env` is what a client needs, the way a user's machine has it: a
Docker config with the credentials (read by crane and helm alike) and the CA.
"""

from __future__ import annotations

import base64
import json
import secrets
import ssl
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from harness import versions
from harness.paths import binary as find_binary
from harness.pki import CA
from harness.plane import ControlPlane

USERNAME = "rollgate-ci"
PORT = 5000


def binary(name: str) -> Path:
    """``registry`` or ``crane``, built from the pinned go-containerregistry."""
    return find_binary(name, f"registry-{versions.get('GO_CONTAINERREGISTRY_VERSION')}",
                       build="hack/k8s/build.sh registry")


@dataclass(frozen=True)
class Registry:
    """A running registry: where it listens, who may use it, what to trust."""

    host: str
    username: str
    password: str
    ca_file: Path
    directory: Path

    @property
    def url(self) -> str:
        return f"https://{self.host}"

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def docker_config(self) -> Path:
        """A Docker config (``config.json``) holding the credentials, in a directory of
        its own: ``DOCKER_CONFIG`` for crane, and helm reads Docker's config too."""
        directory = self.directory / "client"
        directory.mkdir(parents=True, exist_ok=True)
        token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
        path = directory / "config.json"
        path.write_text(json.dumps({"auths": {self.host: {"auth": token}}}))
        path.chmod(0o600)
        return directory

    def client_env(self, base: dict[str, str]) -> dict[str, str]:
        """``base`` plus the credentials and the CA, as a user's shell would have them
        after ``crane auth login`` with their registry's CA installed."""
        config = self.docker_config()
        return {**base, "DOCKER_CONFIG": str(config),
                "HELM_REGISTRY_CONFIG": str(config / "config.json"),
                "SSL_CERT_FILE": str(self.ca_file)}

    def status(self, path: str, *, auth: bool = True) -> int:
        """The HTTP status of a GET of ``path`` (``/v2/...``), with or without the
        credentials."""
        request = urllib.request.Request(self.url + path)
        if auth:
            token = base64.b64encode(f"{self.username}:{self.password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        try:
            with urllib.request.urlopen(request, timeout=5, context=self.ssl_context()) as resp:
                return int(resp.status)
        except urllib.error.HTTPError as err:
            return int(err.code)

    def ready(self) -> bool:
        try:
            return self.status("/v2/") == 200
        except OSError:
            return False


def htpasswd_line(username: str, password: str) -> str:
    out = subprocess.run([str(binary("registry")), "htpasswd", username], input=password,
                         capture_output=True, text=True, timeout=30, check=True)
    return out.stdout


def start(plane: ControlPlane, *, address: str, port: int, directory: Path,
          name: str = "registry") -> Registry:
    """Start the registry on ``address:port`` (a process of ``plane``) and wait until it
    answers an authenticated ``/v2/``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca = CA.create("rollgate test registry CA")
    cert, key = ca.issue(common_name=address, sans=[address], server=True)
    files = {"ca.crt": ca.pem, "tls.crt": cert, "tls.key": key}
    for file_name, data in files.items():
        (directory / file_name).write_bytes(data)
    (directory / "tls.key").chmod(0o600)
    password = secrets.token_urlsafe(18)
    (directory / "htpasswd").write_text(htpasswd_line(USERNAME, password))
    host = f"{address}:{port}"
    registry = Registry(host=host, username=USERNAME, password=password,
                        ca_file=directory / "ca.crt", directory=directory)
    proc = plane.spawn(name, [
        str(binary("registry")), "serve", "-addr", host,
        "-tls-cert", str(directory / "tls.crt"), "-tls-key", str(directory / "tls.key"),
        "-htpasswd", str(directory / "htpasswd"), "-data", str(directory / "blobs")],
        env=plane.child_env(), ready_check=registry.ready)
    proc.wait_ready(30)
    return registry
