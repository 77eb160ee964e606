"""The ``rollgate`` command only dispatches (docs/commands.md "The rollgate command"): each command
is the existing program's ``main``, with usage lines that name ``rollgate`` (or
``kubectl rollgate``), and the ``python -m`` forms still work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rollgate.__main__ import COMMANDS, main, program_name, usage
from testkit.paths import REPO_ROOT

ROLLGATE = Path(sys.executable).with_name("rollgate")
KUBECTL_PLUGIN = Path(sys.executable).with_name("kubectl-rollgate")


def test_the_console_scripts_are_installed():
    assert ROLLGATE.is_file() and KUBECTL_PLUGIN.is_file()


def test_usage_lists_every_command(capsys):
    assert main([]) == 2
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(usage("rollgate"))
    commands = ["validate", "migrate", "certs", "webhook", "reconciler", "explain", "selftest"]
    for command in commands:
        assert f"  {command}" in out
    assert sorted(COMMANDS) == sorted(commands)


def test_a_misspelt_command_gets_a_did_you_mean(capsys):
    assert main(["valdate", "x"]) == 2
    assert "unknown command 'valdate'; did you mean validate?" in capsys.readouterr().err


@pytest.mark.parametrize(("args", "prog"), [
    (["validate", "--help"], "usage: rollgate validate"),
    (["migrate", "--help"], "usage: rollgate migrate"),
    (["certs", "--help"], "usage: rollgate certs"),
    (["webhook", "--help"], "usage: rollgate webhook"),
    (["reconciler", "--help"], "usage: rollgate reconciler"),
    (["explain", "--help"], "usage: rollgate explain"),
    (["selftest", "--help"], "usage: rollgate selftest"),
])
def test_each_command_is_its_programs_main_named_rollgate(args, prog, capsys):
    with pytest.raises(SystemExit) as done:
        main(args)
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(prog)


def test_kubectl_runs_it_as_a_plugin():
    assert program_name("/x/bin/kubectl-rollgate") == "kubectl rollgate"
    assert program_name("/x/bin/rollgate") == "rollgate"
    result = subprocess.run([str(KUBECTL_PLUGIN), "explain", "--help"], capture_output=True,
                            text=True, check=False)
    assert result.stdout.startswith("usage: kubectl rollgate explain"), result.stdout


@pytest.mark.parametrize(("argv", "code"), [
    ([str(ROLLGATE), "validate", "examples/"], 0),
    ([str(ROLLGATE), "validate", "examples/invalid/stage.yaml"], 1),
    ([str(ROLLGATE), "validate", "no-such-file.yaml"], 2),
    ([sys.executable, "-m", "schemas", "validate", "examples/invalid/stage.yaml"], 1),
])
def test_exit_codes_are_the_programs(argv, code):
    result = subprocess.run(argv, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == code, result.stdout + result.stderr


def test_the_python_m_forms_keep_their_names():
    for module in ("schemas", "certs", "webhook", "reconciler"):
        result = subprocess.run([sys.executable, "-m", module, "--help"], cwd=REPO_ROOT,
                                capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(f"usage: python -m {module}"), result.stdout


def test_validate_does_not_load_the_kubernetes_client():
    """A user's CI runs ``rollgate validate`` only; the dispatcher imports nothing else."""
    code = ("import sys; from rollgate.__main__ import main; rc = main(['validate', "
            "'examples/stage-test.yaml']); assert 'kubernetes' not in sys.modules; "
            "assert 'flask' not in sys.modules; sys.exit(rc)")
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                            text=True, check=False)
    assert result.returncode == 0, result.stderr
