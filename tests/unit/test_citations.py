"""Every citation of a README or docs section in the repository names one that exists.

A citation is ``README "Title"`` or ``docs/<page>.md "Title"`` (several titles may
follow one another: ``README "A", "B"``; a comment may wrap between them). A title names a
section when it is a heading's text, that text up to its first `` (`` or ``:``, or the bold
or italic lead-in of a paragraph or list item (``**Upgrade and uninstall.**``). README
always means the one at the top of the repository: a user's clone has nothing else to look
in.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from functools import cache

import pytest

from testkit.paths import REPO_ROOT

# Between the page and its titles: spaces, a comma, "and"/"or", and the marks of a comment
# that wraps onto its next line (``# ``, ``// ``).
# A title may wrap onto the next line too; its line break (and the comment marks after it)
# reads as one space.
_TITLE = r'"[^"\n]+(?:\n[\s#/]*[^"\n]+)?"'
CITATION = re.compile(
    r'\b(README|docs/[\w./-]+\.md)((?:[\s#/]*(?:,|and|or)?[\s#/]*' + _TITLE + ")+)")
TITLE = re.compile(_TITLE)
WRAP = re.compile(r"\s*\n[\s#/]*")
HEADING = re.compile(r"^#{1,6} (.+?)\s*$", re.MULTILINE)
LEAD_IN = re.compile(r"^(?:[-*] )?(\*\*?)([^*\n]+?)\1", re.MULTILINE)
TEXT_SUFFIXES = {".py", ".sh", ".md", ".yaml", ".yml", ".toml", ".tpl", ".txt", ".json", ".go",
                 ".cfg", ""}


def anchors(text: str) -> set[str]:
    """The titles a page's sections answer to."""
    found: set[str] = set()
    for match in HEADING.finditer(text):
        title = match.group(1).replace("`", "")
        found |= {match.group(1), title, title.split(" (")[0], title.split(":")[0]}
    found |= {m.group(2).strip().rstrip(".:") for m in LEAD_IN.finditer(text)}
    return found


@cache
def page_anchors(page: str) -> frozenset[str]:
    return frozenset(anchors((REPO_ROOT / page).read_text()))


def citations(text: str) -> Iterator[tuple[str, str]]:
    """(page, title) of each citation in ``text``."""
    for match in CITATION.finditer(text):
        page = "README.md" if match.group(1) == "README" else match.group(1)
        for title in TITLE.findall(match.group(2)):
            yield page, WRAP.sub(" ", title[1:-1])


def tracked_texts() -> Iterator[tuple[str, str]]:
    """Every text file git tracks, but this one (its examples cite made-up sections)."""
    names = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                           cwd=REPO_ROOT, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    for name in names:
        if name == "tests/unit/test_citations.py":
            continue
        path = REPO_ROOT / name
        if path.suffix in TEXT_SUFFIXES and path.is_file():
            try:
                yield name, path.read_text()
            except UnicodeDecodeError:
                continue


def test_every_cited_section_exists() -> None:
    missing = []
    for name, text in tracked_texts():
        for page, title in citations(text):
            if not (REPO_ROOT / page).is_file():
                missing.append(f"{name}: {page} does not exist")
            elif title.replace("`", "") not in page_anchors(page):  # ``code`` or `code`
                missing.append(f'{name}: {page} has no section "{title}"')
    assert missing == []


@pytest.mark.parametrize(("text", "cited"), [
    ('see README "Helm".', [("README.md", "Helm")]),
    ('(README "Certificates", "TLS")', [("README.md", "Certificates"), ("README.md", "TLS")]),
    ('docs/benchmarks.md "Scale" and "Faults"',
     [("docs/benchmarks.md", "Scale"), ("docs/benchmarks.md", "Faults")]),
    ("a README without a title", []),
    ('(README\n    # "Observe mode"); more', [("README.md", "Observe mode")]),
    ('(README "What the cache\n    # keeps") more', [("README.md", "What the cache keeps")]),
])
def test_citations_are_read_with_every_title(text: str, cited: list[tuple[str, str]]) -> None:
    assert list(citations(text)) == cited


def test_a_section_answers_to_its_heading_its_short_title_and_a_lead_in() -> None:
    page = ("## Webhook (`rollgate webhook`)\n\n### Scale: 10,000 Stages\n\n"
            "**Upgrade and uninstall.** text\n- *The run*: built\n")
    assert {"Webhook (`rollgate webhook`)", "Webhook", "Scale", "Upgrade and uninstall",
            "The run"} <= anchors(page)
    assert "Upgrade" not in anchors(page)
