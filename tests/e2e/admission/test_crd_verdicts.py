"""``python -m schemas validate`` and the real API server agree on every object of the
CRD-schema corpus (tests/unit/schemas/corpus-crds/): the server refuses an object
exactly when validate reports an error for it, and every field the server names is one
validate names.

Server-side dry run (``dry_run=All``, strict field validation, as ``kubectl apply`` asks)
on planes without rollgate's webhook, so only the CRD schema decides; once with the
upstream trees' CRDs and once with manifests/crds, which must agree with each other too.

Resource names such as ``stages.kargo.akuity.io`` are spelled as users type them to
kubectl, not built from schemas.kinds. The manifests are YAML, as users write them.
"""

from __future__ import annotations

import copy
import json
import random
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.kits.plane import fresh_namespace, running_plane
from harness.plane import ControlPlane
from schemas.crdschema import bundled_schemas, check_against_crds, schemas_from_documents
from schemas.kinds import GROUP_ARGO, GROUP_KARGO
from testkit.paths import REPO_ROOT

CORPUS = REPO_ROOT / "tests" / "unit" / "schemas" / "corpus-crds"
CASES = [doc for path in sorted(CORPUS.glob("*.yaml"))
         for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]
# The corpus's test CRD (the schema keywords the pinned CRDs do not use), over the bundled.
SCHEMAS = schemas_from_documents(
    (str(p), yaml.safe_load(p.read_text(encoding="utf-8")))
    for p in sorted((CORPUS / "crds").glob("*.yaml"))).over(bundled_schemas())
_CAUSE = re.compile(r'^\* ([^:\n]+): |is invalid: ([^:*\s][^:\n]*): ', re.MULTILINE)
_UNKNOWN = re.compile(r'unknown field "([^"]+)"')
_UNDECODABLE = re.compile(r'cannot be handled as a \w+: ([^\s:]+): Invalid value')


@pytest.fixture(scope="module", params=["upstream-crds", "manifests-crds"])
def plane(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    with running_plane(tmp_path_factory.mktemp(request.param),
                       tree_crds=request.param == "upstream-crds") as started:
        started.install_crds([yaml.safe_load(p.read_text(encoding="utf-8"))
                              for p in sorted((CORPUS / "crds").glob("*.yaml"))])
        yield started


@pytest.fixture(scope="module")
def namespace(plane: ControlPlane) -> Iterator[str]:
    with fresh_namespace(plane) as name:
        yield name


def server_verdict(plane: ControlPlane, namespace: str,
                   obj: dict[str, Any]) -> tuple[bool, set[str], str]:
    """Whether a server-side dry run of ``obj`` is refused, the field paths the API
    server names, and what it said."""
    result = plane.kubectl("create", "--dry-run=server", "--validate=strict", "-n", namespace,
                           "-f", "-", input=json.dumps(obj), check=False)
    said = result.stderr
    paths = set(_UNKNOWN.findall(said)) | set(_UNDECODABLE.findall(said))
    paths |= {a or b for a, b in _CAUSE.findall(said)} - {"<nil>"}
    return result.returncode != 0, paths, said


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_validate_and_the_api_server_agree(plane: ControlPlane, namespace: str,
                                           case: dict[str, Any]) -> None:
    obj = case["object"]
    refused, paths, said = server_verdict(plane, namespace, obj)
    ours = {f.field for f in check_against_crds(obj, schemas=SCHEMAS) if not f.warning}

    assert refused == bool(ours), (said, ours)
    assert paths <= ours, (said, ours)
    if refused and case["name"] != "stage-version-not-served":
        assert paths, said  # a refusal names its fields, so the comparison means something


OLD_SHAPE = """\
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata: {name: test}
spec:
  subscriptions: {warehouse: guestbook}
  verification:
    analysisTemplates: [{name: smoke}]
---
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata: {name: prod}
spec:
  subscriptions:
    upstreamStages: [{name: test}]
  analysis:
    templates: [{templateName: success-rate, clusterScope: true}]
    args: [{name: service, value: guestbook}]
"""


def _schemas_cli(*args: str, cwd: Path, stdin: str | None = None
                 ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "schemas", *args], cwd=cwd, input=stdin,
                          capture_output=True, text=True, encoding="utf-8", check=False)


EXAMPLE = REPO_ROOT / "examples" / "migrate" / "stages-kargo-v0.yaml"


@pytest.mark.parametrize("text", [OLD_SHAPE, EXAMPLE.read_text(encoding="utf-8")],
                         ids=["with-spec-analysis", "the-example"])
def test_what_migrate_writes_is_accepted_by_the_api_server(
        plane: ControlPlane, namespace: str, tmp_path: Path, text: str) -> None:
    """The issue's report, end to end: the old shape is refused, migrate rewrites it,
    validate says 0 errors, and a server-side dry run of the result is accepted."""
    (tmp_path / "old.yaml").write_text(text)
    before = plane.kubectl("create", "--dry-run=server", "-n", namespace, "-f",
                           str(tmp_path / "old.yaml"),
                           check=False)
    assert before.returncode != 0 and 'unknown field "spec.subscriptions"' in before.stderr

    migrated = _schemas_cli("migrate", "--write", "old.yaml", cwd=tmp_path)
    assert migrated.returncode == 0, migrated.stderr
    checked = _schemas_cli("validate", "old.yaml", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.endswith(": 0 errors, 0 warnings\n")

    after = plane.kubectl("create", "--dry-run=server", "-n", namespace, "-f",
                          str(tmp_path / "old.yaml"), check=False)
    assert after.returncode == 0, after.stderr
    assert after.stdout.count("(server dry run)") == 2


def test_a_clusters_served_crds_give_the_same_verdicts(plane: ControlPlane,
                                                       tmp_path: Path) -> None:
    """``validate --crds DIR`` with what README says to save (``kubectl get crd ... -o
    yaml``): the served CRDs judge every corpus object as the bundled ones do."""
    served = plane.kubectl("get", "crd", "stages.kargo.akuity.io",
                           "rolloutmanagers.argoproj.io", "-o", "yaml").stdout
    (tmp_path / "crds").mkdir()
    (tmp_path / "crds" / "cluster.yaml").write_text(served)
    cluster = schemas_from_documents([("cluster.yaml", yaml.safe_load(served))])
    assert set(cluster.kinds) == {(GROUP_KARGO, "Stage"), (GROUP_ARGO, "RolloutManager")}
    pinned = [c for c in CASES if c["object"]["kind"] in ("Stage", "RolloutManager")]
    for case in pinned:
        expected = [f.field for f in check_against_crds(case["object"], schemas=SCHEMAS)]
        assert [f.field for f in check_against_crds(case["object"], schemas=cluster)] == \
            expected, case["name"]

    (tmp_path / "objects.yaml").write_text(yaml.safe_dump_all([c["object"] for c in pinned]))
    bundled = _schemas_cli("validate", "-o", "json", "objects.yaml", cwd=tmp_path)
    with_crds = _schemas_cli("validate", "-o", "json", "--crds", "crds", "objects.yaml",
                             cwd=tmp_path)
    assert with_crds.returncode == bundled.returncode == 1, with_crds.stderr
    assert json.loads(with_crds.stdout) == json.loads(bundled.stdout)


# ---------------------------------------------------------------- random mutations

_VALUES: list[Any] = [
    None, 0, 1, -1, 2.5, "", "x", "1h", True, [], [None], {}, {"a": 1}, {"name": "x"},
    [{"name": "x"}], [1], ["a", "a"], "Warehouse", "IfNotPresent", "Always", "OneOf", "All",
    "ClusterPromotionTask", "a" * 300, "Bad_Name", "1.5Gi"]


def _paths(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    children = value.items() if isinstance(value, dict) else \
        enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from _paths(child, (*path, key))


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


def mutated(rng: random.Random, base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with one random change under ``spec``: a key misspelt or removed, a value
    replaced by one of another type or shape, or an unknown key added."""
    obj = copy.deepcopy(base)
    path = rng.choice([p for p in _paths(obj) if len(p) >= 2 and p[0] == "spec"])
    parent, last, roll = _at(obj, path[:-1]), path[-1], rng.random()
    if roll < 0.15 and isinstance(last, str) and len(last) > 2:
        parent[last[:-1]] = parent.pop(last)
    elif roll < 0.3 and isinstance(parent, dict):
        del parent[last]
    elif roll > 0.85 and isinstance(parent[last], dict):
        parent[last][f"zz{rng.randint(0, 9)}"] = 1
    else:
        parent[last] = copy.deepcopy(rng.choice(_VALUES))
    return obj


_BASES = [c["object"] for c in CASES if c["name"] in ("stage-every-spec-field",
                                                      "rm-every-spec-field")]


@pytest.mark.parametrize("seed", range(4))
def test_random_mutations_get_the_same_verdict(plane: ControlPlane,
                                               namespace: str, seed: int) -> None:
    """Beyond the corpus: 30 seeded random mutations of the two full objects per seed
    (one found that a mapping where a string belongs is reported by the API server as
    unknown fields inside it, not as a type error)."""
    rng = random.Random(seed)
    for index in range(30):
        obj = mutated(rng, _BASES[index % 2])
        refused, paths, said = server_verdict(plane, namespace, obj)
        ours = {f.field for f in check_against_crds(obj, schemas=SCHEMAS) if not f.warning}
        assert refused == bool(ours), (json.dumps(obj), said, ours)
        assert paths <= ours, (json.dumps(obj), said, ours)
