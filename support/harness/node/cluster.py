"""A node and a plane for pods, composed: what the deployment tests and ``make dev`` run.

``NodeCluster.start()``, in order: the machine's node lock (a second start fails at once
naming the holder); the leftovers of a killed run undone (by the host state that run
recorded); the host state recorded; the images built where missing (before anything on
the host changes); the bridge; a plane whose API server serves the bridge address on
443 with what pods need; the harness's registry on the bridge address (``harness.registry``,
data under the node's directory); containerd, trusting that registry, with the images
imported (rollgate's only with ``import_rollgate``: without it its pods pull it from the
registry, see :meth:`NodeCluster.import_image`); kubelet; and the wait until the Node is
Ready and the ``default`` ServiceAccount exists. ``stop()`` ends the pods, kubelet,
containerd, the registry and the plane, undoes every host change (``restore``), keeps
only the logs, and releases the lock; a failed start does the same.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import registry
from harness.node import containerd, hoststate, images, kubelet, network, restore
from harness.node.images import Image
from harness.node.lock import NodeLock
from harness.node.settings import NodeSettings
from harness.plane import ControlPlane, PlaneError


class NodeError(PlaneError):
    """The node did not start, or could not be undone; the message says why."""


def schedulable(node: Mapping[str, Any]) -> bool:
    """Ready, and no taint left that keeps pods off it (the not-ready taint goes a moment
    after Ready)."""
    ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                for c in node.get("status", {}).get("conditions", []))
    blocked = any(t.get("effect") in ("NoSchedule", "NoExecute")
                  for t in node.get("spec", {}).get("taints") or [])
    return ready and not blocked


def require_root() -> None:
    if os.geteuid() != 0:
        raise NodeError("the node needs root: it adds a bridge, mounts, cgroups and "
                        "kubelet's firewall chains (all undone at stop); run as root")


@dataclass
class NodeCluster:
    settings: NodeSettings = field(default_factory=NodeSettings)
    crds: Sequence[Mapping[str, Any]] = ()
    verbose: bool = False
    # False: rollgate's image is not in containerd at start; pods pull it (by digest,
    # with a pull secret) from the registry, as in a user's cluster.
    import_rollgate: bool = True
    plane: ControlPlane = field(init=False)
    baseline: hoststate.HostState = field(init=False)
    images: images.NodeImages = field(init=False)
    registry: registry.Registry = field(init=False)
    _lock: NodeLock = field(init=False)
    _started: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        self._lock = NodeLock(self.settings.lock_file)
        self.plane = ControlPlane(work_dir=self.settings.state_dir / "plane",
                                  profile=self.settings.profile, crds=self.crds,
                                  verbose=self.verbose)

    def say(self, message: str) -> None:
        self.plane.say(f"node: {message}")

    def __enter__(self) -> NodeCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ start

    def start(self) -> NodeCluster:
        require_root()
        self._lock.acquire()
        try:
            self.undo_killed_run()
            self.baseline = hoststate.capture()
            self.settings.state_dir.mkdir(parents=True, exist_ok=True)
            self.settings.baseline_file.write_text(self.baseline.to_json())
            self._started = True
            started = time.monotonic()
            self.images = images.for_node()
            self.plane.timed("images", started)
            network.bridge_up(self.settings)
            self.plane.start()
            self.registry = registry.start(self.plane, address=self.settings.address,
                                           port=registry.PORT,
                                           directory=self.settings.state_dir / "registry")
            containerd.start(self.plane, self.settings,
                             {self.registry.host: self.registry.ca_file})
            started = time.monotonic()
            containerd.import_images(self.settings, [
                i.archive for i in self.images.all
                if self.import_rollgate or i is not self.images.rollgate])
            self.plane.timed("image import", started)
            kubelet.start(self.plane, self.settings)
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def import_image(self, image: Image) -> None:
        """Import ``image`` into containerd now (a node started without it)."""
        containerd.import_images(self.settings, [image.archive])

    def remove_image(self, image: Image) -> None:
        """Remove ``image`` from containerd: pods that start afterwards cannot get it, as
        when its registry is gone (``import_image`` brings it back)."""
        containerd.remove_images(self.settings, [image.name])

    def undo_killed_run(self) -> None:
        """What a run that did not reach its stop left behind, undone by its record."""
        record = self.settings.baseline_file
        if record.is_file():
            self.say(f"undoing what an earlier run left ({record})")
            restore.restore(self.settings, hoststate.HostState.from_json(record.read_text()),
                            say=self.say)
        if self.settings.state_dir.exists():
            restore.unmount_under(self.settings.state_dir, self.say)
            shutil.rmtree(self.settings.state_dir, ignore_errors=True)

    def wait_ready(self, timeout: float = 120) -> None:
        """Until the Node is Ready and the ``default`` ServiceAccount exists (pods in
        ``default`` need it); on timeout the error carries kubelet's last log lines."""
        started = time.monotonic()
        deadline = started + timeout
        name = self.settings.name
        while time.monotonic() < deadline:
            out = self.plane.kubectl("get", "node", name, "-o", "json", check=False)
            ready = out.returncode == 0 and schedulable(json.loads(out.stdout))
            account = self.plane.kubectl("get", "serviceaccount", "default", "-n", "default",
                                         check=False).returncode == 0
            if ready and account:
                self.plane.timed("node ready", started)
                return
            time.sleep(0.5)
        raise NodeError(f"node {name} not Ready after {timeout:.0f}s; kubelet's log "
                        f"({self.plane.process('kubelet').log_path}):\n"
                        f"{self.plane.process('kubelet').log_tail(30)}")

    # ------------------------------------------------------------------ stop

    def stop(self) -> None:
        if not self._lock.held:
            return
        try:
            if self._started:
                self._end_pods()
                self.plane.stop(remove_data=False)
                restore.restore(self.settings, self.baseline, say=self.say)
                left = restore.leftovers(self.baseline)
                if left:
                    self.say("still different from before the start: " + "; ".join(left))
                self._keep_only_logs()
        finally:
            self._started = False
            self._lock.release()

    def _end_pods(self) -> None:
        """Pods off the node while kubelet still runs (it tears sandboxes down: CNI DEL,
        volume unmounts), with nothing left to recreate them."""
        alive = {p.name for p in self.plane.processes if p.alive()}
        if not {"kube-apiserver", "kubelet", "containerd"} <= alive:
            return  # stopped by a signal already: restore() ends what is left
        self.plane.stop_process(self.plane.process("kube-controller-manager"))
        self.plane.kubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=1",
                           "--wait=false", check=False, timeout=60)
        deadline = time.monotonic() + 45
        while time.monotonic() < deadline:
            if not containerd.ctr(self.settings, "tasks", "ls", "-q", check=False,
                                  timeout=10).stdout.strip():
                break
            time.sleep(0.5)

    def _keep_only_logs(self) -> None:
        """The node's directory holds nothing but the processes' logs after a stop."""
        root = self.settings.state_dir
        keep = {self.plane.logs_dir, root / "podlogs"}
        for path in root.iterdir() if root.is_dir() else []:
            if path == root / "plane":
                for sub in path.iterdir():
                    if sub not in keep:
                        _remove(sub)
            elif path not in keep:
                _remove(path)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
