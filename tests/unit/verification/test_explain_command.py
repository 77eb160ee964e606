"""The I/O edge of ``rollgate explain``: the cluster and namespace chosen as kubectl
chooses them (``--kubeconfig``, ``--context``, the context's namespace), and what it
reads through the one fake client (``support/testkit/fakeapi/``)."""

from __future__ import annotations

from pathlib import Path

import yaml

from kubekit.client import load_api_client
from kubekit.kinds import ANALYSIS_RUN, FREIGHT, STAGE
from reconciler.explain_command import context_namespace, main, read
from schemas.constants import LABEL_STAGE
from testkit import objects
from testkit.fakeapi import FakeApi


def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "dev",
        "clusters": [{"name": "a", "cluster": {"server": "https://a.example:6443"}},
                     {"name": "b", "cluster": {"server": "https://b.example:6443"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "dev", "context": {"cluster": "a", "user": "u",
                                                 "namespace": "guestbook"}},
                     {"name": "prod", "context": {"cluster": "b", "user": "u"}}],
    }))
    return path


def test_the_context_picks_the_cluster_and_the_namespace(tmp_path: Path) -> None:
    config = str(kubeconfig(tmp_path))
    assert load_api_client(config).configuration.host == "https://a.example:6443"
    assert load_api_client(config, context="prod").configuration.host == (
        "https://b.example:6443")
    assert context_namespace(config, None) == "guestbook"
    assert context_namespace(config, "prod") == "default"
    assert context_namespace(str(tmp_path / "missing"), None) == "default"


def test_an_unknown_context_is_one_line(tmp_path: Path, capsys) -> None:
    config = str(kubeconfig(tmp_path))
    assert main(["stage", "test", "--kubeconfig", config, "--context", "nope"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("rollgate explain: no cluster to talk to (") and err.count("\n") == 1


def test_it_reads_the_stage_its_runs_by_kargos_label_and_the_current_freight() -> None:
    api = FakeApi()
    api.put(STAGE, objects.stage("test", namespace="ns", freight=False, status={
        "freightHistory": [{"id": "c1", "items": {"Warehouse/w": {"name": "f1"}}}]}))
    api.put(FREIGHT, objects.freight("f1", namespace="ns", warehouse="w"))
    for name, stage in (("r1", "test"), ("r2", "other")):
        api.put(ANALYSIS_RUN, objects.analysis_run(name, namespace="ns",
                                                   labels={LABEL_STAGE: stage}))

    stage, runs, freight = read(api.rest(), namespace="ns", name="test")

    assert stage is not None and stage["metadata"]["name"] == "test"
    assert [r["metadata"]["name"] for r in runs] == ["r1"]
    assert list(freight) == ["f1"] and freight["f1"] is not None
    assert read(api.rest(), namespace="ns", name="missing") == (None, [], {})
    # Only reads.
    assert api.writes() == []
