"""RolloutManager plugins sync latency on a real control plane.

Starts a control plane (support/harness/plane.py, no webhook: only the reconciler's path is
measured) and the reconciler with only the rollout-plugins controller, one
RolloutManager and a stand-in ``argo-rollouts`` Deployment, then measures:

- hand-edit revert: ``--edits`` times (default 20), one after another, a merge patch
  replaces ``metricProviderPlugins`` in ``argo-rollouts-config`` with a hand-made value;
  the time from the patch's response until a watch shows rollgate's value back.
- spec change: ``--changes`` times (default 10), the RolloutManager's metric plugin
  location is changed; the time from the patch's response until a watch shows the new
  location in the ConfigMap.
- spec change with the digest pre-flight: ``--preflight-changes`` times (default 5), the
  metric plugin moves to a new https location with a sha256, served from 127.0.0.1 over
  TLS (a CA made here, ``--plugins-ca-file``) with a binary of ``--binary-mib`` MiB
  (default 64, the size of a real plugin); every change is a new (location, sha256) pair,
  so each one downloads and hashes the whole binary before the ConfigMap is written.

Prints median and worst of each and the load average. Nothing is asserted about the
figures (the e2e tests check the behaviour).

    .venv/bin/python -m bench.plugins [--edits 20] [--changes 10] [--preflight-changes 5]
                                      [--binary-mib 64]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

from bench.stats import report, summary
from bench.watches import Watch
from harness.kits.plane import plane_with_rollgate
from schemas.kinds import GROUP_ARGO, VERSION_ARGO
from testkit import objects
from testkit.plugin_server import PluginServer, elf_stand_in, sha256

ROOT = Path(__file__).resolve().parent.parent

NS = "bench-plugins"
CM = "argo-rollouts-config"
METRIC = "metricProviderPlugins"


def rollout_manager(location: str, digest: str | None = None) -> dict[str, Any]:
    entry = {"name": "argoproj-labs/sample-prometheus", "location": location}
    if digest:
        entry["sha256"] = digest
    return objects.rollout_manager("rm", metric=[entry])


def resource_version(cm: client.V1ConfigMap) -> str:
    """The resourceVersion the API server returned on ``cm``."""
    assert cm.metadata is not None and cm.metadata.resource_version is not None
    return cm.metadata.resource_version


def equals(expected: str | None) -> Callable[[str | None], bool]:
    return lambda value: value == expected


def contains(part: str) -> Callable[[str | None], bool]:
    return lambda value: part in (value or "")


def wait_for_value(core: client.CoreV1Api, rv: str, done: Callable[[str | None], bool],
                   timeout: int = 60) -> float:
    """monotonic time of the first ConfigMap event after ``rv`` whose METRIC fits ``done``."""
    w = Watch()
    for event in w.stream(core.list_namespaced_config_map, NS, resource_version=rv,
                          field_selector=f"metadata.name={CM}", timeout_seconds=timeout):
        seen = time.monotonic()
        if done((event["object"].data or {}).get(METRIC)):
            w.stop()
            return seen
    raise SystemExit(f"no matching ConfigMap event within {timeout}s")


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--edits", type=int, default=20)
    p.add_argument("--changes", type=int, default=10)
    p.add_argument("--preflight-changes", type=int, default=5)
    p.add_argument("--binary-mib", type=int, default=64)
    args = p.parse_args()

    with plane_with_rollgate(webhook=False) as rollgate:
        plane = rollgate.plane
        server = PluginServer(plane.root / "plugin-server").start()
        try:
            api = plane.api_client()
            core = client.CoreV1Api(api)
            co = client.CustomObjectsApi(api)
            plane.kubectl("create", "namespace", NS)
            # The client sends a dict body as it is; its annotation names only the model.
            client.AppsV1Api(api).create_namespaced_deployment(
                NS, objects.deployment())  # type: ignore[arg-type]
            co.create_namespaced_custom_object(GROUP_ARGO, VERSION_ARGO, NS, "rolloutmanagers",
                                               rollout_manager("file:///plugins/prom-0"))
            proc = rollgate.start_reconciler(
                "--controllers", "rollout-plugins", "--no-leader-elect", "--namespaces", NS,
                "--plugins-ca-file", str(server.ca_file), name="reconciler-bench-plugins")
            proc.wait_ready(60)

            def current() -> str | None:
                try:
                    cm = core.read_namespaced_config_map(CM, NS)
                except client.ApiException as exc:
                    if exc.status == 404:
                        return None
                    raise
                return (cm.data or {}).get(METRIC)

            deadline = time.monotonic() + 60
            while not (current() or "").count("prom-0"):
                if time.monotonic() > deadline:
                    raise SystemExit(f"initial sync did not happen; see {proc.log_path}")
                time.sleep(0.1)
            time.sleep(1)  # let the first sync's condition and Deployment writes settle

            reverts: list[float] = []
            for i in range(args.edits):
                rendered = current()
                hand = yaml.safe_dump([{"name": "someone/else", "location": f"file:///x/{i}"}])
                edited = core.patch_namespaced_config_map(CM, NS, {"data": {METRIC: hand}})
                committed = time.monotonic()
                back = wait_for_value(core, resource_version(edited), equals(rendered))
                reverts.append(back - committed)

            changes: list[float] = []
            for i in range(1, args.changes + 1):
                location = f"file:///plugins/prom-{i}"
                rv = resource_version(core.read_namespaced_config_map(CM, NS))
                co.patch_namespaced_custom_object(
                    GROUP_ARGO, VERSION_ARGO, NS, "rolloutmanagers", "rm",
                    {"spec": rollout_manager(location)["spec"]})
                changed = time.monotonic()
                seen = wait_for_value(core, rv, contains(location))
                changes.append(seen - changed)
                time.sleep(0.5)  # let the Deployment annotation and condition writes settle

            binary = elf_stand_in(bytes(range(32, 127)).decode() * 8, copies=args.binary_mib * 1378)
            digest = sha256(binary)
            proven: list[float] = []
            for i in range(1, args.preflight_changes + 1):
                location = server.serve(f"/plugins/{i}/metric-plugin", binary)
                rv = resource_version(core.read_namespaced_config_map(CM, NS))
                co.patch_namespaced_custom_object(
                    GROUP_ARGO, VERSION_ARGO, NS, "rolloutmanagers", "rm",
                    {"spec": rollout_manager(location, digest)["spec"]})
                changed = time.monotonic()
                seen = wait_for_value(core, rv, contains(location), timeout=300)
                proven.append(seen - changed)
                time.sleep(0.5)

            result = {
                "hand_edit_revert": summary(reverts),
                "spec_change_to_config_map": summary(changes),
                "spec_change_with_preflight_to_config_map": {
                    **summary(proven), "binary_mib": args.binary_mib},
                "reconciler_log": str(proc.log_path),
            }
            report(result)
            proc.stop()
        finally:
            server.stop()

    return 0


if __name__ == "__main__":
    sys.exit(main())
