"""Which Stages observe mode looks at with --shard/--default-shard: as Kargo v1.11.2's
SHARD_NAME/IS_DEFAULT_CONTROLLER select them (pkg/controller/labels.go,
pkg/controller/predicates.go), by label selector on the Stage informer where one
requirement says it, else filtered."""

from __future__ import annotations

from typing import Any

import pytest

from kubekit import logs
from kubekit.kinds import STAGE
from reconciler import cli, controllers
from reconciler.options import ReconcilerOptions
from reconciler.runtime.manager import Manager
from reconciler.runtime.options import RuntimeOptions
from reconciler.verification.observer import VerificationObserver
from reconciler.verification.options import VerificationOptions
from reconciler.verification.shards import LABEL_SHARD, Shard
from testkit import objects
from testkit.fakeapi import context
from tests.unit.verification.test_observer import events_of, make_api, reconcile

NS = "shop"


def stage(shard: str | None) -> dict[str, Any]:
    labels = {} if shard is None else {LABEL_SHARD: shard}
    return objects.stage("s", namespace=NS, labels=labels)


def kargo_is_responsible(obj_shard: str, shard_name: str, is_default: bool) -> bool:
    """Kargo's ResponsibleFor.IsResponsible, transcribed."""
    return obj_shard == shard_name or (obj_shard == "" and is_default)


def kargo_requirement(shard_name: str, is_default: bool) -> str | None:
    """Kargo's GetShardRequirement, as a label selector string (None: no requirement)."""
    if shard_name:
        return None if is_default else f"{LABEL_SHARD}={shard_name}"
    return f"!{LABEL_SHARD}"


@pytest.mark.parametrize(("name", "default"), [("a", False), ("a", True), (None, True)])
def test_selection_is_kargos_for_every_flag_combination(name: str | None, default: bool) -> None:
    shard = Shard(name, default)
    assert shard.label_selector() == kargo_requirement(name or "", default)
    for label in (None, "", "a", "b"):
        assert shard.responsible(stage(label)) == kargo_is_responsible(
            label or "", name or "", default), label


def test_no_flag_is_every_stage_unlike_kargos_empty_shard_name() -> None:
    shard = Shard()
    assert shard.everything and shard.label_selector() is None
    assert all(shard.responsible(stage(label)) for label in (None, "", "a", "b"))


def test_flags_to_selection() -> None:
    assert Shard.from_options(VerificationOptions()) == Shard()
    assert Shard.from_options(VerificationOptions(shard="a")) == Shard("a", False)
    assert Shard.from_options(VerificationOptions(shard="a", default_shard=True)) == Shard(
        "a", True)
    assert Shard.from_options(VerificationOptions(shard=None, default_shard=True)) == Shard(
        None, True)
    assert Shard("a", True).describe() == (
        f"Stages labelled {LABEL_SHARD}=a and Stages without {LABEL_SHARD}")


@pytest.mark.parametrize(("options", "selector"), [
    ({"shard": "a"}, f"{LABEL_SHARD}=a"),
    ({"default_shard": True}, f"!{LABEL_SHARD}"),
    ({"shard": "a", "default_shard": True}, None),
    ({}, None),
])
def test_the_stage_informer_is_narrowed_by_label_selector(options: dict[str, Any],
                                                          selector: str | None) -> None:
    flags = ReconcilerOptions(runtime=RuntimeOptions(leader_elect=False),
                              verification=VerificationOptions(mode="observe", **options))
    controller = controllers.load("stage-verification", options=flags)
    assert isinstance(controller, VerificationObserver)
    manager = Manager(api=None, controllers=[controller], options=flags.runtime)
    (stages,) = [i.resource for i in manager.informers if i.resource.plural == "stages"]
    assert stages.label_selector == selector
    assert controller.primary == stages


@pytest.mark.parametrize(("options", "observed"), [
    ({"shard": "a"}, {"a"}),
    ({"default_shard": True}, {None}),
    ({"shard": "a", "default_shard": True}, {"a", None}),
    ({}, {"a", "b", None}),
])
def test_only_the_selected_stages_are_observed(options: dict[str, Any],
                                               observed: set[str | None]) -> None:
    for label in ("a", "b", None):
        api = make_api(labels={LABEL_SHARD: label} if label is not None else None)
        controller = VerificationObserver(
            options=VerificationOptions(observe_lag_seconds=10, **options))
        # The cache the runtime builds for a label-selected Stage informer: only the
        # Stages the API server returns for the selector (the fake applies it).
        ctx = context(api, controller=controller)
        if controller.stages != STAGE:
            cached = [o["metadata"]["name"] for o in ctx.cache.list(controller.stages)]
            responsible = controller.shard.responsible(api.get(STAGE, NS, "prod") or {})
            assert cached == (["prod"] if responsible else []), (options, label)
        reconcile(controller, ctx)
        reported = events_of(ctx).reasons() == ["VerificationNotRecorded"]
        assert reported == (label in observed), (options, label)


def test_shard_flags() -> None:
    args = cli.parser().parse_args([])
    assert (args.shard, args.default_shard) == (None, False)
    args = cli.parser().parse_args(["--shard", "eu-1", "--default-shard"])
    assert (args.shard, args.default_shard) == ("eu-1", True)


@pytest.mark.parametrize("value", ["", "two words", "-a", "x" * 64])
def test_a_shard_name_that_is_no_label_value_is_refused(
        value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.parser().parse_args(["--shard", value])
    assert exc.value.code == 2 and "--shard" in capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--shard", "a"], ["--default-shard"]])
def test_engine_mode_cannot_be_sharded(flags: list[str], monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "load_api_client", lambda *a, **k: pytest.fail("started anyway"))
    monkeypatch.setattr(logs, "setup", lambda level: None)  # cli.logs
    with pytest.raises(SystemExit) as exc:
        cli.main(["--stage-verification", "engine", *flags])
    assert exc.value.code == 2 and "engine" in capsys.readouterr().err
