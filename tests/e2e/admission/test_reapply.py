"""GitOps-clean re-apply (docs/comparison.md "GitOps: re-applying a manifest"): every example the
README tells users to ``kubectl apply`` prints ``unchanged`` when it is applied again
unchanged, against the real kube-apiserver with rollgate's webhooks registered.

The one example the webhook normalises (``examples/defaulting/``: an upper-case sha256
with blanks) cannot: kubectl sends the written value again on every apply and the
mutating webhook changes it again. The webhook says so once, with the value it stored;
written so in the manifest, as the README tells users, it re-applies ``unchanged``
too. The example's header comment says which warnings ``kubectl apply`` prints, and
this test holds it to that.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from testkit.paths import REPO_ROOT

EXAMPLES = REPO_ROOT / "examples"
# Applied by `make dev` and the README; promotion.yaml is `kubectl create`d (each a
# new Promotion), invalid/ and migrate/ are refused by design.
APPLIED = ["analysistemplate.yaml", "host/argo-rollouts.yaml", "kargo/warehouse.yaml",
           "freight.yaml", "rolloutmanager.yaml", "stage-test.yaml", "stage-uat.yaml"]
DEFAULTING = EXAMPLES / "defaulting" / "rolloutmanager.yaml"
STORED = re.compile(r'Warning: (spec\.plugins\.\S+\.sha256): stored as "([0-9a-f]{64})"')

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


def apply(kubectl: Kubectl, namespace: str, path: Path) -> subprocess.CompletedProcess[str]:
    result = kubectl("apply", "-n", namespace, "-f", str(path), check=False)
    assert result.returncode == 0, result.stderr
    return result


def warnings_of(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.startswith("Warning:")]


def promised_warnings(path: Path) -> list[str]:
    """The warnings the example's header comment promises, one ``#   Warning: <start>``
    line each."""
    return re.findall(r"^#\s+Warning: (.+)$", path.read_text(), re.MULTILINE)


def assert_all_unchanged(result: subprocess.CompletedProcess[str]) -> None:
    lines = result.stdout.splitlines()
    assert lines and all(line.endswith(" unchanged") for line in lines), result.stdout


@pytest.mark.parametrize("relative", APPLIED)
def test_an_example_applied_again_is_unchanged(kubectl: Kubectl, namespace: str,
                                                relative: str):
    path = EXAMPLES / relative

    first = apply(kubectl, namespace, path)
    again = apply(kubectl, namespace, path)

    assert " created" in first.stdout, first.stdout
    assert_all_unchanged(again)
    assert not warnings_of(again), again.stderr


def test_the_whole_examples_directory_applied_again_is_unchanged(kubectl: Kubectl,
                                                                  namespace: str):
    apply(kubectl, namespace, EXAMPLES / "kargo" / "warehouse.yaml")
    apply(kubectl, namespace, EXAMPLES)

    assert_all_unchanged(apply(kubectl, namespace, EXAMPLES))


def test_the_normalised_example_warns_once_and_written_so_is_unchanged(
    kubectl: Kubectl, namespace: str, tmp_path: Path
):
    first = apply(kubectl, namespace, DEFAULTING)

    warnings = warnings_of(first)
    promised = promised_warnings(DEFAULTING)
    # Exactly what the example's comment says kubectl prints, each once.
    assert len(warnings) == len(promised), first.stderr
    for line, start in zip(warnings, promised, strict=True):
        assert line.startswith(f"Warning: {start}"), (line, start)
    stored = STORED.findall(first.stderr)
    assert [field for field, _ in stored] == ["spec.plugins.metric[0].sha256"], first.stderr

    # As written, the manifest keeps sending the value the webhook normalises.
    as_written = apply(kubectl, namespace, DEFAULTING)
    assert as_written.stdout.strip().endswith(" configured"), as_written.stdout

    # Written so in the manifest, as the warning says: unchanged from then on.
    digest = stored[0][1]
    text = re.sub(r'sha256: "\s*[0-9A-Fa-f]{64}\s*"', f"sha256: {digest}",
                  DEFAULTING.read_text())
    assert digest in text
    normalised = tmp_path / "rolloutmanager.yaml"
    normalised.write_text(text)
    switched = apply(kubectl, namespace, normalised)  # the last-applied annotation moves
    assert not STORED.findall(switched.stderr), switched.stderr
    assert_all_unchanged(apply(kubectl, namespace, normalised))
    assert_all_unchanged(apply(kubectl, namespace, normalised))
