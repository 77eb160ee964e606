"""Data-driven cases from tests/unit/schemas/corpus/*.yaml (format in corpus/README.md).

Each case states the exact error and warning field paths a user would see, so a change
in any rule or message path shows up as a precise diff.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

import schemas

CORPUS = Path(__file__).parent / "corpus"


def _cases() -> list[dict[str, Any]]:
    cases = []
    for path in sorted(CORPUS.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc is not None:
                doc["_file"] = path.name
                cases.append(doc)
    return cases


CASES = _cases()


def _template_lookup(case: dict[str, Any]):
    if "templates" not in case:
        return None
    world = {
        (t["kind"], t["metadata"].get("namespace", ""), t["metadata"]["name"]): t
        for t in case["templates"]
    }

    def lookup(kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        if case.get("lookup_unavailable"):
            raise schemas.LookupUnavailable("API server unreachable")
        return world.get((kind, namespace, name))

    return lookup


def _rollout_managers(case: dict[str, Any]):
    if "rollout_managers" not in case:
        return None

    def lookup(namespace: str) -> list[dict[str, Any]]:
        if case.get("lookup_unavailable"):
            raise schemas.LookupUnavailable("API server unreachable")
        return [m for m in case["rollout_managers"] if m["metadata"]["namespace"] == namespace]

    return lookup


def test_corpus_is_big_enough_and_names_are_unique() -> None:
    names = [c["name"] for c in CASES]
    assert len(names) >= 60
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_corpus_case(case: dict[str, Any]) -> None:
    findings = schemas.check(
        case["object"],
        template_lookup=_template_lookup(case),
        rollout_managers=_rollout_managers(case),
        **case.get("options", {}),
    )
    shown = "\n".join(str(f) for f in findings)
    assert Counter(f.field for f in schemas.errors(findings)) == Counter(case["errors"]), shown
    assert Counter(f.field for f in schemas.warnings(findings)) == Counter(case["warnings"]), shown
    for field, substring in (case.get("messages") or {}).items():
        messages = [f.message for f in findings if f.field == field]
        assert any(substring in m for m in messages), (field, substring, messages)
    for finding in findings:
        # Never a raw jsonschema message.
        assert "does not match" not in finding.message
        assert "is not of type" not in finding.message
        assert "Additional properties" not in finding.message
