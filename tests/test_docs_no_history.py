"""User-facing docs say what bosun does, not when it changed: no issue or round numbers (git keeps those)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HISTORY = re.compile(r"\b(issues? \d+|rounds? \d+|this round|(first|second|third|fourth|fifth|sixth|seventh) round)\b",
                     re.IGNORECASE)
# pages being rewritten by their owners at the time of writing; remove an entry once its page is clean
PENDING = {"precheck.md", "offload.md"}


def test_readme_and_docs_name_no_issue_or_round() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    found = [f"{page.relative_to(ROOT)}:{n}: {line.strip()[:100]}"
             for page in pages if page.name not in PENDING
             for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1) if HISTORY.search(line)]
    assert not found, "\n".join(found)
