"""Findings kept per Stage stanza (``schemas.verdicts``): a kept verdict is given only
when the checks would give the same one now.

Each test asks ``check_stage`` through one ``Verdicts`` and compares the findings (what
the user sees) with what the checks say now; where it matters it counts the template
look-ups (the checks ask for every referenced template; a kept verdict re-asks each
once). The webhook-level guard, a template changed between two applies, is in
tests/http/test_admission.py.
"""

from __future__ import annotations

from typing import Any

import pytest

import schemas
from schemas.lookups import TemplateLookup
from schemas.stage import checked_part
from testkit import objects
from webhook.config import MustWait

NS = "shop"


def template(*, declared: tuple[str, ...] = ("service",)) -> dict[str, Any]:
    return objects.analysis_template(
        "success-rate", namespace=NS, args=[{"name": a} for a in declared],
        metrics=[{"name": "m", "provider": {"web": {"url": "http://m.example/"}}}])


def stage(name: str = "prod", *, args: list[dict[str, Any]] | None = None,
          **metadata: Any) -> dict[str, Any]:
    return objects.stage(name, namespace=NS, verification=objects.verification(
        "success-rate", args=args if args is not None
        else [{"name": "service", "value": "checkout"}]), **metadata)


class Templates:
    """The template look-up: answers with the object it holds, as the webhook's cache
    does until a refresh brings a new one; counts the questions."""

    def __init__(self, held: dict[str, Any] | None) -> None:
        self.held = held
        self.asked = 0
        self.fail: BaseException | None = None

    def __call__(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.asked += 1
        if self.fail is not None:
            raise self.fail
        return self.held


def served(obj: dict[str, Any], verdicts: schemas.Verdicts | None = None, *,
           lookup: TemplateLookup | None = None) -> list[schemas.Finding]:
    """``check_stage`` as the webhook calls it (an object the API server accepted), with
    ``verdicts`` kept when given."""
    return schemas.check_stage(obj, template_lookup=lookup, served=True, verdicts=verdicts)


@pytest.fixture
def check_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many times the checks ran (one entry a run)."""
    runs: list[int] = []
    real = schemas.stage._check_part

    def counted(*args: Any, **kwargs: Any) -> list[schemas.Finding]:
        runs.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(schemas.stage, "_check_part", counted)
    return runs


def test_another_stage_with_the_same_stanza_gets_the_kept_verdict(check_runs):
    templates = Templates(template(declared=()))
    verdicts = schemas.Verdicts()
    first = served(stage("test"), verdicts, lookup=templates)
    assert first, "an undeclared arg is a warning"
    asked = templates.asked
    other = stage("prod", uid="another", labels={"tier": "2"},
                  annotations={"kubectl.kubernetes.io/last-applied-configuration": "{}"})
    other["status"] = {"phase": "Steady"}
    again = served(other, verdicts, lookup=templates)
    assert again == first
    assert len(check_runs) == 1, "the checks ran for the first Stage only"
    assert templates.asked == 2 * asked, "a kept verdict re-asks each look-up once"
    assert len(verdicts) == 1


def test_a_template_fetched_anew_runs_the_checks_again():
    templates = Templates(template(declared=()))
    verdicts = schemas.Verdicts()
    before = served(stage(), verdicts, lookup=templates)
    assert any("args[0].name" in f.field for f in before)
    templates.held = template(declared=("service",))  # the refresh's new object
    after = served(stage(), verdicts, lookup=templates)
    assert after == [] == served(stage(), lookup=templates)


def test_a_template_deleted_since_runs_the_checks_again():
    templates = Templates(template())
    verdicts = schemas.Verdicts()
    assert served(stage(), verdicts, lookup=templates) == []
    templates.held = None
    asked = templates.asked
    after = served(stage(), verdicts, lookup=templates)
    assert templates.asked == asked + 1, "the re-ask's answer is the checks' answer"
    assert [f.message for f in after] == [
        f'AnalysisTemplate "success-rate" in namespace "{NS}" does not exist; the '
        "verification will end in Error until it is created"]


def test_a_look_up_that_fails_keeps_nothing():
    templates = Templates(template(declared=()))
    templates.fail = schemas.LookupUnavailable("API server unreachable")
    verdicts = schemas.Verdicts()
    blind = served(stage(), verdicts, lookup=templates)
    assert blind == [], "without the template there is nothing to warn about"
    assert len(verdicts) == 0
    templates.fail = None
    seen = served(stage(), verdicts, lookup=templates)
    assert [f.field for f in seen] == ["spec.verification.args[0].name"]


def test_a_look_up_that_fails_on_the_re_ask_runs_the_checks_again():
    templates = Templates(template(declared=()))
    verdicts = schemas.Verdicts()
    kept = served(stage(), verdicts, lookup=templates)
    assert kept
    templates.fail = schemas.LookupUnavailable("API server unreachable")
    assert served(stage(), verdicts, lookup=templates) == []


def test_must_wait_ends_the_check_and_keeps_nothing():
    templates = Templates(template())
    templates.fail = MustWait(("AnalysisTemplate", NS, "success-rate"))
    verdicts = schemas.Verdicts()
    with pytest.raises(MustWait):
        served(stage(), verdicts, lookup=templates)
    assert len(verdicts) == 0


def test_without_look_ups_is_a_verdict_of_its_own():
    templates = Templates(template(declared=()))
    verdicts = schemas.Verdicts()
    blind = served(stage(), verdicts)
    seen = served(stage(), verdicts, lookup=templates)
    assert blind == [] and [f.field for f in seen] == ["spec.verification.args[0].name"]
    assert len(verdicts) == 2


@pytest.mark.parametrize("served", [True, False])
def test_served_and_offline_verdicts_are_kept_apart(served):
    newer = stage()
    newer["spec"]["verification"]["newerField"] = 1  # a newer Kargo's field
    verdicts = schemas.Verdicts()
    schemas.check_stage(newer, served=not served, verdicts=verdicts)
    found = schemas.check_stage(newer, served=served, verdicts=verdicts)
    assert found == schemas.check_stage(newer, served=served)
    assert [f.warning for f in found] == [served]


def test_a_stanza_that_differs_anywhere_is_checked():
    """Values equal in Python but not to the checks (1, 1.0 and true) are verdicts of
    their own."""
    verdicts = schemas.Verdicts()

    def found(value: Any) -> list[str]:
        obj = stage(args=[{"name": "service", "value": value}])
        return [f.message for f in served(obj, verdicts)]

    assert found("v") == []
    one, true, one_float = found(1), found(True), found(1.0)
    assert "1" in one[0] and "true" in true[0] and "1.0" in one_float[0]
    assert len(verdicts) == 4


def test_vars_and_namespace_are_part_of_the_verdict(check_runs):
    uses_var = [{"name": "service", "value": "${{ vars.svc }}"}]
    verdicts = schemas.Verdicts()
    without = served(stage(args=uses_var), verdicts)
    with_var = stage(args=uses_var)
    with_var["spec"]["vars"] = [{"name": "svc", "value": "checkout"}]
    assert without and served(with_var, verdicts) == []
    assert len(check_runs) == 2
    # The same template object answers in both namespaces: only the key tells them apart.
    templates = Templates(template())
    asked_in: list[str] = []

    def lookup(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        asked_in.append(namespace)
        return templates(kind, namespace, name)

    elsewhere = stage()
    elsewhere["metadata"]["namespace"] = "other"
    for obj in (stage(), elsewhere):
        assert served(obj, verdicts, lookup=lookup) == []
    assert len(check_runs) == 4 and asked_in == [NS, "other"]


def test_bounded_by_entries_a_part_s_size_and_its_look_ups():
    verdicts = schemas.Verdicts(max_entries=2, max_part_bytes=400)
    for value in ("a", "b", "c"):
        served(stage(args=[{"name": "service", "value": value}]), verdicts)
    assert len(verdicts) == 1, "full at the third: cleared, then the third kept"
    big = stage(args=[{"name": "service", "value": "x" * 400}])
    assert served(big, verdicts) == []
    assert len(verdicts) == 1
    few = schemas.Verdicts(max_lookups=0)
    assert schemas.check_stage(stage(), template_lookup=Templates(template()), served=True,
                               verdicts=few) == []
    assert len(few) == 0, "a check that asked more look-ups than the bound is not kept"


def test_a_part_nested_too_deep_to_serialize_is_checked_each_time():
    deep: Any = "leaf"
    for _ in range(100_000):
        deep = [deep]
    obj = stage(args=[{"name": "service", "value": "v", "extra": deep}])
    verdicts = schemas.Verdicts(max_part_bytes=1 << 30)  # only marshal's refusal counts
    found = served(obj, verdicts)
    assert found == served(obj)
    assert len(verdicts) == 0


def test_checked_part_is_what_the_checks_read():
    obj = stage(uid="u", labels={"a": "b"})
    obj["spec"]["vars"] = [{"name": "svc", "value": "x"}]
    obj["status"] = {"phase": "Steady"}
    assert checked_part(obj) == {"metadata": {"namespace": NS}, "spec": {
        "verification": obj["spec"]["verification"], "vars": obj["spec"]["vars"]}}
    assert checked_part({"spec": ["not", "an", "object"]}) == {"spec": ["not", "an", "object"]}
    assert checked_part({"metadata": "broken"}) == {}
