"""Whole objects against the pinned CRDs' schemas (schemas.crdschema), the CRD files
shipped as package data, and ``validate --crds DIR``.

The cases are in corpus-crds/ (format in its README); tests/e2e/admission/test_crd_verdicts.py
submits the same objects to the real API server and checks it agrees.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.crdschema import (
    CrdSchemas,
    bundled_schemas,
    check_against_crds,
    schemas_from_documents,
)
from schemas.crdschema.load import BUNDLED_FILES, bundled_text
from schemas.findings import Finding
from schemas.kinds import (
    API_VERSION_ARGO,
    API_VERSION_KARGO,
    GROUP_ARGO,
    GROUP_KARGO,
    VERSION_KARGO,
)
from testkit.paths import REPO_ROOT

CORPUS = Path(__file__).parent / "corpus-crds"


def _cases() -> list[dict[str, Any]]:
    return [doc for path in sorted(CORPUS.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


CASES = _cases()


def test_the_corpus_covers_both_kinds_with_unique_names() -> None:
    names = [c["name"] for c in CASES]
    assert len(set(names)) == len(names)
    kinds = Counter(c["object"]["kind"] for c in CASES)
    assert kinds["Stage"] >= 25 and kinds["RolloutManager"] >= 8 and kinds["Widget"] >= 8
    assert sum(1 for c in CASES if not c["errors"]) >= 5  # accepted objects too


def corpus_schemas() -> CrdSchemas:
    """The bundled CRDs and the corpus's own test CRD (corpus-crds/crds/: the schema
    keywords the pinned CRDs do not use)."""
    extra = [(str(p), yaml.safe_load(p.read_text(encoding="utf-8")))
             for p in sorted((CORPUS / "crds").glob("*.yaml"))]
    return schemas_from_documents(extra).over(bundled_schemas())


SCHEMAS = corpus_schemas()  # compiled once for every case


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_corpus_case(case: dict[str, Any]) -> None:
    findings = check_against_crds(case["object"], schemas=SCHEMAS)
    shown = "\n".join(str(f) for f in findings)
    assert Counter(f.field for f in findings if not f.warning) == Counter(case["errors"]), shown
    assert Counter(f.field for f in findings if f.warning) == Counter(
        case.get("warnings") or []), shown
    for field, substring in (case.get("messages") or {}).items():
        messages = [f.message for f in findings if f.field == field]
        assert any(substring in m for m in messages), (field, substring, messages)


def test_other_kinds_and_shapeless_objects_get_nothing() -> None:
    schemas = bundled_schemas()
    assert check_against_crds({"kind": "ConfigMap", "apiVersion": "v1"}, schemas=schemas) == []
    assert check_against_crds({"kind": 5}, schemas=schemas) == []
    assert check_against_crds({"kind": "Stage"}, schemas=schemas) == []  # no group: no CRD


# ---------------------------------------------------------------- package data


@pytest.mark.parametrize("name", BUNDLED_FILES)
def test_bundled_crds_are_byte_equal_to_manifests_crds(name: str) -> None:
    """One source of truth: manifests/crds/; `make crds-data` copies it into the package."""
    shipped = resources.files("schemas.crdschema").joinpath("crds", name).read_bytes()
    assert shipped == (REPO_ROOT / "manifests" / "crds" / name).read_bytes(), (
        f"schemas/crdschema/crds/{name} differs from manifests/crds/{name}: run make crds-data")
    assert bundled_text(name).encode("utf-8") == shipped


def test_bundled_crds_are_declared_package_data() -> None:
    pyproject = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert '"schemas.crdschema" = ["crds/*.yaml"]' in pyproject


def test_the_bundled_schemas_are_read_once() -> None:
    assert bundled_schemas() is bundled_schemas()
    assert set(bundled_schemas().kinds) == {(GROUP_KARGO, "Stage"),
                                           (GROUP_ARGO, "RolloutManager")}


# ---------------------------------------------------------------- --crds DIR


def _served_crd(name: str) -> dict[str, Any]:
    """A bundled CRD as ``kubectl get crd -o yaml`` shows it (status and metadata added)."""
    crd: dict[str, Any] = yaml.safe_load(bundled_text(name))
    crd["metadata"].update({"uid": "1", "resourceVersion": "7", "generation": 1})
    crd["status"] = {"acceptedNames": crd["spec"]["names"],
                     "storedVersions": [v["name"] for v in crd["spec"]["versions"]]}
    return crd


def test_schemas_from_a_kubectl_list_and_unserved_versions() -> None:
    crd = _served_crd("kargo_stages.yaml")
    old = json.loads(json.dumps(crd["spec"]["versions"][0]))
    old.update(name="v1alpha0", served=False)
    crd["spec"]["versions"].append(old)
    found = schemas_from_documents([("x", {"apiVersion": "v1", "kind": "List", "items": [crd]})])
    assert set(found.kinds[(GROUP_KARGO, "Stage")]) == {VERSION_KARGO}
    assert schemas_from_documents([("x", None), ("y", {"kind": "Stage"})]).kinds == {}


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "schemas", "validate", *args], cwd=cwd,
                          capture_output=True, text=True, encoding="utf-8", check=False)


STAGE = """\
apiVersion: kargo.akuity.io/v1alpha1
kind: Stage
metadata: {name: prod}
spec:
  shard: east
  requestedFreight: [{origin: {kind: Warehouse, name: w}, sources: {direct: true}}]
"""


def test_crds_dir_wins_over_the_bundled_crds(tmp_path: Path) -> None:
    """A cluster whose Stage CRD has no spec.shard: the bundled one would accept it."""
    crd = _served_crd("kargo_stages.yaml")
    del crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
        "properties"]["shard"]
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "stages.yaml").write_text(yaml.safe_dump(crd))
    (tmp_path / "stage.yaml").write_text(STAGE)

    assert run("stage.yaml", cwd=tmp_path).returncode == 0
    result = run("--crds", "cluster", "stage.yaml", cwd=tmp_path)

    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines()[0] == (
        'stage.yaml: Stage/prod: spec.shard: unknown field "spec.shard"')


def test_crds_dir_without_a_crd_exits_two(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "x.yaml").write_text("kind: ConfigMap\n")
    (tmp_path / "stage.yaml").write_text(STAGE)

    result = run("--crds", "empty", "stage.yaml", cwd=tmp_path)

    assert result.returncode == 2
    assert "no CustomResourceDefinition with an openAPIV3Schema found" in result.stderr
    assert "Traceback" not in result.stderr


def test_validate_reports_the_old_kargo_shape(tmp_path: Path) -> None:
    """The issue's report: an old-shape Stage was 0 errors, and kubectl apply failed."""
    (tmp_path / "old.yaml").write_text(
        "apiVersion: kargo.akuity.io/v1alpha1\nkind: Stage\nmetadata: {name: prod}\nspec:\n"
        "  subscriptions: {warehouse: guestbook}\n"
        "  promotionMechanisms: {argoCDAppUpdates: [{appName: guestbook}]}\n")

    result = run("old.yaml", cwd=tmp_path)

    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "old.yaml: Stage/prod: spec.requestedFreight: Required value",
        'old.yaml: Stage/prod: spec.subscriptions: unknown field "spec.subscriptions": '
        "Kargo v1 replaced it with spec.requestedFreight (`rollgate migrate` rewrites it)",
        'old.yaml: Stage/prod: spec.promotionMechanisms: unknown field '
        '"spec.promotionMechanisms": Kargo v1 replaced it with '
        "spec.promotionTemplate.spec.steps (write the steps by hand: migrate cannot guess "
        "them)",
        "checked 1 Stage and 0 RolloutManagers in 1 file: 3 errors, 0 warnings",
    ]


def test_a_field_the_webhook_checks_is_reported_once(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(STAGE + "  verification:\n    analysisTemplates: "
                                     "[{name: a}]\n    args: [{name: port, value: 80}]\n")
    result = run("s.yaml", cwd=tmp_path)
    assert result.returncode == 1
    assert [line.split(": ")[2] for line in result.stdout.splitlines()[:-1]] == [
        "spec.verification.args[0].value"]


def test_the_built_wheel_ships_the_crds(tmp_path: Path) -> None:
    """Package data of the installed distribution, not only of this checkout: the wheel
    pip builds (as for any install) holds the bundled CRDs, equal to manifests/crds/."""
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path),
         str(REPO_ROOT)], capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr
    [wheel] = tmp_path.glob("rollgate-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        for name in BUNDLED_FILES:
            shipped = archive.read(f"schemas/crdschema/crds/{name}")
            assert shipped == (REPO_ROOT / "manifests" / "crds" / name).read_bytes()


# ---------------------------------------------------------------- hostile input

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(
    max_size=8)
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.sampled_from(["spec", "status", "metadata", "requestedFreight", "origin", "sources",
                     "kind", "name", "steps", "promotionTemplate", "plugins", "metric",
                     "controllerResources", "limits", "claims", "x"]) | st.text(max_size=5),
    inner, max_size=5), max_leaves=30)




@settings(max_examples=150, deadline=None)
@given(kind=st.sampled_from(["Stage", "RolloutManager", "Widget"]), body=_json)
def test_any_object_gives_findings_never_an_exception(kind: str, body: object) -> None:
    group = {"Stage": API_VERSION_KARGO, "RolloutManager": API_VERSION_ARGO,
             "Widget": "test.rollgate.dev/v1"}[kind]
    obj = {"apiVersion": group, "kind": kind, **(body if isinstance(body, dict) else
                                                 {"spec": body})}
    for finding in check_against_crds(obj, schemas=SCHEMAS):
        assert finding.message and isinstance(finding.path, tuple)


@settings(max_examples=100, deadline=None)
@given(schema=_json)
def test_any_crd_schema_compiles_and_checks(schema: object) -> None:
    """A --crds file may hold anything where the schema should be."""
    crd = {"kind": "CustomResourceDefinition", "spec": {
        "group": "g", "names": {"kind": "K"},
        "versions": [{"name": "v1", "schema": {"openAPIV3Schema": schema}}]}}
    found = schemas_from_documents([("x", crd)])
    findings = check_against_crds(
        {"apiVersion": "g/v1", "kind": "K", "spec": {"a": [1, {"b": None}]}}, schemas=found)
    # whatever the schema, an answer with paths, never an exception
    assert all(isinstance(f, Finding) and f.message for f in findings), findings


def test_a_cyclic_schema_and_a_deep_object_give_a_finding() -> None:
    crd = yaml.safe_load(
        "kind: CustomResourceDefinition\nspec:\n  group: g\n  names: {kind: K}\n"
        "  versions:\n  - name: v1\n    schema:\n      openAPIV3Schema: &s\n"
        "        type: object\n        properties: {spec: *s}\n")
    deep: dict[str, Any] = {}
    for _ in range(5000):
        deep = {"spec": deep}
    findings = check_against_crds({"apiVersion": "g/v1", "kind": "K", **deep},
                                  schemas=schemas_from_documents([("x", crd)]))
    assert [f.message for f in findings] == ["nested too deeply to check against the CRD"]
