"""Test modules are imported by their basename (pytest's default rootdir-less import
mode, with each test folder on sys.path), so two of the same name in different folders
stop the whole run at collection: a clean clone's `make test` then runs nothing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_has_its_own_basename() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [n for n, count in names.items() if count > 1] == []
