"""An upgrade from the previous release's chart and a rollback to it, as docs/install.md
"Upgrade" writes them, under a stream of admission calls.

The v0.1.0 chart is kept as its release packed it (`fixtures/rollgate-0.1.0.tgz`: `helm
package` of charts/rollgate at commit 18c02599d9d6, CHANGELOG.md "0.1.0") until a
published release can be pulled from a registry; a clone holds no tags, and CI's may
hold no history. Both charts install the node's image
(`image_values`): the image is the same and only the chart changes (v0.1.0's image is
not on the node, and its chart pins none). Its objects differ from today's: among them
the plugins' write RBAC, a ClusterRole of its own since then, which the upgrade adds and
the rollback removes; the stream also spans the upgrade's hook Jobs. A release's new
image changes every pod's template; with the same image here, the upgrade's values add a
pod annotation instead, so the upgrade replaces every rollgate pod under the stream, and
the rollback replaces them again.
"""

from __future__ import annotations

import tarfile
import time
from pathlib import Path

import yaml

from harness import chart
from harness.kits.node import NAMESPACE, Release, denied_by_rollgate, image_values, merged
from harness.kits.stream import streaming
from harness.node.cluster import NodeCluster
from testkit.denials import EXAMPLES

PREVIOUS = Path(__file__).parent / "fixtures" / "rollgate-0.1.0.tgz"
ADDED = "rollgate-reconciler-plugins-write"  # a ClusterRole the current chart adds
# What a new image does to the pods' templates: both components' pods change.
NEW_PODS = {component: {"podAnnotations": {"rollgate.dev/upgrade-test": "next"}}
            for component in ("webhook", "reconciler")}
QUIET_SECONDS = 10  # the stream runs this long before each change and after it settles


def chart_version(path: Path) -> str:
    """The version in Chart.yaml of a chart directory or of a package (``.tgz``)."""
    if path.is_dir():
        text = (path / "Chart.yaml").read_text()
    else:
        with tarfile.open(path) as tar:
            member = tar.extractfile("rollgate/Chart.yaml")
            assert member is not None, f"{path} holds no rollgate/Chart.yaml"
            text = member.read().decode()
    return str(yaml.safe_load(text)["version"])


def has_added_role(rel: Release) -> bool:
    return rel.plane.kubectl("get", "clusterrole", ADDED, check=False).returncode == 0


def pod_uids(rel: Release) -> set[str]:
    return {p["metadata"]["uid"] for p in rel.wait_pods()}


def settled(rel: Release, namespace: str) -> None:
    """Every pod Ready (none terminating) and rollgate denying, then the quiet seconds."""
    rel.wait_pods()
    denied_by_rollgate(rel.plane, namespace)
    time.sleep(QUIET_SECONDS)


def test_upgrade_from_the_previous_chart_and_rollback(node: NodeCluster,
                                                      namespace: str) -> None:
    previous = PREVIOUS
    assert chart_version(previous) != chart_version(chart.CHART), "the same version twice"
    values = image_values(node.images.rollgate)
    rel = Release(node, chart_path=previous)
    rel.install(values)
    plane = node.plane
    try:
        plane.kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "analysistemplate.yaml"))
        settled(rel, namespace)
        assert not has_added_role(rel)
        installed = pod_uids(rel)
        with streaming(plane, namespace) as stream:
            time.sleep(QUIET_SECONDS)
            rel.chart_path = chart.CHART
            rel.upgrade(merged(values, NEW_PODS))  # -f <values>, --wait: "Upgrade"
            settled(rel, namespace)
            assert has_added_role(rel)
            upgraded = pod_uids(rel)
            assert not upgraded & installed, "the upgrade replaced every pod"
            rel.helm("rollback", rel.name, "1", "-n", NAMESPACE, "--wait", "--timeout", "5m")
            settled(rel, namespace)
            assert not has_added_role(rel)
            assert not pod_uids(rel) & upgraded, "the rollback replaced every pod"
        totals = stream.totals
        print(f"upgrade {chart_version(previous)} -> {chart_version(chart.CHART)} and "
              f"rollback: {totals.answered} calls answered, {totals.failed} failed")
        assert totals.answered > 0
        assert totals.failed == 0, "\n".join(totals.errors)
        history = rel.helm("history", rel.name, "-n", NAMESPACE, "-o", "yaml").stdout
        assert [r["chart"] for r in yaml.safe_load(history)] == [
            f"rollgate-{chart_version(previous)}", f"rollgate-{chart_version(chart.CHART)}",
            f"rollgate-{chart_version(previous)}"]
    finally:
        rel.uninstall()
