"""The plugin flags of ``python -m reconciler``: defaults, and bad values refused at start."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from reconciler.cli import options_from, parser
from reconciler.plugins.controller import RolloutPluginsController
from testkit.plugin_server import PluginServer


def test_defaults() -> None:
    args = parser().parse_args([])
    assert args.plugins_mode == "auto"
    assert args.plugins_ca_file is None
    assert args.plugins_max_download_bytes == 256 * 1024 * 1024
    assert args.plugins_download_timeout == 120.0


def test_a_ca_file_that_is_no_ca_stops_the_start(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    bogus = tmp_path / "ca.pem"
    bogus.write_text("not a certificate\n")
    with pytest.raises(SystemExit) as exit_info:
        parser().parse_args(["--plugins-ca-file", str(bogus)])
    assert exit_info.value.code == 2
    assert "--plugins-ca-file: cannot load CA file" in capsys.readouterr().err


def test_a_real_ca_file_is_accepted(tmp_path: Path) -> None:
    server = PluginServer(tmp_path)  # makes a CA without starting to serve
    args = parser().parse_args(["--plugins-ca-file", str(server.ca_file)])
    assert args.plugins_ca_file == str(server.ca_file)


@pytest.mark.parametrize("argv", [
    ["--plugins-mode", "observe"],
    ["--plugins-max-download-bytes", "0"],
    ["--plugins-download-timeout", "-1"],
    ["--plugins-download-timeout", "soon"],
])
def test_bad_values_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit):
        parser().parse_args(argv)


def test_the_controller_takes_the_flags() -> None:
    options = options_from(parser().parse_args(["--plugins-mode", "audit"])).plugins
    assert RolloutPluginsController(options=options).options.mode == "audit"
    with pytest.raises(ValueError, match="--plugins-mode"):
        RolloutPluginsController(options=dataclasses.replace(options, mode="observe"))
