"""A Stage's findings kept per distinct checked part, for the webhook.

The webhook is called for a Stage whose stanza is new or changed (its matchConditions
leave other updates out), and such a stanza is often one it has checked before: the
Stages of a pipeline sharing one, the server-side dry run (``kubectl diff``,
``--dry-run=server``) before the apply, a Stage deleted and created again. The checks
are a pure function of the Stage's checked part (``schemas.stage.checked_part``: what
they read, all they are given) and of the look-ups' answers, so the same part with the
same answers has the same findings. Each look-up the checks made is asked again, in the
order they asked it, and its answer compared by identity (the webhook's cache hands out
the object it holds until a refresh brings a new one, and never edits one in place; a
caller's own look-ups must not either): a template fetched anew, deleted or not known
now runs the checks again (docs/components.md "Verdicts kept").

The webhook owns one :class:`Verdicts` per process.
"""

from __future__ import annotations

import marshal
from collections.abc import Callable
from typing import Any, NamedTuple

from schemas.findings import Finding
from schemas.lookups import LookupUnavailable, TemplateLookup

Question = tuple[str, str, str]  # a template look-up's (kind, namespace, name)
Check = Callable[[dict[str, Any], "TemplateLookup | None"], list[Finding]]

# A part's key: marshal's format 2 writes every value whole (format 3 on refers back to
# objects seen before, which depends on identity) and each type by its own code (true is
# not 1, 1.0 is not 1, a tuple is not a list; subclasses are refused), so equal bytes are
# equal parts. Half the cost of JSON text with the CPU caches cold (docs/benchmarks.md
# "Inside the webhook server").
_KEY_FORMAT = 2


class _Verdict(NamedTuple):
    findings: tuple[Finding, ...]
    asked: tuple[tuple[Question, object], ...]  # each look-up and its answer, in order


class _Recorder:
    """The look-up the checks get when a part is new: notes each question and answer;
    ``failed`` when one raised (the findings then lack warnings that are not for
    keeping). ``fresh``: answers just given to the re-ask of a kept verdict, used once
    instead of asking again (a template not found is not cached: asking twice would be
    two API calls)."""

    __slots__ = ("asked", "failed", "fresh", "lookup")

    def __init__(self, lookup: TemplateLookup, fresh: dict[Question, object]) -> None:
        self.lookup = lookup
        self.fresh = fresh
        self.asked: list[tuple[Question, object]] = []
        self.failed = False

    def __call__(self, kind: str, namespace: str, name: str) -> Any:
        question = (kind, namespace, name)
        if question in self.fresh:
            answer = self.fresh.pop(question)
        else:
            try:
                answer = self.lookup(kind, namespace, name)
            except BaseException:  # LookupUnavailable, and MustWait, which ends the check
                self.failed = True
                raise
        self.asked.append((question, answer))
        return answer


def _same_answers(asked: tuple[tuple[Question, object], ...],
                  lookup: TemplateLookup | None, fresh: dict[Question, object]) -> bool:
    """Whether each look-up answers as it did; the answers given go to ``fresh``."""
    if lookup is None:
        return not asked
    for question, answer in asked:
        try:
            now = lookup(*question)
        except LookupUnavailable:
            return False
        fresh[question] = now
        if now is not answer:
            return False
    return True


class Verdicts:
    """Findings per (check, whether look-ups were given, checked part); bounded by
    entries (the table is emptied when full), by the size of a part written out and by
    the look-ups a check made (each verdict holds the answers it compares; a bigger
    part, or a check of more templates, is checked every time)."""

    def __init__(self, *, max_entries: int = 256, max_part_bytes: int = 16384,
                 max_lookups: int = 16) -> None:
        self._kept: dict[tuple[Check, bool, bytes], _Verdict] = {}
        self._max_entries = max_entries
        self._max_part_bytes = max_part_bytes
        self._max_lookups = max_lookups

    def __len__(self) -> int:
        """How many verdicts are kept."""
        return len(self._kept)

    def findings(self, part: dict[str, Any], *, lookup: TemplateLookup | None,
                 check: Check) -> list[Finding]:
        """``check(part, lookup)``, or the findings it gave for this part before when
        every look-up it made answers as it did then."""
        try:
            written = marshal.dumps(part, _KEY_FORMAT)
        except ValueError:  # a type marshal does not write; nested too deep
            return check(part, lookup)
        if len(written) > self._max_part_bytes:
            return check(part, lookup)
        key = (check, lookup is None, written)
        kept = self._kept.get(key)
        fresh: dict[Question, object] = {}
        if kept is not None and _same_answers(kept.asked, lookup, fresh):
            return list(kept.findings)
        recorder = None if lookup is None else _Recorder(lookup, fresh)
        found = check(part, recorder)
        if recorder is None:
            self._keep(key, _Verdict(tuple(found), ()))
        elif not recorder.failed and len(recorder.asked) <= self._max_lookups:
            self._keep(key, _Verdict(tuple(found), tuple(recorder.asked)))
        return found

    def _keep(self, key: tuple[Check, bool, bytes], verdict: _Verdict) -> None:
        if len(self._kept) >= self._max_entries:
            self._kept.clear()  # simpler than an LRU, and a full table is rare
        self._kept[key] = verdict
