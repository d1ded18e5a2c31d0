"""The middle-size view: an output too small to offload, shown with its noise taken out.

Between pass-through and offload, an output can still carry terminal noise: ANSI colour codes,
progress bars redrawn with carriage returns, and runs of the same line (a download loop, a
retry, a warning per item). The view strips the escapes, keeps the last redraw of each
carriage-return line, and collapses runs of repeated lines into the first line plus a visible
count, so nothing disappears silently: every change is marked in the text itself, and the
full output stays one recall away (the answer carries its ref).

Lines that differ only in their numbers (``Downloading 3/120``) collapse too, into the first and
the last of the run with the count of those between: the marker says the numbers varied.

A JSON document holding lists of records gets the table view of ``json_table`` instead (keys once,
one row per record; it reads back to the same JSON value), which the caller keeps only when it
costs fewer tokens than the output, its own note and ref included.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from bosun.core.offload.json_table import table_view

ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
DIGITS = re.compile(r"\d+")
MIN_RUN = 3  # a run shorter than this is left as it is: the marker would cost about as much


@dataclass
class View:
    """The compressed text and what was done to get it (for the answer's note)."""

    text: str
    changes: dict[str, int] = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return any(self.changes.values())

    def note(self) -> str:
        """One line naming every kind of change, so the reader knows what to recall for."""
        words = {
            "ansi": "colour codes stripped",
            "redraws": "progress redraws kept last",
            "repeats": "repeated lines collapsed",
            "similar": "number-only variants collapsed",
            "json_tables": "JSON table view; recall ref gives the JSON",
        }
        return "; ".join(f"{words[k]} ({n})" for k, n in self.changes.items() if n)


def _last_redraw(line: str) -> str:
    """What a terminal shows for a line redrawn with carriage returns: the text after the last one."""
    if "\r" not in line:
        return line
    parts = [p for p in line.split("\r") if p]
    return parts[-1] if parts else ""


def compress(text: str) -> View:
    """The view of ``text``; ``View.changed`` is False when there was nothing to take out."""
    if text[:1] in "[{" or text.lstrip()[:1] in ("[", "{"):
        tabled = table_view(text)
        if tabled is not None:
            return View(tabled[0], {"json_tables": tabled[1]})
    changes = {"ansi": 0, "redraws": 0, "repeats": 0, "similar": 0}
    if "\x1b" in text:
        text, changes["ansi"] = ANSI.subn("", text)
    lines = text.split("\n")
    if "\r" in text:
        cleaned = []
        for ln in lines:
            shown = _last_redraw(ln)
            changes["redraws"] += shown != ln
            cleaned.append(shown)
        lines = cleaned
    # digit shapes of every line in one regex pass over the whole text (a newline is never a digit)
    shapes = DIGITS.sub("#", "\n".join(lines)).split("\n")
    out: list[str] = []
    i = 0
    n = len(lines)
    while i < n:
        line = lines[i]
        j = i + 1
        while j < n and lines[j] == line:
            j += 1
        if j - i >= MIN_RUN:
            out.append(line)
            out.append(f"[bosun: the line above repeated {j - i - 1} more times]")
            changes["repeats"] += 1
            i = j
            continue
        shape = shapes[i]
        j = i + 1
        if shape != line:
            while j < n and shapes[j] == shape and lines[j] != lines[j - 1]:
                j += 1
        if j - i >= MIN_RUN + 1:
            out.append(line)
            out.append(f"[bosun: {j - i - 2} similar lines (only numbers differ) omitted]")
            out.append(lines[j - 1])
            changes["similar"] += 1
            i = j
            continue
        out.append(line)
        i += 1
    return View("\n".join(out), changes)
