"""A structural outline of a payload, chosen by what the content is.

The outline is what an agent keeps in its prompt instead of an offloaded
result, so it must carry what the agent acts on next: the failing test names
and the summary of a test run, the error lines of a log, the symbols (with
line numbers) of a source file, the keys and shapes of JSON, the columns of a
table, the files of a grep, the head and tail of plain text. Each outline fits
a token budget and comes with the recall calls that fetch more.

Whole-payload passes use only literal searches; line-level work runs on a
bounded window (head and tail) so a megabyte outlines in a few milliseconds.
"""

from __future__ import annotations

import bisect
import functools
import json
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from bosun.core.offload.testrun import TestRun, read_test_run
from bosun.core.redact import AnchorScan
from bosun.core.tokens import estimate_tokens

WINDOW_HEAD = 192_000  # characters examined line by line at the start ...
WINDOW_TAIL = 64_000  # ... and at the end of a large payload
MAX_LINE = 240  # outline lines are cut to this many characters
_UTF8_ABOVE = 16_384  # characters: smaller texts are searched as ``str`` (no setup cost to win back)


@dataclass
class Outline:
    """``kind`` names the detected content; ``lines`` is the outline text; ``hints`` are recall calls."""

    kind: str
    lines: list[str]
    hints: list[dict[str, Any]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


# -- helpers ---------------------------------------------------------------------------------------

def _clip(line: str, n: int = MAX_LINE) -> str:
    line = line.rstrip()
    return line if len(line) <= n else line[: n - 1] + "…"


def _cost(lines: list[str]) -> int:
    """Tokens of outline lines as ``_fit`` counts them."""
    return sum(estimate_tokens(line) + 1 for line in lines)


def _fit(lines: list[str], budget: int) -> list[str]:
    """Keep lines in order while the total stays within ``budget`` tokens."""
    out: list[str] = []
    used = 0
    for line in lines:
        cost = estimate_tokens(line) + 1
        if used + cost > budget and out:
            out.append(f"… (+{len(lines) - len(out)} more outline lines; use recall)")
            break
        out.append(line)
        used += cost
    return out


class _Lines:
    """Numbered lines of the head and tail windows of a text (1-based numbers)."""

    def __init__(self, text: str) -> None:
        self.total = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
        if len(text) <= WINDOW_HEAD + WINDOW_TAIL:
            self.head = text.splitlines()
            self.tail_start = len(self.head) + 1
            self.tail: list[str] = []
        else:
            head = text[:WINDOW_HEAD]
            head = head[: head.rfind("\n") + 1] or head
            self.head = head.splitlines()
            tail = text[-WINDOW_TAIL:]
            tail = tail[tail.find("\n") + 1 :]
            self.tail = tail.splitlines()
            self.tail_start = self.total - len(self.tail) + 1
        self.complete = not self.tail and len(self.head) >= self.total

    def numbered(self) -> list[tuple[int, str]]:
        return list(enumerate(self.head, 1)) + [(self.tail_start + i, s) for i, s in enumerate(self.tail)]


def line_number_at(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _line_numbers(text: str, positions: list[int]) -> dict[int, int]:
    """``line_number_at`` for several positions in one pass over the text (not one pass each)."""
    out: dict[int, int] = {}
    line, last = 1, 0
    for pos in sorted(set(positions)):
        line += text.count("\n", last, pos)
        out[pos] = line
        last = pos
    return out


def _line_at(text: str, pos: int) -> str:
    lo = text.rfind("\n", 0, pos) + 1
    hi = text.find("\n", pos)
    return text[lo : hi if hi >= 0 else len(text)]


_ERROR_NEEDLES = ("error", "exception", "traceback", "fail", "fatal", "panic")
_TEST_NEEDLES = ("FAILED ", "ERROR ", "FAIL: ", "ERROR: ", "PASSED ")  # a test run, in the head
_FAIL_NEEDLES = ("FAILED ", "ERROR ", "FAIL: ", "ERROR: ", "XPASS ")  # its failures
_LINE_NEEDLES = frozenset(_TEST_NEEDLES + _FAIL_NEEDLES)
# every literal the outline of a large payload looks for, found in one vectorised pass per window
# (long phrases are checked at the hits of a short needle they contain: a scan literal costs a
# numpy call per byte)
OUTLINE_LITERALS = tuple(sorted({n.encode() for n in _ERROR_NEEDLES} | {b"\n" + n.lower().encode() for n in _LINE_NEEDLES}))
_OUTLINE_SCAN = AnchorScan(OUTLINE_LITERALS)
_TRACEBACK = "Traceback (most recent call last)"


class Utf8Text:
    """The UTF-8 bytes of a text, for the literal searches of a large payload.

    ``data`` must be exactly ``text.encode("utf-8")`` (observe has those bytes already). Byte
    searches are several times faster than ``str`` searches (a payload with one non-ASCII
    character is a 2- or 4-byte-per-character string), and the results are the same: the
    needles are ASCII (a UTF-8 continuation byte is never ASCII), byte offsets keep the order
    of character offsets, lines split at the same newlines and decode to the same strings, and
    the head/tail windows are mapped to the byte offsets of the same character boundaries.
    """

    @classmethod
    def of(cls, text: str, data: bytes | None, found: dict[bytes, list[int]] | None = None) -> Utf8Text | None:
        """The view for a large text (small ones are searched as ``str``: no setup cost to win back).

        ``found``: ``OUTLINE_LITERALS``' positions in all of ``data``, when a scan of the whole
        payload found them already (redaction's: ``Redactor.redact_bytes_finding``)."""
        return cls(text, data, found) if data is not None and len(text) > _UTF8_ABOVE else None

    def __init__(self, text: str, data: bytes, found: dict[bytes, list[int]] | None = None) -> None:
        self.data = data
        self._found: list[dict[bytes, list[int]]] | None = None  # per region, from one scan (lazily)
        self._whole = found
        self.ascii = len(data) == len(text)
        n = len(text)
        if n <= WINDOW_HEAD + WINDOW_TAIL:
            self.regions = [(0, len(data))]
            self.head_end = len(data) if n <= WINDOW_HEAD else self._offset(text, WINDOW_HEAD)
        else:
            self.head_end = self._offset(text, WINDOW_HEAD)
            tail = WINDOW_TAIL if self.ascii else utf8_tail_bytes(data, WINDOW_TAIL)
            self.regions = [(0, self.head_end), (len(data) - tail, len(data))]

    def _offset(self, text: str, chars: int) -> int:
        """Byte offset of character ``chars``."""
        return chars if self.ascii else utf8_offset(self.data, chars)

    def occurrences(self, region: int, needle: str, fold: bool) -> list[int]:
        """Every start of ``needle`` (overlaps included) within region ``region``, or from the byte
        before it for a needle that starts with a newline; ``fold``: in the lower-cased bytes."""
        if self._found is None:
            self._found = self._scan()
        found = self._found[region].get(needle.lower().encode(), [])
        if fold:
            return found
        exact = needle.encode()
        return [p for p in found if self.data.startswith(exact, p)]

    def _scan(self) -> list[dict[bytes, list[int]]]:
        """The needles' occurrences per region (from the byte before a region: a line-start needle
        may begin at the newline just before it), found in one pass over the regions joined."""
        spans = [(max(lo - 1, 0), hi) for lo, hi in self.regions]
        if self._whole is not None:  # the whole payload's positions: those wholly within each span
            return [_within(self._whole, a, b) for a, b in spans]
        if len(spans) == 1:
            return [_OUTLINE_SCAN.positions(self.data, *spans[0])]
        (a0, b0), (a1, b1) = spans
        cut = b0 - a0
        found = _OUTLINE_SCAN.positions(self.data[a0:b0] + self.data[a1:b1])
        head: dict[bytes, list[int]] = {}
        tail: dict[bytes, list[int]] = {}
        for lit, pos in found.items():
            i = bisect.bisect_right(pos, cut - len(lit))  # wholly in the head part
            j = bisect.bisect_left(pos, cut, i)  # from here on, wholly in the tail part
            if i:
                head[lit] = [p + a0 for p in pos[:i]] if a0 else pos[:i]
            if j < len(pos):
                tail[lit] = [p - cut + a1 for p in pos[j:]]
        return [head, tail]

    def line_at(self, pos: int, end: int | None = None) -> str:
        """``_line_at`` of the text (cut at byte ``end``, as ``_line_at`` of a prefix would be)."""
        end = len(self.data) if end is None else end
        lo = self.data.rfind(b"\n", 0, pos) + 1
        hi = self.data.find(b"\n", pos, end)
        return self.data[lo : hi if hi >= 0 else end].decode("utf-8")


def _within(found: dict[bytes, list[int]], lo: int, hi: int) -> dict[bytes, list[int]]:
    """The positions in ``found`` of occurrences that lie wholly within ``[lo, hi)``."""
    out: dict[bytes, list[int]] = {}
    for lit, pos in found.items():
        i = bisect.bisect_left(pos, lo)
        j = bisect.bisect_right(pos, hi - len(lit), i)
        if i < j:
            out[lit] = pos[i:j]
    return out


def newlines(data: bytes, lo: int, hi: int) -> int:
    """``data.count(b"\\n", lo, hi)``; numpy counts a long span (a final error near the end of a
    megabyte) ten times faster."""
    if hi - lo < 65536:
        return data.count(b"\n", lo, hi)
    return int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8, count=hi - lo, offset=lo) == 10))


def utf8_offset(data: bytes, chars: int) -> int:
    """Byte offset in UTF-8 ``data`` where character ``chars`` starts (``len(text[:chars].encode())``).

    Counted with numpy on the bytes: a character starts at every byte that is not a
    continuation byte (``10xxxxxx``). Each step adds the characters still missing as bytes,
    so a mostly-ASCII text takes one or two steps over about ``chars`` bytes.
    """
    arr = np.frombuffer(data, dtype=np.uint8)
    pos = got = 0
    while got < chars and pos < len(arr):
        step = min(chars - got, len(arr) - pos)
        got += step - int(np.count_nonzero((arr[pos : pos + step] & 0xC0) == 0x80))
        pos += step
    while pos < len(arr) and arr[pos] & 0xC0 == 0x80:  # the rest of the last character
        pos += 1
    return pos


def utf8_tail_bytes(data: bytes, chars: int) -> int:
    """Bytes that the last ``chars`` characters of UTF-8 ``data`` take (``len(text[-chars:].encode())``),
    counted back from the end as ``utf8_offset`` counts forward."""
    arr = np.frombuffer(data, dtype=np.uint8)
    pos, got = len(arr), 0
    while got < chars and pos > 0:
        step = min(chars - got, pos)
        got += step - int(np.count_nonzero((arr[pos - step : pos] & 0xC0) == 0x80))
        pos -= step
    while pos < len(arr) and arr[pos] & 0xC0 == 0x80:  # the tail of a character that starts before
        pos += 1
    return len(arr) - pos


# -- detection -------------------------------------------------------------------------------------

_PYTEST_SUMMARY = re.compile(r"^=+ .*\b(?:passed|failed|error|errors|skipped|xfailed|deselected|no tests ran)\b.* in [\d.]+s.*=+$", re.M)
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in [\d.]+s$", re.M)
_UNITTEST_RESULT = re.compile(r"^(?:OK|FAILED)(?: \(.*\))?$", re.M)
_TEST_LINE = re.compile(r"^(?:FAILED|ERROR|FAIL:|ERROR:|XPASS|PASSED) |^(?:FAIL|ERROR): \w", re.M)
_GREP_LINE = re.compile(r"^[^\s:]+:\d+[:-]")
_PATH_LINE = re.compile(r"^\.{0,2}/?[\w.@+\-]+(?:/[\w.@+\-]+)+/?$|^[\w.@+\-]+\.\w{1,6}$")
_DIFF = re.compile(r"^(?:diff --git |--- a/|\+\+\+ b/|@@ -\d)", re.M)
_LOG_LEVEL = re.compile(r"\b(CRITICAL|FATAL|ERROR|WARN(?:ING)?|INFO|DEBUG|TRACE)\b")
_CODE_LINE = re.compile(
    r"^\s*(?:(?:async\s+)?def |class |import |from \S+ import |function |const |let |var |export |"
    r"func |package |type \w+ |fn |pub |impl |struct |enum |#include|public |private |protected |static |return\b|if .*[:{]$|\}|@\w)"
)
_NUMBERED = re.compile(r"^\s*\d+[\t:│|] ?")


@functools.lru_cache(maxsize=8)  # detection and the test outline read the same tail
def _test_summaries(tail: str) -> tuple[list[str], list[str]]:
    """The pytest summary lines and unittest ``Ran N tests`` counts in the tail of a text."""
    return _PYTEST_SUMMARY.findall(tail), _UNITTEST_RAN.findall(tail)


def detect_kind(text: str, command: str | None = None, utf8: Utf8Text | None = None) -> str:
    """Name what ``text`` is: binary, json, jsonl, test, diff, grep, paths, log, code, table or text.

    ``utf8`` (``Utf8Text.of(text, text.encode())``), when given, runs the literal searches on the
    bytes: the same answer, faster.
    """
    return _detect_kind(text, command, utf8)


def _detect_kind(text: str, command: str | None, u: Utf8Text | None) -> str:
    sample = text[:16_000]
    if "\x00" in sample or sample.count("\ufffd") > max(8, len(sample) // 50):
        return "binary"
    stripped = sample.lstrip()
    if stripped[:1] in "{[":
        if _json_or_none(text) is not None:
            return "json"
        first = [ln for ln in sample.splitlines()[:20] if ln.strip()]
        if len(first) >= 2 and all(ln.lstrip().startswith("{") for ln in first[:-1]):
            try:
                json.loads(first[0])
                return "jsonl"
            except (ValueError, RecursionError):
                pass
    summary, ran = _test_summaries(text[-8000:])
    if summary or ran or _test_lines_in_head(text, u) or read_test_run(text[-8000:]) is not None:
        return "test"
    if len(_DIFF.findall(sample)) >= 2:
        return "diff"
    lines = [ln for ln in sample.splitlines()[:200] if ln.strip()]
    if not lines:
        return "text"
    n = len(lines)
    if n >= 2 and _at_least(lines, 0.6 * n, _GREP_LINE.match):
        return "grep"
    if n >= 3 and _at_least(lines, 0.7 * n, lambda ln: _PATH_LINE.match(ln.strip())):
        return "paths"
    if _in_head(text, u, _TRACEBACK) or _at_least(lines, 0.3 * n, _LOG_LEVEL.search):
        return "log"
    if n >= 5:
        def codeish(ln: str) -> object:
            return _CODE_LINE.match(_NUMBERED.sub("", ln, count=1))

        if _at_least(lines, 0.15 * n, codeish) or (_at_least(lines, 0.8 * n, _NUMBERED.match)
                                                    and _at_least(lines, 1, codeish)):
            return "code"
    if _table_columns(lines) is not None:
        return "table"
    return "text"




def _at_least(lines: list[str], share: float, test: Callable[[str], object]) -> bool:
    """``sum(1 for ln in lines if test(ln)) >= share``, stopping as soon as the answer is known (detection
    counts line shapes over up to 200 lines several times; most counts are settled early)."""
    need = math.ceil(share)  # a count of lines is at least ``share`` exactly when it is at least this
    if need <= 0:
        return True
    left = len(lines)
    for ln in lines:
        if test(ln):
            need -= 1
            if not need:
                return True
        left -= 1
        if left < need:
            return False
    return False


def _in_head(text: str, u: Utf8Text | None, needle: str) -> bool:
    """``needle in text[:WINDOW_HEAD]``."""
    if u is None:
        return needle in text[:WINDOW_HEAD]
    nb = needle.encode()
    if needle == _TRACEBACK:  # at a hit of "traceback" (lower-cased), from the scan
        end = u.head_end - len(nb)
        return any(p <= end and u.data.startswith(nb, p) for p in u.occurrences(0, "traceback", fold=True))
    return u.data.find(nb, 0, u.head_end) >= 0


def _test_lines_in_head(text: str, u: Utf8Text | None) -> bool:
    """A pytest banner, or at least two test-result lines, in the head window."""
    if _in_head(text, u, "test session starts"):
        return True
    if u is not None:
        hits = _literal_line_starts_utf8(u, _TEST_NEEDLES, 4, head_only=True)
        if hits is not None:
            return sum(1 for p in hits if _TEST_LINE.match(u.line_at(p, u.head_end))) >= 2
    head = text[:WINDOW_HEAD]
    return sum(1 for p in _literal_line_starts(head, _TEST_NEEDLES, 4) if _TEST_LINE.match(_line_at(head, p))) >= 2


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):  # nested deeper than the parser goes: not a JSON document to outline
        return None


# -- builders --------------------------------------------------------------------------------------

def build_outline(
    text: str, budget: int = 160, command: str | None = None, kind: str | None = None, utf8: Utf8Text | None = None
) -> Outline:
    """The outline of ``text`` within ``budget`` tokens (kind detected unless given).

    ``utf8``: the text's bytes (see ``detect_kind``): the same outline, faster.
    """
    u = utf8
    kind = kind or _detect_kind(text, command, u)
    if kind == "text":  # keep both ends: fewer head/tail lines rather than losing the tail
        for n in (6, 4, 3, 2, 1):
            out = _text(text, n, max(1, n - 2))
            if sum(estimate_tokens(ln) + 1 for ln in out.lines) <= budget:
                break
        out.lines = _fit(out.lines, budget)
        return out
    if kind == "json":  # fitted to the budget by its builder
        return _json(text, budget)
    if u is not None and kind == "test":
        out = _test(text, u)
    elif u is not None and kind == "log":
        out = _log(text, u)
    else:
        out = _BUILDERS.get(kind, _text)(text)
    out.kind = kind
    out.lines = _fit(out.lines, budget)
    return out


def _text(text: str, n_head: int = 6, n_tail: int = 4) -> Outline:
    lines = _Lines(text)
    rows = lines.head
    if lines.total <= n_head + n_tail + 2 and lines.complete:
        shown = [_clip(s) for s in rows]
    else:
        tail = lines.tail or rows[len(rows) - min(len(rows), n_tail) :]
        first = [f"{i}: {_clip(s, 160)}" for i, s in enumerate(rows[:n_head], 1) if s.strip()]
        start = lines.total - len(tail[-n_tail:]) + 1
        last = [f"{start + i}: {_clip(s, 160)}" for i, s in enumerate(tail[-n_tail:]) if s.strip()]
        shown = [*first, "…", *last]
    return Outline("text", shown, [{"op": "range", "start": 1, "end": min(lines.total, 80)}])


def _test(text: str, u: Utf8Text | None = None) -> Outline:
    run = read_test_run(text)
    if run is not None:  # the runner's own summary line, then each failing test and its first error line
        return _test_run(text, run, u)
    out: list[str] = []
    facts: dict[str, Any] = {}
    tail = text[-8000:]
    summary, ran = _test_summaries(tail)
    if summary:
        out.append(_clip(summary[-1].strip("= ")))
        facts["summary"] = summary[-1].strip("= ")
    if ran:
        res = _UNITTEST_RESULT.findall(tail)
        line = f"Ran {ran[-1]} tests" + (f": {res[-1]}" if res else "")
        out.append(line)
        facts["summary"] = line
    failures: list[str] = []
    seen: set[str] = set()
    needles = _FAIL_NEEDLES
    starts = _literal_line_starts_utf8(u, needles, 400) if u is not None else None
    line_at: Callable[[int], str] = u.line_at if starts is not None and u is not None else lambda p: _line_at(text, p)
    if starts is None:
        starts = _literal_line_starts(text, needles, 400)
    for pos in starts:
        line = line_at(pos)
        if line in seen or not _TEST_LINE.match(line):
            continue
        seen.add(line)
        failures.append(line)
    facts["failures"] = len(failures)
    out.extend(_clip(f, 200) for f in failures[:25])
    errors = _first_error_lines(text, 6, u)
    out.extend(f"{n}: {_clip(s, 200)}" for n, s in errors if not any(s.strip() in f for f in failures[:25]))
    hints: list[dict[str, Any]] = [{"op": "grep", "pattern": r"^(FAILED|ERROR|FAIL:)|^E  ", "context": 0}]
    if errors:
        hints.append({"op": "range", "start": max(1, errors[0][0] - 20), "end": errors[0][0] + 5})
    return Outline("test", out or _text(text).lines, hints, facts)


def _test_run(text: str, run: TestRun, u: Utf8Text | None) -> Outline:
    """The outline of a run its runner summarised: what failed comes before anything else (see testrun.py)."""
    out = [f"{run.runner}: {run.summary}"]
    for name, error in run.failures:  # a long one: the name on a line of its own (a tight budget keeps it)
        line = f"FAILED {name}" + (f" - {error}" if error else "")
        if len(line) <= 120:
            out.append(line)
        else:
            out.append(f"FAILED {_clip(name, 120)}")
            out.extend([f"  {_clip(error, 120)}"] if error else [])
    if not run.failures and run.failed:  # failures the runner counted but did not name in a form we read
        errors = _first_error_lines(text, 6, u)
        out.extend(f"{n}: {_clip(s, 200)}" for n, s in errors)
    hints: list[dict[str, Any]] = [{"op": "grep", "pattern": r"FAIL|ERROR|✖|not ok|panicked|Error", "context": 2}]
    return Outline("test", out, hints, run.facts())


_ERROR_LINE = re.compile(
    r"^(?:E\s{2,}.*|\w+(?:\.\w+)*(?:Error|Exception|Warning|Interrupt|Exit)\b.*|.*\b(?:ERROR|FATAL|CRITICAL|panic:)\b.*|"
    r"Traceback \(most recent call last\):|.*error(?:\[\w+\])?: .*)$"
)


def _regions(n: int) -> list[tuple[int, int]]:
    """Where whole-payload searches look: everything, or the head and tail windows of a big payload."""
    if n <= WINDOW_HEAD + WINDOW_TAIL:
        return [(0, n)]
    return [(0, WINDOW_HEAD), (n - WINDOW_TAIL, n)]


@functools.lru_cache(maxsize=32)
def _line_start_rx(needles: tuple[str, ...]) -> re.Pattern[str] | None:
    """``\\n(needle|...)``: one scan finds every needle at a line start (a literal first character
    lets the regex engine skip ahead fast). None when one needle is a prefix of another (then one
    alternative could hide another's hit at the same position)."""
    if not needles or any("\n" in a or (a != b and b.startswith(a)) for a in needles for b in needles):
        return None
    return re.compile("\n(" + "|".join(re.escape(n) for n in needles) + ")")


def _literal_line_starts(text: str, needles: tuple[str, ...], cap: int) -> list[int]:
    """Positions of needles that start a line, in text order (at most ``cap`` per needle and window)."""
    rx = _line_start_rx(needles)
    if rx is not None:
        hits: list[int] = []
        for lo, hi in _regions(len(text)):
            seen = dict.fromkeys(needles, 0)
            for needle in needles:  # a needle at the very start of the window's text
                if lo == 0 and text.startswith(needle):
                    hits.append(0)
                    seen[needle] += 1
            for m in rx.finditer(text, max(lo - 1, 0), hi):
                needle = m.group(1)
                if seen[needle] < cap:
                    seen[needle] += 1
                    hits.append(m.start(1))
        return sorted(set(hits))
    found: list[int] = []
    for lo, hi in _regions(len(text)):
        for needle in needles:
            i = text.find(needle, lo, hi)
            mine = 0
            while i >= 0 and mine < cap:
                if i == 0 or text[i - 1] == "\n":
                    found.append(i)
                    mine += 1
                i = text.find(needle, i + 1, hi)
    return sorted(set(found))


def _literal_line_starts_utf8(u: Utf8Text, needles: tuple[str, ...], cap: int, head_only: bool = False) -> list[int] | None:
    """``_literal_line_starts`` on the bytes (of the head window only when ``head_only``): the
    byte offsets of the same hits, from the one scan (None: needles the scan does not cover)."""
    if _line_start_rx(needles) is None or any(n not in _LINE_NEEDLES for n in needles):
        return None
    hits: list[int] = []
    for r, (lo, hi) in enumerate(u.regions[:1] if head_only else u.regions):
        if head_only:
            hi = u.head_end
        for needle in needles:
            nb = needle.encode()
            mine = [0] if lo == 0 and u.data.startswith(nb, 0, hi) else []
            end = hi - len(nb) - 1  # the newline at p, the needle within the window
            mine.extend(p + 1 for p in u.occurrences(r, "\n" + needle, fold=False) if p <= end)
            hits.extend(mine[:cap])
    return sorted(set(hits))


def _first_error_lines_utf8(u: Utf8Text, limit: int) -> list[tuple[int, str]]:
    """``_first_error_lines`` on the bytes (same lines, same numbers).

    The needles' occurrences come from the one scan of the windows (lower-cased for an ASCII
    text, as the ``str`` version searches it; exact for any other text).
    """
    data = u.data
    positions: list[int] = []
    for r, (lo, hi) in enumerate(u.regions):
        for needle in _ERROR_NEEDLES:
            occ = u.occurrences(r, needle, fold=u.ascii)  # ASCII text is searched lower-cased
            start = lo
            j = 0
            mine = 0
            while mine < 150:  # hay.find(needle, start, hi), then on from the end of its line
                mine += 1
                j = bisect.bisect_left(occ, start, j)
                if j >= len(occ):
                    break
                i = occ[j]
                positions.append(i)
                start = data.find(b"\n", i, hi)
                if start < 0:
                    break

    def numbers(pos: list[int]) -> dict[int, int]:
        out: dict[int, int] = {}
        line, last = 1, 0
        for p in sorted(set(pos)):
            line += newlines(data, last, p)
            out[p] = line
            last = p
        return out

    first_on_line: list[int] = []  # several needles often hit one line: read each line once
    for p in sorted(set(positions)):
        if first_on_line and data.find(b"\n", first_on_line[-1], p) < 0:
            continue
        first_on_line.append(p)
    return _rank_error_lines(first_on_line, limit, u.line_at, numbers)


def _first_error_lines(text: str, limit: int, u: Utf8Text | None = None) -> list[tuple[int, str]]:
    """(line number, line) of distinct error-looking lines, found by literal search."""
    if u is not None:
        return _first_error_lines_utf8(u, limit)
    hay = text.lower() if text.isascii() else text
    positions: list[int] = []
    for lo, hi in _regions(len(hay)):  # the head and the tail (final exception) of big payloads
        for needle in _ERROR_NEEDLES:
            start = lo
            mine = 0
            while mine < 150:  # enough to find the distinct ones; a megabyte of errors is not re-read
                mine += 1
                i = hay.find(needle, start, hi)
                if i < 0:
                    break
                positions.append(i)
                start = hay.find("\n", i, hi)
                if start < 0:
                    break
    return _rank_error_lines(positions, limit, lambda pos: _line_at(text, pos),
                             lambda pos: _line_numbers(text, pos))


def _rank_error_lines(positions: list[int], limit: int, line_at: Callable[[int], str],
                      line_numbers: Callable[[list[int]], dict[int, int]]) -> list[tuple[int, str]]:
    """The distinct error lines at ``positions``, final exceptions first, with their line numbers."""
    found: dict[str, int] = {}
    rejected: set[str] = set()  # several needles often hit one line: match it once
    for pos in sorted(set(positions)):
        line = line_at(pos)
        key = line.strip()
        if key in found or key in rejected:
            continue
        if not _ERROR_LINE.match(key):
            rejected.add(key)
            continue
        found[key] = pos
        if len(found) >= limit * 4:
            break
    ranked = sorted(found.items(), key=lambda kv: kv[1])
    # prefer the final exception lines over "Traceback" headers
    chosen = [kv for kv in ranked if not kv[0].startswith("Traceback")][:limit] or ranked[:limit]
    numbers = line_numbers([pos for _, pos in chosen])
    return [(numbers[pos], line) for line, pos in chosen]


def _log(text: str, u: Utf8Text | None = None) -> Outline:
    lines = _Lines(text)
    levels: Counter[str] = Counter()
    for _, s in lines.numbered():
        m = _LOG_LEVEL.search(s)
        if m:
            levels[m.group(1).replace("WARNING", "WARN")] += 1
    out = [f"{lines.total} lines" + ("" if not levels else ", levels " + ", ".join(f"{k}={v}" for k, v in levels.most_common()))]
    errors = _first_error_lines(text, 8, u)
    out.extend(f"{n}: {_clip(s, 200)}" for n, s in errors)
    if not errors:
        out.extend(_text(text).lines)
    hints: list[dict[str, Any]] = [{"op": "aggregate", "pattern": r"(?i)error|exception|fail"}]
    if errors:
        hints.append({"op": "range", "start": max(1, errors[-1][0] - 15), "end": errors[-1][0] + 3})
    return Outline("log", out, hints, {"levels": dict(levels), "errors": len(errors)})


_PY_SYM = re.compile(r"^(\s*)(?:async\s+)?(def|class)\s+(\w+)")
_OTHER_SYM = re.compile(
    r"^(\s*)(?:export\s+)?(?:default\s+)?(?:pub(?:\(\w+\))?\s+)?(?:async\s+)?"
    r"(function\*?|class|interface|func|fn|struct|enum|trait|impl|type|const|module)\s+([A-Za-z_$][\w$]*)"
)


def _code(text: str) -> Outline:
    lines = _Lines(text)
    syms: list[tuple[int, int, str]] = []
    for n, raw in lines.numbered():
        s = raw
        m0 = _NUMBERED.match(s)
        if m0:
            num = re.match(r"\s*(\d+)", s)
            n = int(num.group(1)) if num else n
            s = s[m0.end() :]
        m = _PY_SYM.match(s) or _OTHER_SYM.match(s)
        if m:
            depth = len(m.group(1).expandtabs(4)) // 4
            syms.append((n, depth, f"{m.group(2)} {m.group(3)}"))
    out = [f"{lines.total} lines, {len(syms)} symbols"]
    # top-level symbols first, nested ones while the budget lasts (order kept by line)
    top = [s for s in syms if s[1] == 0]
    nested = [s for s in syms if s[1] > 0]
    chosen = sorted(top[:60] + nested[: max(0, 80 - len(top[:60]))])
    out.extend(f"{n}: {'  ' * min(d, 3)}{name}" for n, d, name in chosen)
    hints: list[dict[str, Any]] = [{"op": "range", "start": 1, "end": min(lines.total, 60)}]
    if syms:
        hints.append({"op": "grep", "pattern": r"^\s*(def|class) ", "context": 0})
    return Outline("code", out, hints, {"symbols": len(syms)})


def _grep(text: str) -> Outline:
    lines = _Lines(text)
    files: Counter[str] = Counter()
    for _, s in lines.numbered():
        m = _GREP_LINE.match(s)
        if m:
            files[s.split(":", 1)[0]] += 1
    out = [f"{lines.total} matching lines in {len(files)}{'+' if not lines.complete else ''} files"]
    out.extend(f"{c:>4} {f}" for f, c in files.most_common(30))
    return Outline("grep", out, [{"op": "grep", "pattern": "<path or word>", "context": 0}], {"files": len(files)})


def _paths(text: str) -> Outline:
    lines = _Lines(text)
    dirs: Counter[str] = Counter()
    exts: Counter[str] = Counter()
    for _, s in lines.numbered():
        s = s.strip()
        d, _, base = s.rpartition("/")
        dirs[d or "."] += 1
        if "." in base:
            exts[base.rsplit(".", 1)[1]] += 1
    out = [f"{lines.total} paths in {len(dirs)} directories; types " + ", ".join(f".{e}={c}" for e, c in exts.most_common(6))]
    out.extend(f"{c:>4} {d}/" for d, c in dirs.most_common(20))
    return Outline("paths", out, [{"op": "grep", "pattern": "<name>", "context": 0}], {"paths": lines.total})


def _diff(text: str) -> Outline:
    lines = _Lines(text)
    files: dict[str, list[int]] = {}
    current = "?"
    for _, s in lines.numbered():
        if s.startswith("+++ "):
            current = s[4:].removeprefix("b/")
            files.setdefault(current, [0, 0, 0])
        elif s.startswith("@@"):
            files.setdefault(current, [0, 0, 0])[2] += 1
        elif s.startswith("+") and not s.startswith("+++"):
            files.setdefault(current, [0, 0, 0])[0] += 1
        elif s.startswith("-") and not s.startswith("---"):
            files.setdefault(current, [0, 0, 0])[1] += 1
    out = [f"diff: {len(files)} files"]
    out.extend(f"{f}: +{a} -{r} in {h} hunks" for f, (a, r, h) in list(files.items())[:30])
    return Outline("diff", out, [{"op": "grep", "pattern": r"^(\+\+\+|@@)", "context": 0}], {"files": len(files)})


def _shape(value: Any, depth: int = 0, types: bool = True) -> str:
    """``{items: [50 × {id: int, name: str}]}``; without ``types`` only the structure and key names
    (``{items: [50 × {id, name}]}``: a third shorter, for a tight budget)."""
    if isinstance(value, dict):
        if depth >= 3:  # deep: the key names of a small object still (an agent's next arguments use them)
            return "{" + ", ".join(map(str, value)) + "}" if len(value) <= 8 else f"{{{len(value)} keys}}"
        items = list(value.items())
        inner = ", ".join(f"{k}: {_shape(v, depth + 1, types)}" if types or isinstance(v, dict | list) else str(k)
                          for k, v in items[:12])
        more = f", +{len(items) - 12} keys" if len(items) > 12 else ""
        return "{" + inner + more + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return f"[{len(value)} × {_shape(value[0], depth + 1, types)}]"
    if isinstance(value, str):
        return "str" if len(value) < 60 else f"str({len(value)})"
    if value is None:
        return "null"
    return type(value).__name__


_ID_KEY = re.compile(r"(?i)(?:^|_)(?:id|ids|number|code|key|name|status|type)$")


def _identifiers(value: Any, out: dict[str, list[str]], depth: int = 0) -> None:
    """Values of identifier-like keys (``*_id``, ``*_number``, ``name``, ``status`` ...), in document order.

    An API agent acts on these next (book flight HAT136, cancel reservation OBUT9V), so the
    stub carries them and the agent rarely needs a recall for them.
    """
    if depth > 4:
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, str | int) and not isinstance(v, bool) and _ID_KEY.search(str(k)):
                vals = out.setdefault(str(k), [])
                sv = str(v)[:60]
                if sv not in vals:
                    vals.append(sv)
            elif _token_list(v):  # "reservations": ["3FRNFB", "Q4L9HS"]: a list of names or codes
                vals = out.setdefault(str(k), [])
                vals.extend(s for s in map(str, v) if s not in vals)
            elif isinstance(v, dict | list):
                _identifiers(v, out, depth + 1)
    elif isinstance(value, list):
        for item in value[:500]:
            _identifiers(item, out, depth + 1)


def _token_list(value: Any) -> bool:
    """A non-empty list of short single-token strings (codes, names, tags), not prose or numbers."""
    return (isinstance(value, list) and 0 < len(value) <= 200
            and all(isinstance(v, str) and 0 < len(v) <= 40 and not any(c.isspace() for c in v) for v in value))


def _json(text: str, budget: int = 160) -> Outline:
    value = _json_or_none(text)
    out: list[str] = []
    ids: dict[str, list[str]] = {}
    _identifiers(value, ids)
    # identifiers first: an API agent acts on them next (the flight to book, the reservation to
    # open); codes (values with digits: HAT271, 3FRNFB, credit_card_4065275) before names and states
    for key, vals in sorted(ids.items(), key=lambda kv: not any(ch.isdigit() for v in kv[1] for ch in v)):
        shown = ", ".join(vals[:40]) + (f", … (+{len(vals) - 40})" if len(vals) > 40 else "")
        out.append(f"{key}: {shown}")
    shape = _clip(_shape(value), 400)
    if _cost([*out, shape]) <= budget:
        keys = ["keys: " + ", ".join(list(value)[:40])] if isinstance(value, dict) else []
        out = _fit([*out, shape, *keys], budget)
    else:  # the key names always stay (without their types); the identifiers get the rest
        shape = _clip(_shape(value, types=False), 400)
        out = [*_fit(out, budget - _cost([shape])), shape] if out else [shape]
    return Outline("json", out, [{"op": "jsonl", "path": "<field.path>"}], {"type": type(value).__name__})


def _jsonl(text: str) -> Outline:
    lines = _Lines(text)
    keys: Counter[str] = Counter()
    first: Any = None
    bad = 0
    for _, s in lines.numbered():
        if not s.strip():
            continue
        try:
            rec = json.loads(s)
        except (ValueError, RecursionError):
            bad += 1
            continue
        if first is None:
            first = rec
        if isinstance(rec, dict):
            keys.update(rec.keys())
    out = [f"{lines.total} records" + (f" ({bad} not JSON)" if bad else "")]
    out.append("fields: " + ", ".join(f"{k}({c})" for k, c in keys.most_common(30)))
    if first is not None:
        out.append("first: " + _clip(_shape(first), 400))
    return Outline("jsonl", out, [{"op": "jsonl", "where": {"<field>": "<value>"}, "fields": ["<field>"]}])


def _table_columns(lines: list[str]) -> list[str] | None:
    rows = lines[:50]
    if len(rows) < 3:
        return None
    for sep in ("\t", ",", "|", ";"):
        counts = [r.count(sep) for r in rows]
        if counts[0] >= 1 and sum(1 for c in counts if c == counts[0]) >= 0.9 * len(counts):
            return [c.strip() for c in rows[0].split(sep)]
    widths = [len(r.split()) for r in rows]
    common, count = Counter(widths).most_common(1)[0]
    aligned = sum(1 for r in rows if "  " in r.strip())  # columns padded with runs of spaces, not prose
    if common >= 3 and count >= 0.8 * len(widths) and aligned >= 0.6 * len(rows):
        return next(r.split() for r in rows if len(r.split()) == common)
    return None


def _table(text: str) -> Outline:
    lines = _Lines(text)
    cols = _table_columns([ln for ln in lines.head if ln.strip()]) or []
    out = [f"{max(0, lines.total - 1)} rows × {len(cols)} columns", "columns: " + ", ".join(_clip(c, 40) for c in cols[:40])]
    if len(lines.head) > 1:
        out.append("row 1: " + _clip(lines.head[1], 200))
    return Outline("table", out, [{"op": "grep", "pattern": "<value>", "context": 0}], {"columns": len(cols)})


def _binary(text: str) -> Outline:
    return Outline("binary", [f"binary payload ({len(text)} characters decoded); recall op=range unit=bytes"], [
        {"op": "range", "unit": "bytes", "start": 0, "end": 512}
    ])


_BUILDERS: dict[str, Callable[[str], Outline]] = {
    "text": _text, "test": _test, "log": _log, "code": _code, "grep": _grep, "paths": _paths,
    "diff": _diff, "json": _json, "jsonl": _jsonl, "table": _table, "binary": _binary,
}
KINDS = tuple(_BUILDERS)
