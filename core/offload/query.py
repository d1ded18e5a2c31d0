"""Server-side reads of a stored payload: only the requested part leaves.

Every answer is bounded (``max_bytes`` and ``max_tokens``) and says what was
cut, so a recall can never flood the prompt it was meant to keep small.
"""

from __future__ import annotations

import importlib
import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import regex

from bosun.core.errors import InvalidInput
from bosun.core.offload.offload import count_lines
from bosun.core.offload.outline import KINDS, build_outline, newlines
from bosun.core.tokens import estimate_tokens

DEFAULT_MAX_TOKENS = 2_000
HARD_MAX_BYTES = 1_000_000
GREP_TIME_BUDGET_S = 0.5
MAX_PATTERN_CHARS = 1_000
OPS = ("raw", "head", "tail", "range", "grep", "outline", "aggregate", "jsonl")
MAX_JSONL_RECORDS = 200_000


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
    # a text of at most max_tokens UTF-8 bytes fits without counting: no piece is estimated above one
    # token per UTF-8 byte (core/tokens.py's COSTS and RATE; tested), and counting a short answer
    # (every small recall: ~40 us for 5 lines) costs more than the rest of the query
    if len(encoded) <= max_bytes and (len(encoded) <= max_tokens or estimate_tokens(text) <= max_tokens):
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
    where: dict[str, Any] | None = None,
    fields: list[str] | None = None,
    path: str | None = None,
    kind: str | None = None,
) -> QueryResult:
    """Apply one read operation to ``data``; raises InvalidInput naming the bad field."""
    _check_limits(max_bytes, max_tokens)
    if op == "grep":  # decodes only what it shows when the payload is plain ASCII
        return _grep(data, pattern, context, max_matches, ignore_case, max_bytes, max_tokens)
    if op in ("head", "tail"):
        if not isinstance(lines, int) or lines < 1:
            raise InvalidInput("lines", f"must be a positive integer, got {lines!r}")
        if newline_only(data):  # the lines at one end, cut from the bytes: no decode and split of the whole
            edge, total = edge_lines(data, op, lines)
            body, cut = bound(edge, max_bytes, max_tokens)
            return _result(body, data, total, cut or min(lines, total) < total, op)
    text = decode(data)
    if op == "outline":
        return _outline(data, text, kind, max_bytes, max_tokens)
    if op == "aggregate":
        return _aggregate(data, text, pattern, ignore_case, max_matches, max_bytes, max_tokens)
    if op == "jsonl":
        return _jsonl(data, text, where, fields, path, max_matches, max_bytes, max_tokens)
    all_lines = text.splitlines(keepends=True)
    total = len(all_lines)
    if op == "raw":
        body, cut = bound(text, max_bytes, max_tokens)
        return _result(body, data, total, cut, "raw")
    if op in ("head", "tail"):
        chosen = all_lines[:lines] if op == "head" else all_lines[-lines:]
        body, cut = bound("".join(chosen), max_bytes, max_tokens)
        return _result(body, data, total, cut or len(chosen) < total, op)
    if op == "range":
        return _range(data, text, all_lines, start, end, unit, max_bytes, max_tokens)
    raise InvalidInput("op", f"unknown operation {op!r}", ", ".join(OPS))


# what ``str.splitlines`` breaks lines at besides "\n", as they occur in UTF-8 (U+0085, U+2028, U+2029)
_OTHER_BREAKS = (b"\r", b"\x0b", b"\x0c", b"\x1c", b"\x1d", b"\x1e")
_UTF8_BREAKS = (b"\xc2\x85", b"\xe2\x80\xa8", b"\xe2\x80\xa9")


def newline_only(data: bytes) -> bool:
    """Whether "\n" is the only line break ``decode(data).splitlines()`` would see (a few ``memchr``s).

    U+FFFD (undecodable bytes) is no break, and "\n" ends any broken sequence before it, so the bytes
    between newlines decode as the decoded text's lines do."""
    if any(b in data for b in _OTHER_BREAKS):
        return False
    return data.isascii() or not any(b in data for b in _UTF8_BREAKS)


def edge_lines(data: bytes, op: str, lines: int) -> tuple[str, int]:
    """(the first or last ``lines`` lines of ``data`` as ``head``/``tail`` show them, the line count), for data
    where ``newline_only`` holds: the same as joining ``decode(data).splitlines(keepends=True)[:lines]``
    (or ``[-lines:]``) and taking its length."""
    if not data:
        return "", 0
    total = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
    if op == "head":
        at = 0
        for _ in range(min(lines, total)):
            nl = data.find(b"\n", at)
            at = len(data) if nl < 0 else nl + 1
        return decode(data[:at]), total
    at = len(data) - (1 if data.endswith(b"\n") else 0)  # the last line's own newline is part of it
    start = 0
    for _ in range(min(lines, total)):
        nl = data.rfind(b"\n", 0, at)
        if nl < 0:
            start = 0
            break
        at, start = nl, nl + 1
    return decode(data[start:]), total


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


def compile_pattern(pattern: str | None, ignore_case: bool = False, field: str = "pattern") -> Any:
    """Compile a caller's regex (the ``regex`` engine, so every scan can carry a timeout)."""
    if not pattern:
        raise InvalidInput(field, "needs a non-empty regular expression")
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidInput(field, f"pattern is {len(pattern)} chars; the limit is {MAX_PATTERN_CHARS}")
    flags = regex.MULTILINE | (regex.IGNORECASE if ignore_case else 0)
    try:
        return regex.compile(pattern, flags)
    except (regex.error, ValueError, OverflowError) as exc:
        raise InvalidInput(field, f"invalid regular expression: {exc}") from exc


# Unicode properties, POSIX classes and named characters: (?i)\p{Lu} and (?i)[[:upper:]] match "a"
# in a str, not in bytes
_STR_ONLY = ("\\p", "\\P", "\\N", "[:")
# the non-ASCII characters an ASCII letter (or range of letters) matches case-insensitively in a str
# (found by testing every code point against (?i)[a-zA-Z] with the engine): İ ı ſ K (Kelvin sign)
_ASCII_FOLDS = tuple(chr(c).encode() for c in (0x130, 0x131, 0x17F, 0x212A))
UTF8_SCAN_ABOVE = 65_536  # bytes: a smaller non-ASCII payload decodes faster than the pattern is parsed
_SRE: Any = importlib.import_module("re._parser")  # the standard library's regex parser (no stub)
_SRE_FLAGS = re.IGNORECASE | re.MULTILINE | re.VERBOSE | re.UNICODE  # (?i) (?m) (?x) (?u) only


def bytes_pattern(pattern: str, ignore_case: bool, data: bytes) -> Any:
    r"""The pattern compiled for ``data``'s bytes when a scan of them finds exactly what a scan of the
    decoded text would (at the same offsets, as bytes), else None.

    That holds when payload and pattern are ASCII: every character is one byte, and the engine's
    classes (``\w \s \d \b``, ``.``, case folding) agree on all 128 ASCII characters in both
    modes; Unicode properties, POSIX classes and named characters (``(?i)\p{Lu}`` and
    ``(?i)[[:upper:]]`` also match "a" in a ``str``) and patterns the bytes engine refuses (``\u`` escapes, ``(?u)``) keep the ``str``
    scan. A payload with non-ASCII text (over 64 KB, ``utf8_safe``) takes the bytes scan too when every piece of the
    pattern matches ASCII characters only, so it can never match inside a multi-byte character.
    Skipping the decode, and counting line numbers with numpy, makes a grep over a megabyte faster.
    """
    if not pattern.isascii() or any(c in pattern for c in _STR_ONLY):
        return None
    if not data.isascii() and (len(data) < UTF8_SCAN_ABOVE or not utf8_safe(pattern, ignore_case, data)):
        return None
    flags = regex.MULTILINE | (regex.IGNORECASE if ignore_case else 0)
    try:
        return regex.compile(pattern.encode("ascii"), flags)
    except (regex.error, ValueError, OverflowError, TypeError):
        return None


def utf8_safe(pattern: str, ignore_case: bool, data: bytes) -> bool:
    r"""Whether ``pattern`` finds the same matches in UTF-8 ``data`` as in its decoded text.

    True when every piece of the pattern (parsed by the standard library's parser, which must
    accept it) matches ASCII characters only, one byte each: ASCII literals and classes of them
    (not negated), ``^ $ \A \Z``, groups, alternation, repeats, lookaheads/lookbehinds that consume;
    ``.`` only as a greedy ``.*`` or ``.+`` (a run of characters is a run of bytes between two
    character boundaries). None of these matches a byte of a multi-byte character, and a match cannot
    be empty, so every match starts and ends at the same character boundary in both scans. Out:
    ``\w \d \s \b``, negated classes, ``.`` elsewhere (one character is 1-4 bytes), back-references
    and negative lookarounds. Case-insensitive: only when the text holds none of the four
    non-ASCII characters an ASCII letter folds to.
    """
    try:
        parsed = _SRE.parse(pattern, re.MULTILINE | (re.IGNORECASE if ignore_case else 0))
    except (re.error, RecursionError, OverflowError, ValueError):
        return False
    if parsed.state.flags & ~_SRE_FLAGS or parsed.getwidth()[0] == 0:
        return False
    folds = [bool(parsed.state.flags & re.IGNORECASE)]
    if not _ascii_only(list(parsed), folds):
        return False
    return not folds[0] or not any(f in data for f in _ASCII_FOLDS)


def _ascii_only(items: list[tuple[Any, Any]], folds: list[bool]) -> bool:
    """``utf8_safe`` over parsed items (``folds[0]`` is set when a scoped ``(?i:...)`` occurs)."""
    c = _SRE
    for op, av in items:
        name = str(op)
        if name == "LITERAL":
            ok = av < 128
        elif name == "IN":
            ok = all(str(k) in ("LITERAL", "RANGE") and (v if str(k) == "LITERAL" else v[1]) < 128 for k, v in av)
        elif name == "AT":
            ok = str(av) in ("AT_BEGINNING", "AT_END", "AT_BEGINNING_STRING", "AT_END_STRING")
        elif name == "BRANCH":
            ok = all(_ascii_only(list(b), folds) for b in av[1])
        elif name == "SUBPATTERN":
            _group, add, remove, body = av
            if (add | remove) & ~_SRE_FLAGS:
                return False
            folds[0] = folds[0] or bool(add & re.IGNORECASE)
            ok = _ascii_only(list(body), folds)
        elif name in ("MAX_REPEAT", "MIN_REPEAT"):
            lo, hi, body = av
            body = list(body)
            if len(body) == 1 and str(body[0][0]) == "ANY":  # . only as a greedy run of one or more
                ok = name == "MAX_REPEAT" and lo <= 1 and hi == c.MAXREPEAT
            else:
                ok = _ascii_only(body, folds)
        elif name == "ASSERT":  # (?=x) (?<=x): must consume, so it fails inside a character
            ok = av[1].getwidth()[0] > 0 and _ascii_only(list(av[1]), folds)
        else:  # ANY, NOT_LITERAL, CATEGORY, GROUPREF, ASSERT_NOT, atomic and possessive forms ...
            ok = False
        if not ok:
            return False
    return True


_REPEATS = ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT", "GROUPREF", "GROUPREF_EXISTS")


def repeat_free(pattern: str) -> bool:
    """Whether ``pattern`` has no repeat and no back-reference, so one match attempt does work bounded
    by the pattern's length (no catastrophic backtracking). ``{`` is refused outright: the engine
    reads ``{e<=1}`` as fuzzy matching where the standard library's parser sees literals."""
    if "{" in pattern:
        return False
    try:
        parsed = _SRE.parse(pattern, re.MULTILINE)
    except (re.error, RecursionError, OverflowError, ValueError):
        return False
    stack: list[Any] = [list(parsed)]
    while stack:
        for op, av in stack.pop():
            if str(op) in _REPEATS:
                return False
            if str(op) == "BRANCH":
                stack.extend(list(b) for b in av[1])
            elif str(op) == "SUBPATTERN":
                stack.append(list(av[3]))
            elif str(op) in ("ASSERT", "ASSERT_NOT", "ATOMIC_GROUP"):
                stack.append(list(av[1] if str(op) != "ATOMIC_GROUP" else av))
    return True


def scan_lines(text: str | bytes, rx: Any, deadline: float,
               limit: int = 1_000_000) -> tuple[list[tuple[int, int, Any]], bool]:
    """(line start, 1-based line number, match) for each line with a match, and whether the scan finished.

    One engine scan over the whole text (no per-line Python loop), or, when every match must start
    at a literal (``^FAILED|Traceback``), one engine entry at each occurrence of it; either way
    bounded by the time left: a pattern that backtracks catastrophically stops at the deadline,
    never hangs. ``text`` may be bytes (with a bytes pattern): offsets are then byte offsets.
    """
    starts, complete = _scan_starts(text, rx, deadline, limit)
    if isinstance(text, bytes):
        return _numbered(text, starts), complete
    out: list[tuple[int, int, Any]] = []
    line_no, counted_to = 1, 0
    for start, m in starts:
        line_no += text.count("\n", counted_to, start)
        counted_to = start
        out.append((start, line_no, m))
    return out, complete


MAX_SEEDS = 4_096  # literal occurrences up to which a grep matches at each of them instead of scanning
_INLINE_FLAGS = re.compile(r"\(\?[-a-zA-OQ-Z^]")  # (?i), (?-i), (?x) ...; not (?: (?= (?P< (?<=
_LITERAL_CHAR = re.compile(r"[A-Za-z0-9_ :/=,'\"<>!@#%&;~-]|\\[^A-Za-z0-9]")


def branch_literals(pattern: str) -> list[str] | None:
    r"""The literal each top-level branch of ``pattern`` starts with (after ``^`` or ``\b``), or None.

    ``^FAILED|Traceback`` -> ``["FAILED", "Traceback"]``. Every match of such a pattern starts where
    one of these literals occurs, so a scan can try the pattern only there. None when a branch
    starts with anything else (a group, a class, a flag, a quantified character).
    """
    if _INLINE_FLAGS.search(pattern):  # a flag set mid-pattern could fold a literal's case
        return None
    out: list[str] = []
    for branch in _top_level_branches(pattern):
        i = 0
        while branch.startswith(("^", "\\b"), i):
            i += 1 if branch[i] == "^" else 2
        lit: list[str] = []
        while i < len(branch):
            m = _LITERAL_CHAR.match(branch, i)
            if m is None:
                break
            if m.end() < len(branch) and branch[m.end()] in "?*{+":  # quantified: not literal
                break
            lit.append(m.group()[-1])
            i = m.end()
        if not lit:
            return None
        out.append("".join(lit))
    return out


def _top_level_branches(pattern: str) -> list[str]:
    """``pattern`` split at the ``|`` that are outside groups, classes and escapes."""
    branches: list[str] = []
    depth, start, i, in_class = 0, 0, 0, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
            if pattern.startswith(("[]", "[^]"), i):  # a leading ] is a member
                i += 2 if pattern[i + 1] == "]" else 3
                continue
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "|" and depth == 0:
            branches.append(pattern[start:i])
            start = i + 1
        i += 1
    branches.append(pattern[start:])
    return branches


def _seeds(hay: str | bytes, literals: list[str], ignore_case: bool) -> list[int] | None:
    """Sorted offsets where one of ``literals`` occurs (case-folded when asked), or None past
    MAX_SEEDS, or for a case-folded search of non-ASCII text (folding could change its length; bytes
    fold their ASCII letters only)."""
    if isinstance(hay, bytes):
        return _byte_seeds(hay, [lit.encode() for lit in literals], ignore_case)
    if ignore_case and not hay.isascii():
        return None
    if ignore_case:
        hay = hay.lower()
    found: set[int] = set()
    for lit in literals:
        needle = lit.lower() if ignore_case else lit
        i = hay.find(needle)
        while i >= 0:
            found.add(i)
            if len(found) > MAX_SEEDS:
                return None
            i = hay.find(needle, i + 1)
    return sorted(found)


_FREQUENT_BYTES = b" etaoinsrlcdhupm\nfg.ybw,_/=-:()kv\"'x0123456789"  # in agent output, most frequent first


def _byte_seeds(data: bytes, literals: list[bytes], ignore_case: bool) -> list[int] | None:
    """``_seeds`` of bytes, with numpy: every occurrence of a literal's rarest byte, then its other
    bytes checked for all those candidates at once (a ``bytes.find`` loop reads the megabyte once
    per literal at about half a nanosecond a byte). Case-folded, a letter matches either case, as
    in ``data.lower()``; the offsets (overlaps included) are those of a ``find`` loop."""
    arr = np.frombuffer(data, dtype=np.uint8)
    folded = arr | 0x20 if ignore_case else arr
    found: list[np.ndarray] = []
    for lit in literals:
        lit = lit.lower() if ignore_case else lit
        n = len(arr) - len(lit)
        if n < 0:
            continue

        def rank(j: int, lit: bytes = lit) -> int:
            i = _FREQUENT_BYTES.find(lit[j : j + 1])
            return len(_FREQUENT_BYTES) if i < 0 else i

        k = max(range(len(lit)), key=rank)
        order = [k, *(j for j in range(len(lit)) if j != k)]
        sel: np.ndarray | None = None
        for j in order:
            ch = lit[j]
            src = folded if ignore_case and 97 <= ch <= 122 else arr  # a letter either case; others exactly
            if sel is None:
                sel = np.flatnonzero(src == ch) - j
                sel = sel[(sel >= 0) & (sel <= n)]
            else:
                sel = sel[src[sel + j] == ch]
            if not len(sel):
                break
        if sel is not None and len(sel):
            if len(sel) > MAX_SEEDS:  # the union is at least as large
                return None
            found.append(sel)
            if sum(len(f) for f in found) > MAX_SEEDS and len(np.unique(np.concatenate(found))) > MAX_SEEDS:
                return None
    if not found:
        return []
    return [int(x) for x in np.unique(np.concatenate(found)).tolist()]


def _scan_seeded(text: Any, rx: Any, seeds: list[int], deadline: float,
                 limit: int, bounded: bool = False) -> tuple[list[tuple[int, Any]], bool]:
    """``_scan_starts`` for a pattern whose matches can only start at ``seeds``: the same matches.

    ``finditer`` returns, from where the last match ended, the leftmost position at which the
    pattern matches; every match starts at a seed, so that is the first seed from there at which
    ``match`` succeeds, with the same match (the engine tries the same alternatives in the same
    order). One regex engine entry per seed instead of a scan of every character. ``bounded``: the
    pattern has no repeats (``repeat_free``), so a match attempt cannot run away and needs no engine
    timeout of its own (setting one up costs more than the match); the deadline is still checked
    before each seed.
    """
    nl = "\n" if isinstance(text, str) else b"\n"
    out: list[tuple[int, Any]] = []
    pos, line_end = 0, -1
    for c in seeds:
        if c < pos:
            continue
        left = deadline - time.perf_counter()
        if left <= 0:
            return out, False
        try:
            m = rx.match(text, c) if bounded else rx.match(text, c, timeout=left)
        except TimeoutError:
            return out, False
        if m is None:
            continue
        pos = max(m.end(), c + 1)  # never an empty match: every branch starts with a literal
        if c <= line_end:
            continue
        out.append((text.rfind(nl, 0, c) + 1, m))
        if len(out) >= limit:
            return out, False
        line_end = text.find(nl, c)
        if line_end < 0:
            break
    return out, True


def _scan_starts(text: Any, rx: Any, deadline: float, limit: int) -> tuple[list[tuple[int, Any]], bool]:
    """``scan_lines`` without the line numbers: (line start, match) per matching line."""
    pattern = rx.pattern if isinstance(rx.pattern, str) else rx.pattern.decode("ascii")
    literals = branch_literals(pattern)
    seeds = _seeds(text, literals, bool(rx.flags & regex.IGNORECASE)) if literals else None
    if seeds is not None:
        return _scan_seeded(text, rx, seeds, deadline, limit, repeat_free(pattern))
    nl = "\n" if isinstance(text, str) else b"\n"
    out: list[tuple[int, Any]] = []
    line_end = -1
    left = deadline - time.perf_counter()
    if left <= 0:
        return out, False
    try:
        for m in rx.finditer(text, timeout=left):
            if m.start() <= line_end:
                continue
            out.append((text.rfind(nl, 0, m.start()) + 1, m))
            if len(out) >= limit:
                return out, False
            line_end = text.find(nl, m.start())
            if line_end < 0:
                break
    except TimeoutError:
        return out, False
    return out, True


def _numbered(data: bytes, starts: list[tuple[int, Any]]) -> list[tuple[int, int, Any]]:
    """1-based line numbers for line starts in ``data`` (newlines before each, counted by numpy)."""
    if not starts:
        return []
    newlines = np.flatnonzero(np.frombuffer(data, dtype=np.uint8, count=starts[-1][0]) == 10)
    numbers = np.searchsorted(newlines, [s for s, _ in starts]) + 1
    return [(s, n, m) for (s, m), n in zip(starts, numbers.tolist(), strict=True)]


def _first_numbered(data: bytes, starts: list[tuple[int, Any]]) -> list[tuple[int, int, Any]]:
    """``_numbered`` for the first few line starts: the newlines before each counted span by span
    (numpy for long spans), reading the bytes only up to the last one."""
    out: list[tuple[int, int, Any]] = []
    line, last = 1, 0
    for start, m in starts:
        line += newlines(data, last, start)
        last = start
        out.append((start, line, m))
    return out


def _line(text: str, start: int) -> str:
    end = text.find("\n", start)
    return text[start : end if end >= 0 else len(text)]


def _grep(
    data: bytes, pattern: str | None, context: int, max_matches: int,
    ignore_case: bool, max_bytes: int, max_tokens: int,
) -> QueryResult:
    rx = compile_pattern(pattern, ignore_case)
    if not isinstance(context, int) or context < 0 or context > 50:
        raise InvalidInput("context", f"must be an integer in 0..50, got {context!r}")
    if not isinstance(max_matches, int) or max_matches < 1:
        raise InvalidInput("max_matches", f"must be a positive integer, got {max_matches!r}")
    deadline = time.perf_counter() + GREP_TIME_BUDGET_S
    rxb = bytes_pattern(pattern or "", ignore_case, data) if context == 0 else None
    text = "" if rxb is not None else decode(data)
    if rxb is not None:  # line numbers only for the lines shown (counting newlines up to each)
        starts, complete = _scan_starts(data, rxb, deadline, 1_000_000)
        matches = len(starts)
        hits = _first_numbered(data, starts[:max_matches])
    else:
        found, complete = scan_lines(text, rx, deadline)
        matches = len(found)
        hits = found[:max_matches]
    total_lines = count_lines(data)
    shown: list[str] = []
    if rxb is not None:  # each shown line decoded alone (as the whole text decodes), then cut as the str path would
        for start, no, m in hits:
            end = data.find(b"\n", start)
            line_bytes = data[start : end if end >= 0 else len(data)]
            line = line_bytes.decode("utf-8", "replace")
            shown.append(f"{no}:{_around(line, 0, _Shifted(m, start, line_bytes, len(line) == len(line_bytes)), rx)}\n")
    elif context == 0:
        shown = [f"{no}:{_around(text, start, m, rx)}\n" for start, no, m in hits]
    else:
        all_lines = text.splitlines()
        last = -1
        for _, no, _m in hits:
            i = no - 1
            lo, hi = max(0, i - context), min(len(all_lines), i + context + 1)
            if lo > last + 1 and shown:
                shown.append("--\n")
            for j in range(max(lo, last + 1), hi):
                sep = ":" if j == i else "-"
                shown.append(f"{j + 1}{sep}{_clip_line(all_lines[j])}\n")
            last = hi - 1
    body, cut = bound("".join(shown), max_bytes, max_tokens)
    notes = []
    if matches > len(hits):
        notes.append(f"{matches}{'' if complete else '+'} matching lines, showing {len(hits)} (raise max_matches)")
    if not complete:
        notes.append(f"scan stopped after {GREP_TIME_BUDGET_S}s (pattern too costly); narrow the pattern")
    if cut:
        notes.append("output cut to max_tokens/max_bytes")
    res = QueryResult(body, len(data), total_lines, len(hits), bool(notes), "; ".join(notes) or None)
    res.extra = {"matches": matches, "shown": len(hits), "complete": complete}
    return res


class _Shifted:
    """A bytes match whose ``start()`` is the character offset within its line (shown alone)."""

    def __init__(self, m: Any, base: int, line: bytes, ascii_line: bool) -> None:
        self._m, self._base, self._line, self._ascii = m, base, line, ascii_line

    def start(self) -> int:
        offset = int(self._m.start()) - self._base
        if self._ascii:
            return offset
        return len(self._line[:offset].decode("utf-8", "replace"))  # a match starts at a character boundary


LONG_LINE = 400  # a longer matching line (minified JSON, a log blob) is shown around the match only
AROUND = 160


def _around(text: str, start: int, m: Any, rx: Any) -> str:
    """The matching line, or for a long line windows around its first matches with their offsets."""
    line = _line(text, start)
    if len(line) <= LONG_LINE:
        return line
    spans: list[list[int]] = []
    try:
        for mm in rx.finditer(line, timeout=0.05):
            lo, hi = max(0, mm.start() - AROUND), min(len(line), mm.end() + AROUND)
            if spans and lo <= spans[-1][1]:
                spans[-1][1] = hi
            else:
                if len(spans) >= 5:
                    break
                spans.append([lo, hi])
    except TimeoutError:
        pass
    if not spans:  # the match spans a line break (e.g. \s+): show around where it starts
        lo = max(0, m.start() - start - AROUND)
        spans = [[lo, min(len(line), lo + 2 * AROUND)]]
    parts = [f"{'…' if lo else ''}{line[lo:hi]}{'…' if hi < len(line) else ''}" for lo, hi in spans]
    where = ", ".join(f"{lo}-{hi}" for lo, hi in spans)
    return " ".join(parts) + f" [chars {where} of {len(line)}]"


def _clip_line(line: str, n: int = 2_000) -> str:
    return line if len(line) <= n else line[:n] + f"… (+{len(line) - n} chars)"


def _outline(data: bytes, text: str, kind: str | None, max_bytes: int, max_tokens: int) -> QueryResult:
    if kind is not None and kind not in KINDS:
        raise InvalidInput("kind", f"unknown content kind {kind!r}", ", ".join(KINDS))
    ol = build_outline(text, budget=min(max_tokens, 4_000), kind=kind)
    body, cut = bound(ol.text, max_bytes, max_tokens)
    total = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    res = QueryResult(body, len(data), total, body.count("\n") + 1, cut, None)
    res.extra = {"kind": ol.kind, "recall": ol.hints}
    return res


_SIG_SUBS = (
    (re.compile(r"0x[0-9a-fA-F]+"), "0x?"),
    (re.compile(r"\b[0-9a-f]{7,64}\b"), "<hex>"),
    (re.compile(r"(['\"]).*?\1"), "'…'"),
    (re.compile(r"(?<=line )\d+|(?<=:)\d+(?=\b)"), "N"),
    (re.compile(r"\d+(?:\.\d+)?"), "N"),
    (re.compile(r"\s+"), " "),
)
_ERRORISH = re.compile(
    r"(?:^|\s)E\s{2,}|\b\w*(?:Error|Exception)\b|\b(?:ERROR|FATAL|CRITICAL|FAILED|FAIL|panic)\b|error(?:\[\w+\])?:",
)


def error_signature(line: str) -> str:
    """A line with its volatile parts (numbers, hex, quoted values) masked: one signature per error shape."""
    sig = line.strip()
    for rx, rep in _SIG_SUBS:
        sig = rx.sub(rep, sig)
    return sig[:200]


def _aggregate(
    data: bytes, text: str, pattern: str | None, ignore_case: bool, max_matches: int, max_bytes: int, max_tokens: int
) -> QueryResult:
    """Counts by pattern (distinct matches, or group 1), or distinct error signatures when no pattern."""
    if not isinstance(max_matches, int) or max_matches < 1:
        raise InvalidInput("max_matches", f"must be a positive integer, got {max_matches!r}")
    deadline = time.perf_counter() + GREP_TIME_BUDGET_S
    counts: Counter[str] = Counter()
    first_line: dict[str, int] = {}
    if pattern:
        rx = compile_pattern(pattern, ignore_case)
        found, complete = scan_lines(text, rx, deadline)
        for start, no, m in found:
            key = m.group(1) if m.re.groups and m.group(1) is not None else m.group(0)
            key = key.strip()[:200] or _line(text, start).strip()[:200]
            counts[key] += 1
            first_line.setdefault(key, no)
        what = f"lines matching {pattern!r}"
    else:
        found, complete = scan_lines(text, regex.compile(_ERRORISH.pattern, regex.MULTILINE), deadline)
        for start, no, _m in found:
            key = error_signature(_line(text, start))
            counts[key] += 1
            first_line.setdefault(key, no)
        what = "error lines"
    total = sum(counts.values())
    rows = [f"{c:>6}  L{first_line[k]}  {k}\n" for k, c in counts.most_common(max_matches)]
    head = f"{total}{'' if complete else '+'} {what}, {len(counts)} distinct\n"
    body, cut = bound(head + "".join(rows), max_bytes, max_tokens)
    n_lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    notes = []
    if len(counts) > max_matches:
        notes.append(f"showing {max_matches} of {len(counts)} distinct (raise max_matches)")
    if not complete:
        notes.append(f"scan stopped after {GREP_TIME_BUDGET_S}s; counts are partial")
    if cut:
        notes.append("output cut to max_tokens/max_bytes")
    res = QueryResult(body, len(data), n_lines, len(rows), bool(notes), "; ".join(notes) or None)
    res.extra = {"matches": total, "distinct": len(counts), "complete": complete}
    return res


_MISSING = object()


def field_path(record: Any, path: str) -> Any:
    """``a.b.0.c`` into nested dicts and lists; a missing step gives the sentinel ``_MISSING``."""
    cur = record
    for part in path.split("."):
        if isinstance(cur, dict):
            if part not in cur:
                return _MISSING
            cur = cur[part]
        elif isinstance(cur, list) and part.lstrip("-").isdigit():
            i = int(part)
            if not -len(cur) <= i < len(cur):
                return _MISSING
            cur = cur[i]
        else:
            return _MISSING
    return cur


def _equal(actual: Any, wanted: Any) -> bool:
    if actual is _MISSING:
        return False
    if isinstance(wanted, str) and not isinstance(actual, str):
        return json.dumps(actual) == wanted or str(actual) == wanted
    return bool(actual == wanted)


# what a JSON text starts with after its white space (Python's json also reads NaN and Infinity)
_JSON_STARTS = frozenset('{["-0123456789tfnNI')


def _records(text: str, path: str | None) -> tuple[list[Any], int]:
    """Records of a JSONL text, or of the list at ``path`` in a JSON document; and the bad-line count."""
    stripped = text.lstrip()
    if stripped.startswith("[") or (stripped.startswith("{") and path):
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            doc = _MISSING
        if doc is not _MISSING:
            target = field_path(doc, path) if path else doc
            if target is _MISSING:
                raise InvalidInput("path", f"{path!r} is not in this JSON document")
            if not isinstance(target, list):
                raise InvalidInput("path", f"{path or 'the document'} is a {type(target).__name__}, not a list")
            return target[:MAX_JSONL_RECORDS], 0
    out: list[Any] = []
    bad = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.lstrip(" \t\n\r")[:1] not in _JSON_STARTS:  # json.loads would fail: no exception to raise
            bad += 1  # (a text of 500,000 short lines took 3.9 s, one exception per line)
            continue
        try:
            out.append(json.loads(line))
        except (ValueError, RecursionError):
            bad += 1
        if len(out) >= MAX_JSONL_RECORDS:
            break
    return out, bad


def _jsonl(
    data: bytes, text: str, where: dict[str, Any] | None, fields: list[str] | None, path: str | None,
    max_matches: int, max_bytes: int, max_tokens: int,
) -> QueryResult:
    """Filter records by field-path equality (``where``) and project ``fields``."""
    if where is not None and not isinstance(where, dict):
        raise InvalidInput("where", "must be an object of {field.path: value}")
    if fields is not None and (not isinstance(fields, list) or not all(isinstance(f, str) and f for f in fields)):
        raise InvalidInput("fields", "must be a list of field paths such as ['id', 'user.name']")
    if not isinstance(max_matches, int) or max_matches < 1:
        raise InvalidInput("max_matches", f"must be a positive integer, got {max_matches!r}")
    records, bad = _records(text, path)
    hits = 0
    shown: list[str] = []
    for rec in records:
        if where and not all(_equal(field_path(rec, k), v) for k, v in where.items()):
            continue
        hits += 1
        if len(shown) >= max_matches:
            continue
        if fields:
            proj = {f: field_path(rec, f) for f in fields}
            rec = {k: v for k, v in proj.items() if v is not _MISSING}
        shown.append(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
    body, cut = bound("".join(shown), max_bytes, max_tokens)
    notes = []
    if hits > len(shown):
        notes.append(f"{hits} records match, showing {len(shown)} (raise max_matches)")
    if bad:
        notes.append(f"{bad} lines were not JSON and were skipped")
    if cut:
        notes.append("output cut to max_tokens/max_bytes")
    res = QueryResult(body, len(data), len(records), len(shown), bool(notes), "; ".join(notes) or None)
    res.extra = {"records": len(records), "matches": hits, "shown": len(shown)}
    return res
