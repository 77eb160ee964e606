"""How the feature is wired into the process: the mode defaults (one place, observe) and
its metrics, served by the runtime without the runtime knowing them."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from reconciler import cli, controllers
from reconciler.options import ReconcilerOptions
from reconciler.runtime.health import Metrics
from reconciler.runtime.manager import ControllerRunner
from reconciler.verification import options
from reconciler.verification.engine import StageVerificationController
from reconciler.verification.observer import VerificationObserver
from reconciler.verification.options import VerificationOptions


def mode(name: str) -> ReconcilerOptions:
    """The options of ``--stage-verification name``."""
    return ReconcilerOptions(verification=VerificationOptions(mode=name))


def test_the_mode_defaults_to_observe_for_the_command_line_and_the_loader() -> None:
    assert options.DEFAULT_MODE == "observe"
    assert cli.parser().parse_args([]).stage_verification == options.DEFAULT_MODE
    # Options built without the mode (a test, a script) get observe too, never engine.
    assert isinstance(controllers.load("stage-verification", options=ReconcilerOptions()),
                      VerificationObserver)
    assert isinstance(controllers.load("stage-verification"), VerificationObserver)
    assert isinstance(controllers.load("stage-verification", options=mode("engine")),
                      StageVerificationController)
    assert controllers.load("stage-verification", options=mode("off")) is None


def test_an_unknown_mode_is_refused_not_taken_for_engine() -> None:
    with pytest.raises(controllers.UnknownController, match="bogus"):
        controllers.load("stage-verification", options=mode("bogus"))


@pytest.mark.parametrize("controller", [StageVerificationController, VerificationObserver])
def test_the_features_metrics_are_served_by_the_runtime(controller: type) -> None:
    metrics = Metrics()
    text = generate_latest(metrics.registry).decode()
    assert "rollgate_verifications_finished" not in text  # the runtime has none of its own
    ControllerRunner(controller(options=VerificationOptions()), metrics=metrics, workers=1)
    text = generate_latest(metrics.registry).decode()
    for name in ("rollgate_verifications_finished", "rollgate_verification_duration_seconds",
                 "rollgate_promotion_to_verified_seconds", "rollgate_verifier_conflicts",
                 "rollgate_verification_anomalies"):
        assert f"# TYPE {name}" in text, name
    assert "rollgate_reconciler_reconcile" in text


def test_registering_the_same_collectors_twice_serves_them_once() -> None:
    metrics = Metrics()
    observer = VerificationObserver(options=VerificationOptions())
    metrics.register(observer.collectors)
    metrics.register(observer.collectors)
    text = generate_latest(metrics.registry).decode()
    assert text.count("# TYPE rollgate_verification_anomalies_total counter") == 1


def test_observe_flags_and_their_defaults() -> None:
    args = cli.parser().parse_args([])
    assert args.observe_grace_seconds == options.OBSERVE_GRACE_SECONDS == 60
    assert args.observe_lag_seconds == options.OBSERVE_LAG_SECONDS == 10
    assert args.refresh_lagging is False
    args = cli.parser().parse_args(["--observe-lag-seconds", "2.5", "--refresh-lagging"])
    assert (args.observe_lag_seconds, args.refresh_lagging) == (2.5, True)
    controller = controllers.load("stage-verification", options=cli.options_from(args))
    assert isinstance(controller, VerificationObserver)
    assert (controller.lag, controller.refresh) == (2.5, True)


@pytest.mark.parametrize("value", ["-1", "soon", "nan"])
def test_a_lag_that_is_not_a_number_of_seconds_is_refused(
        value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.parser().parse_args(["--observe-lag-seconds", value])
    assert exc.value.code == 2
    assert "--observe-lag-seconds" in capsys.readouterr().err


def test_a_freight_maps_to_the_stages_whose_history_holds_it_in_engine_mode() -> None:
    """Issue 19, 1a: a Freight that reaches the cache after its run succeeded (its
    informer re-listing) brings back the Stage that holds it, not only those it is
    already verified in."""
    from kubekit.kinds import FREIGHT, STAGE
    from reconciler.runtime.types import Key
    from reconciler.verification.engine import StageVerificationController
    from reconciler.verification.watches import stages_of_freight
    from testkit.fakeapi import FakeApi

    api = FakeApi()
    holder = {"metadata": {"name": "prod", "namespace": "shop"}, "status": {"freightHistory": [
        {"id": "c2", "items": {"Warehouse/w": {"name": "f2"}}},
        {"id": "c1", "items": {"Warehouse/w": {"name": "f1"}}}]}}
    other = {"metadata": {"name": "uat", "namespace": "shop"}, "status": {"freightHistory": [
        {"id": "c3", "items": {"Warehouse/w": {"name": "f3"}}}]}}
    api.put(STAGE, holder)
    api.put(STAGE, other)
    cache = api.cache(STAGE, FREIGHT, indexes=StageVerificationController.indexes)
    f1 = {"metadata": {"name": "f1", "namespace": "shop"}}
    assert stages_of_freight(None, f1, cache) == [Key("shop", "prod")]
    verified = {"metadata": {"name": "f3", "namespace": "shop"},
                "status": {"verifiedIn": {"qa": {}}}}
    assert stages_of_freight(None, verified, cache) == [Key("shop", "qa"), Key("shop", "uat")]
    watched = {w.resource: w.mapper for w in StageVerificationController.watches}
    assert watched[FREIGHT] is stages_of_freight
