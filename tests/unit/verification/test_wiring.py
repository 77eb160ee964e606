"""How the feature is wired into the process: the mode defaults (one place, observe) and
its metrics, served by the runtime without the runtime knowing them."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from reconciler import cli, controllers
from reconciler.runtime.health import Metrics
from reconciler.runtime.manager import ControllerRunner
from reconciler.verification import options
from reconciler.verification.engine import StageVerificationController
from reconciler.verification.observer import VerificationObserver


def test_the_mode_defaults_to_observe_for_the_command_line_and_the_loader() -> None:
    assert options.DEFAULT_MODE == "observe"
    assert cli.parser().parse_args([]).stage_verification == options.DEFAULT_MODE
    # Options built without the key (a test, a script) get observe too, never engine.
    assert isinstance(controllers.load("stage-verification", {}), VerificationObserver)
    assert isinstance(controllers.load("stage-verification"), VerificationObserver)
    assert isinstance(controllers.load("stage-verification", {"stage_verification": "engine"}),
                      StageVerificationController)
    assert controllers.load("stage-verification", {"stage_verification": "off"}) is None


def test_an_unknown_mode_is_refused_not_taken_for_engine() -> None:
    with pytest.raises(controllers.UnknownController, match="bogus"):
        controllers.load("stage-verification", {"stage_verification": "bogus"})


@pytest.mark.parametrize("controller", [StageVerificationController, VerificationObserver])
def test_the_features_metrics_are_served_by_the_runtime(controller: type) -> None:
    metrics = Metrics()
    text = generate_latest(metrics.registry).decode()
    assert "rollgate_verifications_finished" not in text  # the runtime has none of its own
    ControllerRunner(controller({}), metrics=metrics, workers=1)
    text = generate_latest(metrics.registry).decode()
    for name in ("rollgate_verifications_finished", "rollgate_verification_duration_seconds",
                 "rollgate_promotion_to_verified_seconds", "rollgate_verifier_conflicts",
                 "rollgate_verification_anomalies"):
        assert f"# TYPE {name}" in text, name
    assert "rollgate_reconciler_reconcile" in text


def test_registering_the_same_collectors_twice_serves_them_once() -> None:
    metrics = Metrics()
    observer = VerificationObserver({})
    metrics.register(observer.collectors)
    metrics.register(observer.collectors)
    text = generate_latest(metrics.registry).decode()
    assert text.count("# TYPE rollgate_verification_anomalies_total counter") == 1
