"""Default patches: what they set (a RolloutManager's sha256 only; Stages get none), that
they are idempotent, and that they never raise."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import schemas
from schemas.pointer import apply_patch
from testkit import objects

STAGE_ANALYSIS = objects.stage(freight=False, spec={"analysis": {"templates": [
    {"templateName": "a"},
    {"templateName": "b", "clusterScope": True},
    {"templateName": "c", "clusterScope": None},
]}})
STAGE_VERIFICATION = objects.stage(freight=False, verification=objects.verification("a", ("b",)))
ROLLOUT_MANAGER = objects.rollout_manager(
    traffic=[{"name": "a/x", "location": "file:///x", "sha256": "  ABCDEF" + "0" * 58 + "\n"}],
    metric=[
        {"name": "a/y", "location": "file:///y", "sha256": "   "},
        {"name": "a/z", "location": "file:///z", "sha256": "0" * 64},
        {"name": "a/w", "location": "file:///w"},
    ])


@pytest.mark.parametrize("stage", [STAGE_ANALYSIS, STAGE_VERIFICATION],
                         ids=["analysis", "verification"])
def test_stages_get_no_patch(stage: dict[str, Any]) -> None:
    # docs/comparison.md "No defaulting of Stages": nothing upstream treats the same when absent is
    # added (no kind, no clusterScope), or every re-apply and Argo CD sync would show a
    # change.
    assert schemas.default_patch(stage) == []


def test_rollout_manager_sha256_trimmed_lowercased_or_removed() -> None:
    ops = schemas.rollout_manager_default_patch(ROLLOUT_MANAGER)
    assert ops == schemas.default_patch(ROLLOUT_MANAGER)
    patched = apply_patch(ROLLOUT_MANAGER, ops, strict=True)
    plugins = patched["spec"]["plugins"]
    assert plugins["trafficManagement"][0]["sha256"] == "abcdef" + "0" * 58
    assert "sha256" not in plugins["metric"][0]
    assert plugins["metric"][1]["sha256"] == "0" * 64
    assert "sha256" not in plugins["metric"][2]
    assert schemas.default_patch(patched) == []


def test_patch_touches_only_defaulted_fields() -> None:
    ops = schemas.default_patch(ROLLOUT_MANAGER)
    assert {op["path"] for op in ops} == {
        "/spec/plugins/trafficManagement/0/sha256",
        "/spec/plugins/metric/0/sha256",
    }


def test_input_is_not_modified() -> None:
    before = copy.deepcopy(ROLLOUT_MANAGER)
    schemas.default_patch(ROLLOUT_MANAGER)
    assert before == ROLLOUT_MANAGER


@pytest.mark.parametrize(
    "obj",
    [
        # Written by hand, not with testkit.objects: malformed on purpose, a bare kind
        # and a broken field, what defaulting must survive.
        None,
        [],
        "Stage",
        {"kind": "Stage"},
        {"kind": "Stage", "spec": []},
        {"kind": "Stage", "spec": {"analysis": {"templates": "x"}}},
        {"kind": "Stage", "spec": {"analysis": {"templates": [1, None, [], "x"]}}},
        {"kind": "Stage", "spec": {"verification": {"analysisTemplates": {"name": "a"}}}},
        {"kind": "RolloutManager", "spec": {"plugins": [1]}},
        {"kind": "RolloutManager", "spec": {"plugins": {"metric": [1, {"sha256": 5}]}}},
        {"kind": "ConfigMap", "spec": {"analysis": {"templates": [{"templateName": "a"}]}}},
    ],
)
def test_garbage_gives_no_patch_and_no_exception(obj: Any) -> None:
    assert schemas.default_patch(obj) == []


def test_pointer_escaping() -> None:
    from schemas import pointer

    assert pointer.to_pointer(("metadata", "labels", "a/b~c")) == "/metadata/labels/a~1b~0c"
    doc = {"metadata": {"labels": {"a/b~c": "x"}}}
    op = {"op": "replace", "path": "/metadata/labels/a~1b~0c", "value": "y"}
    patched = pointer.apply_patch(doc, [op])
    assert patched == {"metadata": {"labels": {"a/b~c": "y"}}}
    assert doc == {"metadata": {"labels": {"a/b~c": "x"}}}


DOC = {"spec": {"plugins": {"metric": [{"name": "a"}], "trafficManagement": []}}}


@pytest.mark.parametrize(("op", "expected"), [
    ({"op": "add", "path": "/spec/plugins/metric/-", "value": {"name": "b"}},
     [{"name": "a"}, {"name": "b"}]),
    ({"op": "add", "path": "/spec/plugins/metric/0", "value": {"name": "b"}},
     [{"name": "b"}, {"name": "a"}]),
    ({"op": "replace", "path": "/spec/plugins/metric/0/name", "value": "b"}, [{"name": "b"}]),
    ({"op": "add", "path": "/spec/plugins/metric/0/sha256", "value": "f"},
     [{"name": "a", "sha256": "f"}]),
    ({"op": "remove", "path": "/spec/plugins/metric/0"}, []),
    ({"op": "test", "path": "/spec/plugins/metric/0/name", "value": "a"}, [{"name": "a"}]),
])
def test_strict_patches_apply_as_the_api_server_applies_them(
        op: dict[str, Any], expected: list[Any]) -> None:
    from schemas import pointer

    patched = pointer.apply_patch(DOC, [op], strict=True)
    assert patched["spec"]["plugins"]["metric"] == expected
    assert DOC["spec"]["plugins"]["metric"] == [{"name": "a"}]  # the input is untouched


@pytest.mark.parametrize(("op", "expected"), [
    ({"op": "move", "from": "/spec/plugins/metric", "path": "/spec/metric"},
     {"spec": {"plugins": {"trafficManagement": []}, "metric": [{"name": "a"}]}}),
    ({"op": "copy", "from": "/spec/plugins/metric/0", "path": "/spec/plugins/trafficManagement/-"},
     {"spec": {"plugins": {"metric": [{"name": "a"}], "trafficManagement": [{"name": "a"}]}}}),
    ({"op": "move", "from": "/spec/plugins/metric/0", "path": "/spec/plugins/metric/0"}, DOC),
])
def test_strict_move_and_copy_apply_as_the_api_server_applies_them(
        op: dict[str, Any], expected: dict[str, Any]) -> None:
    """RFC 6902's move and copy, as the API server applies a client's JSON patch: a
    test that applies one with the product's applier sees what the server stores."""
    from schemas import pointer

    assert pointer.apply_patch(DOC, [op], strict=True) == expected
    assert DOC["spec"]["plugins"]["metric"] == [{"name": "a"}]  # the input is untouched


@pytest.mark.parametrize("op", [
    {"op": "replace", "path": "/spec/plugins/metric/0/sha256", "value": "f"},  # no member
    {"op": "replace", "path": "/spec/plugins/metric/1", "value": {}},  # past the end
    {"op": "add", "path": "/spec/plugins/metric/2", "value": {}},  # past the end
    {"op": "add", "path": "/spec/plugins/metric/-1", "value": {}},  # not an index
    {"op": "remove", "path": "/spec/plugins/trafficManagement/0"},
    {"op": "add", "path": "/spec/missing/metric", "value": []},  # no parent
    {"op": "test", "path": "/spec/plugins/metric/0/name", "value": "b"},  # test fails
    {"op": "add", "path": "", "value": {}},  # the whole document
    {"op": "move", "from": "/spec/plugins", "path": "/spec/plugins/metric/0"},  # into itself
    {"op": "move", "from": "/spec/missing", "path": "/spec/metric"},
    {"op": "copy", "path": "/spec/metric"},  # no from
])
def test_strict_refuses_an_op_that_does_not_apply_and_lenient_skips_it(
        op: dict[str, Any]) -> None:
    from schemas import pointer

    with pytest.raises(pointer.PatchError, match="does not apply"):
        pointer.apply_patch(DOC, [op], strict=True)
    assert pointer.apply_patch(DOC, [op]) == DOC


# ---------------------------------------------------------------- the warnings


def test_each_normalised_digest_gets_one_warning_naming_the_stored_value():
    """The stored value differs from the manifest, so the warning says what to write
    there (docs/comparison.md "GitOps: re-applying a manifest"); one per changed value, none for a
    digest already lowercase hex."""
    digest = "ab" * 32
    rm = objects.rollout_manager(plugins={
        "metric": [{"name": "a", "location": "https://x/a", "sha256": f" {digest.upper()} "},
                   {"name": "b", "location": "https://x/b", "sha256": digest}],
        "trafficManagement": [{"name": "c", "location": "https://x/c", "sha256": "  "}]})

    assert schemas.default_warnings(rm) == [
        "spec.plugins.trafficManagement[0].sha256: blank, so it is removed; leave it out of "
        "the manifest, or every apply and sync sees a change",
        f'spec.plugins.metric[0].sha256: stored as "{digest}" (trimmed and lower-cased, as '
        "Argo Rollouts compares it); write it so in the manifest, or every apply and sync "
        "sees a change",
    ]
    # As many warnings as ops, in the same order.
    assert [op["path"] for op in schemas.default_patch(rm)] == [
        "/spec/plugins/trafficManagement/0/sha256", "/spec/plugins/metric/0/sha256"]
    patched = apply_patch(rm, schemas.default_patch(rm), strict=True)
    assert schemas.default_warnings(patched) == []


# Malformed on purpose (a bare kind), so written by hand rather than with testkit.objects.
@pytest.mark.parametrize("obj", [None, "x", {"kind": "Stage"}, {"kind": "RolloutManager"},
                                 {"kind": "RolloutManager", "spec": {"plugins": {"metric": 3}}}])
def test_no_warning_for_anything_else(obj: Any):
    assert schemas.default_warnings(obj) == []
