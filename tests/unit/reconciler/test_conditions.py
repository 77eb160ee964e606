"""Condition conventions both controllers rely on."""

from __future__ import annotations

import datetime as dt

from reconciler.conditions import get_condition, set_condition

T0 = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)
T1 = T0 + dt.timedelta(minutes=5)


def _set(conds, status, *, now, reason="R", message="m", gen=1):
    return set_condition(
        conds, type="Verified", status=status, reason=reason, message=message,
        observed_generation=gen, now=now,
    )


def test_adds_a_missing_condition_with_all_fields():
    out = _set([], "True", now=T0)
    assert out == [{
        "type": "Verified", "status": "True", "reason": "R", "message": "m",
        "observedGeneration": 1, "lastTransitionTime": "2026-01-01T12:00:00Z",
    }]


def test_transition_time_kept_when_status_unchanged():
    first = _set(None, "False", now=T0, reason="A")
    second = _set(first, "False", now=T1, reason="B", message="other", gen=2)
    cond = get_condition(second, "Verified")
    assert cond is not None
    assert cond["lastTransitionTime"] == "2026-01-01T12:00:00Z"
    assert (cond["reason"], cond["message"], cond["observedGeneration"]) == ("B", "other", 2)


def test_transition_time_moves_when_status_changes():
    first = _set(None, "Unknown", now=T0)
    second = _set(first, "True", now=T1)
    cond = get_condition(second, "Verified")
    assert cond is not None
    assert cond["lastTransitionTime"] == "2026-01-01T12:05:00Z"


def test_other_conditions_untouched_and_order_kept():
    other = {"type": "Ready", "status": "True", "reason": "X", "message": "",
             "lastTransitionTime": "2020-01-01T00:00:00Z", "extra": "kept"}
    existing = [other, {"type": "Verified", "status": "True", "reason": "R", "message": "m",
                        "lastTransitionTime": "2020-01-01T00:00:00Z"}]
    out = _set(existing, "False", now=T1)
    assert out[0] == other
    assert [c["type"] for c in out] == ["Ready", "Verified"]


def test_input_is_not_modified():
    existing = [{"type": "Verified", "status": "True", "reason": "R", "message": "m",
                 "lastTransitionTime": "2020-01-01T00:00:00Z"}]
    snapshot = [dict(c) for c in existing]
    _set(existing, "False", now=T1)
    assert existing == snapshot


def test_duplicate_entries_of_the_type_collapse_to_one():
    existing = [{"type": "Verified", "status": "True"}, {"type": "Verified", "status": "False"}]
    out = _set(existing, "True", now=T1)
    assert len([c for c in out if c["type"] == "Verified"]) == 1


def test_observed_generation_omitted_when_unknown():
    out = set_condition(None, type="PluginsSynced", status="Unknown", reason="R", message="",
                        observed_generation=None, now="2026-01-01T00:00:00Z")
    assert "observedGeneration" not in out[0]
    assert out[0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
