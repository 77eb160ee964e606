"""The docs site (mkdocs.yml, docs/) builds with ``mkdocs build --strict``: mkdocs'
link, anchor and nav checks are set to warn, which --strict turns into failures. The
README and the alerts' runbook links are outside the site, so their links are checked
here against the built pages."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import chart
from testkit.paths import REPO_ROOT


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict",
                           "--config-file", str(root / "mkdocs.yml"), "--site-dir", str(site)],
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built from the repository, strictly; the build's failure is the test's."""
    root = tmp_path_factory.mktemp("site")
    out = build(REPO_ROOT, root)
    assert out.returncode == 0, out.stderr
    return root


def test_the_docs_build_strictly(site: Path) -> None:
    assert (site / "flags" / "index.html").is_file()
    assert (site / "benchmarks" / "index.html").is_file()


LINK = re.compile(r"\]\(([^)\s]+)\)")


def broken_links(readme: str, site: Path) -> list[str]:
    """The README's relative links that name no file of the repository, or an anchor that
    no heading of the built docs page carries."""
    broken = []
    for target in LINK.findall(readme):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        path, _, anchor = target.partition("#")
        if not (REPO_ROOT / path).exists():
            broken.append(f"{target}: no {path}")
        elif anchor:
            page_dir = Path(path).relative_to("docs").with_suffix("")
            page = site / ("" if page_dir.name == "index" else page_dir) / "index.html"
            if f'id="{anchor}"' not in page.read_text():
                broken.append(f"{target}: no heading with that anchor")
    return broken


def test_the_readme_links_to_pages_and_headings_that_exist(site: Path) -> None:
    assert broken_links((REPO_ROOT / "README.md").read_text(), site) == []


def test_every_alerts_runbook_url_names_a_heading_of_the_built_page(site: Path) -> None:
    """charts/rollgate/files/alerts.yaml links each alert to its section of a docs page
    (docs/operating.md "Alert runbooks"), by its URL in the repository."""
    links = [r["annotations"]["runbook_url"].split("/blob/main/", 1)[1]
             for r in chart.alert_rules()]
    assert len(links) == len(chart.alert_rules()) and all("#" in link for link in links)
    assert broken_links("".join(f"[r]({link})" for link in links), site) == []


def test_a_broken_readme_link_is_found(site: Path) -> None:
    readme = ("[a](docs/install.md#helm) [b](docs/gone.md) [c](docs/install.md#no-such) "
              "[d](https://example.com)")
    found = broken_links(readme, site)
    gone = "docs/gone.md"
    no_anchor = "docs/install.md#no-such"
    assert [link.split(":")[0] for link in found] == [gone, no_anchor]


def test_a_broken_link_a_dead_anchor_and_a_page_outside_the_nav_fail(tmp_path: Path) -> None:
    shutil.copy(REPO_ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    shutil.copytree(REPO_ROOT / "docs", tmp_path / "docs")
    index = tmp_path / "docs" / "index.md"
    cases = {
        "missing.md": "[gone](missing.md)",
        "#no-such-section": "[dead](flags.md#no-such-section)",
        "orphan.md": None,
    }
    for says, line in cases.items():
        original = index.read_text()
        if line is None:
            (tmp_path / "docs" / "orphan.md").write_text("# Not in the nav\n")
        else:
            index.write_text(original + f"\n{line}\n")
        out = build(tmp_path, tmp_path / "site")
        assert out.returncode != 0, f"{says}: built anyway"
        assert says in out.stderr, out.stderr
        index.write_text(original)
        (tmp_path / "docs" / "orphan.md").unlink(missing_ok=True)
