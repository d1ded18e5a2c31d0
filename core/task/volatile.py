"""Find cache-busting volatile tokens in a system prompt head or a tool contract.

Provider prompt caches match on an exact byte prefix: a timestamp, today's date,
a UUID, a request id or a turn counter near the top of a prompt changes on every
call and silently turns every request into a full prefill. ``find_volatile``
reports each such token with its kind and position (offset, line, column) so the
harness author can move it below the cached prefix or remove it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_MONTHS = (r"(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|"
           r"Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)")
_DAYS = r"(?:Mon(?:day)?|Tue(?:s(?:day)?)?|Wed(?:nesday)?|Thu(?:rs(?:day)?)?|Fri(?:day)?|Sat(?:urday)?|Sun(?:day)?)"

# (kind, pattern), most specific first; overlapping later matches are dropped
_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("timestamp", re.compile(
        r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:\s?(?:Z|UTC|[+-]\d{2}:?\d{2}))?")),
    ("timestamp", re.compile(
        rf"\b(?:{_DAYS},?\s+)?{_MONTHS}\s+\d{{1,2}},?\s+\d{{4}},?\s+\d{{1,2}}:\d{{2}}(?::\d{{2}})?(?:\s?[AaPp][Mm])?")),
    ("uuid", re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")),
    ("request_id", re.compile(
        r"\b(?:request|req|trace|span|session|correlation|conversation|run|message|msg|call)[ _-]?id"
        r"\s*[:=]\s*[\"']?[A-Za-z0-9_.:-]{4,}", re.IGNORECASE)),
    ("request_id", re.compile(r"\b(?:req|msg|run|sess|trace|call|chatcmpl|resp|toolu)_[A-Za-z0-9]{8,}\b")),
    ("request_id", re.compile(r"\b[0-9A-HJKMNP-TV-Z]{26}\b")),  # ULID
    ("epoch", re.compile(r"\b1[5-9]\d{8}(?:\d{3})?\b")),  # unix seconds / milliseconds 2017..2033
    ("date", re.compile(r"\b\d{4}-\d{2}-\d{2}\b")),
    ("date", re.compile(r"\b\d{1,2}/\d{1,2}/\d{2,4}\b")),
    ("date", re.compile(rf"\b(?:{_DAYS},?\s+)?{_MONTHS}\s+\d{{1,2}}(?:st|nd|rd|th)?,?\s+\d{{4}}\b")),
    ("date", re.compile(rf"\b(?:{_DAYS},?\s+)?\d{{1,2}}(?:st|nd|rd|th)?\s+{_MONTHS},?\s+\d{{4}}\b")),
    ("time", re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\s?[AaPp][Mm])?\b")),
    ("counter", re.compile(
        r"\b(?:turn|step|iteration|attempt|request|call|message|msg|round|counter|count|seq|sequence)"
        r"(?:\s*(?:no\.?|number|#))?\s*[:=#]?\s*\d+\b", re.IGNORECASE)),
    ("counter", re.compile(r"(?<![\w#])#\d+\b")),
    ("hex_id", re.compile(r"\b[0-9a-f]{24,}\b")),  # long hex: hashes, nonces, build ids
]


@dataclass(frozen=True)
class Volatile:
    """One cache-busting token: what it looks like and where it is."""

    kind: str
    text: str
    start: int  # character offset in the text (0-based)
    end: int
    line: int  # 1-based
    column: int  # 1-based

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "start": self.start, "end": self.end,
                "line": self.line, "column": self.column}


def find_volatile(text: str, limit: int = 50) -> list[Volatile]:
    """Volatile tokens in ``text`` in order of position (at most ``limit``)."""
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, int, str]] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            start, end = m.span()
            if start == end or any(start < e and s < end for s, e in taken):
                continue
            taken.append((start, end))
            found.append((start, end, kind))
    found.sort()
    line_starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n"]
    out: list[Volatile] = []
    for start, end, kind in found[:limit]:
        line = _bisect(line_starts, start)
        out.append(Volatile(kind=kind, text=text[start:end], start=start, end=end, line=line + 1,
                            column=start - line_starts[line] + 1))
    return out


def _bisect(starts: list[int], pos: int) -> int:
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= pos:
            lo = mid
        else:
            hi = mid - 1
    return lo
