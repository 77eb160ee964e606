"""The pre-flight refuses a download that is not a Linux executable for the nodes'
architecture (reconciler.plugins.executables, and https_fetcher with ``arch``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.plugins.decisions import refusal
from reconciler.plugins.digests import DigestCheck, DigestVerifier, PluginDigest, https_fetcher
from reconciler.plugins.executables import MACHINES, problem
from testkit.plugin_server import PluginServer, elf_stand_in, sha256

AMD64 = elf_stand_in("plugin")
ARM64 = elf_stand_in("plugin", machine=MACHINES["arm64"])


@pytest.mark.parametrize(("head", "arch"), [(AMD64, "amd64"), (ARM64, "arm64")])
def test_an_executable_for_the_arch_passes(head: bytes, arch: str) -> None:
    assert problem(head, arch=arch) is None


@pytest.mark.parametrize(("head", "words"), [
    (ARM64, "an ELF executable for AArch64 (arm64), not amd64"),
    (b"<!DOCTYPE html><html>404</html>", "starts like HTML or XML"),
    (b"\xcf\xfa\xed\xfe\x07\x00\x00\x01", "macOS (Mach-O)"),
    (b"MZ\x90\x00", "Windows (PE)"),
    (b"#!/bin/sh\nexit 0\n", "a script"),
    (b"\x7fELF\x01\x01\x01" + bytes(13), "32-bit"),
    (b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x01\x00\x3e\x00", "not an executable"),
    (b"\x7fELF\x02", "truncated"),
    (b"", "not a Linux executable"),
])
def test_anything_else_is_named(head: bytes, words: str) -> None:
    found = problem(head, arch="amd64")
    assert found is not None and words in found, found


@pytest.fixture
def server(tmp_path: Path) -> Iterator[PluginServer]:
    with PluginServer(tmp_path / "https") as srv:
        yield srv


def test_a_download_that_is_not_an_executable_is_refused_with_what_it_is(
        server: PluginServer) -> None:
    page = b"<html><body>Not Found</body></html>\n" * 10
    url = server.serve("/plugin", page)
    verifier = DigestVerifier(https_fetcher(ca_file=str(server.ca_file), arch="amd64"))
    check = verifier.check(url, sha256(page))
    assert check.outcome == "not-executable"
    assert "HTML" in check.reason


def test_the_check_reads_only_the_first_bytes_and_keeps_the_digest(
        server: PluginServer) -> None:
    url = server.serve("/plugin", AMD64)
    fetch = https_fetcher(ca_file=str(server.ca_file), arch="amd64")
    assert fetch(url) == sha256(AMD64)
    other = server.serve("/arm", ARM64)
    check = DigestVerifier(fetch).check(other, sha256(ARM64))
    assert check.outcome == "not-executable" and "not amd64" in check.reason


def test_the_refusal_names_the_plugin_what_the_file_is_and_why_it_matters() -> None:
    bad = PluginDigest(path="spec.plugins.metric[0]", name="acme/metric", check=DigestCheck(
        "https://x/m", "ab" * 32, "not-executable", reason="a Windows (PE) binary"))
    reason, message = refusal([bad], "argo-rollouts")
    assert reason == "NotExecutable"
    assert message.startswith("spec.plugins.metric[0].location: plugin acme/metric: the file "
                              "at https://x/m is a Windows (PE) binary")
    assert "would fail when a Rollout or an AnalysisRun first used it" in message
