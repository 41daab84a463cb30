"""The documentation's own promises: every relative link of a page leads to a file of the
repository and, where it names a heading, to a heading of that file; the results page stays short
and its generated tables agree with the reports they are generated from."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
RESULTS_MAX_LINES = 200


def anchors(page: Path) -> set[str]:
    """The anchors a Markdown renderer gives the page's headings: lower case, punctuation other
    than hyphens dropped, spaces as hyphens, repeats numbered."""
    seen: dict[str, int] = {}
    out = set()
    for line in FENCE.sub("", page.read_text(encoding="utf-8")).splitlines():
        match = re.match(r"#{1,6} (.*)", line)
        if not match:
            continue
        slug = re.sub(r"[^\w\- ]", "", match[1].strip().lower().replace("`", "")).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def links(page: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8")))


def test_the_anchors_are_those_a_renderer_gives():
    page = ROOT / "docs" / "results.md"
    assert "defaults-that-transfer-seven-corpora" in anchors(page)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_somewhere(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # https:, mailto: and the like
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target}: no such heading in {file.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_results_page_is_short():
    lines = (ROOT / "docs" / "results.md").read_text(encoding="utf-8").count("\n")
    assert lines <= RESULTS_MAX_LINES, (
        f"docs/results.md has {lines} lines: it states what holds now; move how it was reached "
        "to a dated study page"
    )


@pytest.mark.parametrize("page", ["results.md", "benchmark.md"])
def test_generated_tables_agree_with_their_reports(page):
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "transfer_table.py"),
            "page",
            str(ROOT / "docs" / page),
            "--check",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
