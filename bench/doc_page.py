"""The one way a generated docs page is written or checked (bench/make_*_doc.py)."""

from __future__ import annotations

from pathlib import Path


def write_or_check(page: Path, text: str, script: str, check: bool, what: str = "") -> int:
    """``check``: 0 when the committed page equals ``text``, else 1 with the command to run; otherwise write it."""
    name = f"docs/{page.name}"
    if check:
        same = page.exists() and page.read_text(encoding="utf-8") == text
        print(f"{name} is current" if same else f"{name} is stale: run python bench/{script}")
        return 0 if same else 1
    page.write_text(text, encoding="utf-8")
    print(f"wrote {name}{what}")
    return 0
