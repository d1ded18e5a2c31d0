"""Server-side reads of a stored payload: only the requested part leaves.

Every answer is bounded (``max_bytes`` and ``max_tokens``) and says what was
cut, so a recall can never flood the prompt it was meant to keep small.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from bosun.core.errors import InvalidInput
from bosun.core.tokens import estimate_tokens

DEFAULT_MAX_TOKENS = 2_000
HARD_MAX_BYTES = 1_000_000
GREP_TIME_BUDGET_S = 0.5
MAX_PATTERN_CHARS = 1_000
OPS = ("raw", "head", "tail", "range", "grep")


@dataclass
class QueryResult:
    """The part of a payload a recall returns, and what was left out."""

    text: str
    total_bytes: int
    total_lines: int
    returned_lines: int
    truncated: bool = False
    note: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def decode(data: bytes) -> str:
    """Payloads are text; undecodable bytes are shown as U+FFFD, never dropped silently."""
    return data.decode("utf-8", errors="replace")


def bound(text: str, max_bytes: int, max_tokens: int) -> tuple[str, bool]:
    """Cut ``text`` at a line boundary so it fits both limits."""
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes and estimate_tokens(text) <= max_tokens:
        return text, False
    # shrink by bytes first, then by tokens, keeping whole lines where possible
    limit = min(max_bytes, len(encoded))
    cut = encoded[:limit].decode("utf-8", errors="ignore")
    while cut and estimate_tokens(cut) > max_tokens:
        cut = cut[: int(len(cut) * 0.8)]
    nl = cut.rfind("\n")
    if nl > len(cut) // 2:
        cut = cut[: nl + 1]
    return cut, True


def _check_limits(max_bytes: int, max_tokens: int) -> None:
    if not isinstance(max_bytes, int) or max_bytes < 1 or max_bytes > HARD_MAX_BYTES:
        raise InvalidInput("max_bytes", f"must be an integer in 1..{HARD_MAX_BYTES}, got {max_bytes!r}")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise InvalidInput("max_tokens", f"must be a positive integer, got {max_tokens!r}")


def run_query(
    data: bytes,
    op: str,
    *,
    lines: int = 40,
    start: int | None = None,
    end: int | None = None,
    unit: str = "lines",
    pattern: str | None = None,
    context: int = 0,
    max_matches: int = 50,
    ignore_case: bool = False,
    max_bytes: int = 64_000,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> QueryResult:
    """Apply one read operation to ``data``; raises InvalidInput naming the bad field."""
    _check_limits(max_bytes, max_tokens)
    text = decode(data)
    all_lines = text.splitlines(keepends=True)
    total = len(all_lines)
    if op == "raw":
        body, cut = bound(text, max_bytes, max_tokens)
        return _result(body, data, total, cut, "raw")
    if op in ("head", "tail"):
        if not isinstance(lines, int) or lines < 1:
            raise InvalidInput("lines", f"must be a positive integer, got {lines!r}")
        chosen = all_lines[:lines] if op == "head" else all_lines[-lines:]
        body, cut = bound("".join(chosen), max_bytes, max_tokens)
        return _result(body, data, total, cut or len(chosen) < total, op)
    if op == "range":
        return _range(data, text, all_lines, start, end, unit, max_bytes, max_tokens)
    if op == "grep":
        return _grep(data, all_lines, pattern, context, max_matches, ignore_case, max_bytes, max_tokens)
    raise InvalidInput("op", f"unknown operation {op!r}", ", ".join(OPS))


def _result(body: str, data: bytes, total: int, truncated: bool, op: str) -> QueryResult:
    returned = body.count("\n") + (0 if body.endswith("\n") or not body else 1)
    note = None
    if truncated:
        note = f"{op}: returned {returned} of {total} lines; ask for a range, grep, or a larger max_tokens"
    return QueryResult(body, len(data), total, returned, truncated, note)


def _range(
    data: bytes, text: str, all_lines: list[str], start: int | None, end: int | None, unit: str,
    max_bytes: int, max_tokens: int,
) -> QueryResult:
    if unit not in ("lines", "bytes"):
        raise InvalidInput("unit", f"unknown unit {unit!r}", "lines, bytes")
    if start is None:
        raise InvalidInput("start", "range needs a start (1-based line, or 0-based byte offset)")
    if not isinstance(start, int) or (end is not None and not isinstance(end, int)):
        raise InvalidInput("start", "start and end must be integers")
    if unit == "lines":
        if start < 1:
            raise InvalidInput("start", f"lines are 1-based, got {start}")
        stop = len(all_lines) if end is None else end
        if stop < start:
            raise InvalidInput("end", f"end ({stop}) is before start ({start})")
        chosen = all_lines[start - 1 : stop]
        body, cut = bound("".join(chosen), max_bytes, max_tokens)
        res = _result(body, data, len(all_lines), cut, "range")
        res.extra = {"start": start, "end": min(stop, len(all_lines))}
        return res
    if start < 0:
        raise InvalidInput("start", f"byte offsets start at 0, got {start}")
    stop = len(data) if end is None else end
    if stop < start:
        raise InvalidInput("end", f"end ({stop}) is before start ({start})")
    body, cut = bound(decode(data[start:stop]), max_bytes, max_tokens)
    res = _result(body, data, len(all_lines), cut, "range")
    res.extra = {"start": start, "end": min(stop, len(data)), "unit": "bytes"}
    return res


def compile_pattern(pattern: str | None, ignore_case: bool = False, field: str = "pattern") -> re.Pattern[str]:
    """Compile a caller's regex with a length cap; the scan itself is time-bounded."""
    if not pattern:
        raise InvalidInput(field, "grep needs a non-empty regular expression")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidInput(field, f"pattern is {len(pattern)} chars; the limit is {MAX_PATTERN_CHARS}")
    try:
        return re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise InvalidInput(field, f"invalid regular expression: {exc}") from exc


def _grep(
    data: bytes, all_lines: list[str], pattern: str | None, context: int, max_matches: int,
    ignore_case: bool, max_bytes: int, max_tokens: int,
) -> QueryResult:
    rx = compile_pattern(pattern, ignore_case)
    if not isinstance(context, int) or context < 0 or context > 50:
        raise InvalidInput("context", f"must be an integer in 0..50, got {context!r}")
    if not isinstance(max_matches, int) or max_matches < 1:
        raise InvalidInput("max_matches", f"must be a positive integer, got {max_matches!r}")
    deadline = time.perf_counter() + GREP_TIME_BUDGET_S
    hits: list[int] = []
    total_hits = 0
    timed_out = False
    for i, line in enumerate(all_lines):
        if len(line) > 20_000:
            line = line[:20_000]  # a single enormous line cannot stall the scan
        if rx.search(line):
            total_hits += 1
            if len(hits) < max_matches:
                hits.append(i)
        if (i & 255) == 0 and time.perf_counter() > deadline:
            timed_out = True
            break
    shown: list[str] = []
    last = -1
    for i in hits:
        lo, hi = max(0, i - context), min(len(all_lines), i + context + 1)
        if lo > last + 1 and shown:
            shown.append("--\n")
        for j in range(max(lo, last + 1), hi):
            sep = ":" if j == i else "-"
            shown.append(f"{j + 1}{sep}{all_lines[j] if all_lines[j].endswith(chr(10)) else all_lines[j] + chr(10)}")
        last = hi - 1
    body, cut = bound("".join(shown), max_bytes, max_tokens)
    notes = []
    if total_hits > len(hits):
        notes.append(f"{total_hits} matching lines, showing {len(hits)} (raise max_matches)")
    if timed_out:
        notes.append(f"scan stopped after {GREP_TIME_BUDGET_S}s; narrow the pattern")
    if cut:
        notes.append("output cut to max_tokens/max_bytes")
    res = QueryResult(body, len(data), len(all_lines), len(hits), bool(notes), "; ".join(notes) or None)
    res.extra = {"matches": total_hits, "shown": len(hits), "complete": not timed_out}
    return res
