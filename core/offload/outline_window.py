"""The outline of a huge output read from its file in bounded windows, never held whole (issue 13).

On a large text every outline builder of ``outline.py`` looks only at a head window (the first
``WINDOW_HEAD`` characters, to the end of their last line), a tail window (the last
``WINDOW_TAIL``), the whole lines around hits in them, the line count, and (for line numbers)
how many newlines lie between. So a *sparse* text carries everything they read: the head and
tail kept as they are, and the middle reduced to its newlines (one ``é`` added when the middle
has non-ASCII text, so the whole stays non-ASCII where it was; the searches fold case on ASCII
text only). Line numbers, the head/tail windows, the hits and their lines come out the same, so
``detect_kind`` and ``build_outline`` run unchanged on it, with ``Utf8Text`` on its bytes. What
the sparse text cannot give is computed from the file: its length in characters, the sampled
token estimate (``fast_tokens`` reads 48 slices spread over the whole: ``FileText`` serves them),
the line count.

Memory: a few windows of ``READ`` bytes while scanning, then the head and tail (~0.3 MB of
text), plus one byte per line of the middle, twice (the sparse ``str`` and its UTF-8): ~2.5 MB
for a 100 MB log of 80-character lines (the old path held the text, its bytes and a byte-sized
numpy mask: ~3.5x the payload).

Where the answer is not the whole-text one (tested):
- a JSON document (the head starts with ``{`` or ``[`` and is not JSON lines): validating and
  outlining it needs the whole parse (~5-10x its size in Python objects). Its kind is ``json``
  when the head window is a well-formed JSON prefix, outlined from the values complete in the
  head, with a first line that says so; a syntax error in the head makes it not JSON (as the
  whole-text parse would), and the windows decide its kind.
- a line longer than ``LINE_MAX`` across a window's edge is cut there (its first ``MAX_LINE``
  characters, which the outline shows, are the same).
- ``intent`` lines are looked for in the head and tail windows (``focus`` scores whole texts).
- a text that is not valid UTF-8 (never the case for the worker's scrubbed output) is not
  windowed: ``window_file`` returns None and the caller reads it whole.
"""

from __future__ import annotations

import bisect
import codecs
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from bosun.core.offload.offload import fast_tokens
from bosun.core.offload.outline import WINDOW_HEAD, WINDOW_TAIL, Outline, Utf8Text, build_outline, detect_kind
from bosun.core.tokens import estimate_tokens

WINDOWED_ABOVE = 4 << 20  # bytes: a smaller file is outlined whole (its cost is bounded by this)
READ = 1 << 20  # bytes read (and decoded) at a time
BLOCK = 64 << 10  # bytes between two character-offset checkpoints (a slice read costs at most this)
MARGIN = 8192  # characters kept beyond each window: the sparse text stays longer than the view limits
LINE_MAX = 1 << 20  # bytes a kept window may grow to reach a line's end (or start)
TAIL_LINES = 3  # non-empty lines the tail keeps at least (error_signature reads the last three)
BACK_READ = 64 << 10  # bytes read at a time when the tail's start moves back over lines


@dataclass
class Windowed:
    """A huge text as the outline builders need it: the sparse text, and what only the file can tell."""

    text: str  # the head, the middle's newlines, the tail
    data: bytes  # ``text`` as UTF-8
    chars: int  # characters of the whole text
    nbytes: int
    lines: int  # ``count_lines`` of the whole
    tokens: int  # ``fast_tokens`` of the whole
    head_cut: bool  # the head ends inside a line longer than LINE_MAX
    head_chars: int  # characters of the kept head (the start of ``text``)

    def utf8(self, redactions: dict[str, int]) -> Utf8Text | None:
        """``Utf8Text`` of the sparse text, as ``measure`` builds it for the whole one."""
        return Utf8Text.of(self.text, self.data if not redactions else None)


class FileText:
    """The characters of a UTF-8 file, by character offset, for ``fast_tokens``: ``len``, slices, ``find``.

    A checkpoint every ``BLOCK`` bytes (its character offset) bounds what one slice reads."""

    def __init__(self, path: Path, chars: int, checkpoints: list[tuple[int, int]]) -> None:
        self.path = path
        self.chars = chars
        self.at_bytes = [b for b, _ in checkpoints]
        self.at_chars = [c for _, c in checkpoints]

    def __len__(self) -> int:
        return self.chars

    def _read(self, lo: int, hi: int) -> str:
        lo, hi = max(0, min(lo, self.chars)), max(0, min(hi, self.chars))
        if hi <= lo:
            return ""
        k = bisect.bisect_right(self.at_chars, lo) - 1
        start, before = self.at_bytes[k], self.at_chars[k]
        decoder = codecs.getincrementaldecoder("utf-8")()
        got = ""
        with open(self.path, "rb") as fh:
            fh.seek(start)
            while len(got) < hi - before:
                piece = fh.read(max(4 * (hi - before - len(got)), 64))
                if not piece:
                    break
                got += decoder.decode(piece)
        return got[lo - before: hi - before]

    def byte_offset(self, chars: int) -> int:
        """The byte offset of character ``chars``."""
        k = bisect.bisect_right(self.at_chars, chars) - 1
        return self.at_bytes[k] + len(self._read(self.at_chars[k], chars).encode("utf-8"))

    def __getitem__(self, span: slice) -> str:
        lo, hi, _ = span.indices(self.chars)
        return self._read(lo, hi)

    def find(self, sub: str, start: int = 0, end: int | None = None) -> int:
        end = self.chars if end is None else end
        at = self._read(start, end).find(sub)
        return at + start if at >= 0 else -1


def window_file(path: Path, above: int = WINDOWED_ABOVE) -> Windowed | None:
    """The sparse text of the UTF-8 file at ``path`` (None when it is ``above`` bytes or smaller, not
    valid UTF-8, or its windows would overlap: then the caller outlines it whole)."""
    nbytes = path.stat().st_size
    if nbytes <= above:
        return None
    scanned = _scan(path)
    if scanned is None:
        return None
    chars, newlines, last_byte, checkpoints = scanned
    files = FileText(path, chars, checkpoints)
    with open(path, "rb") as fh:
        head_end, head_cut = _head_end(fh, files, WINDOW_HEAD + MARGIN)
        tail_start = _tail_start(fh, files, max(0, chars - WINDOW_TAIL - MARGIN))
        if tail_start <= head_end:
            return None
        fh.seek(0)
        head = fh.read(head_end)
        fh.seek(tail_start)
        tail = fh.read()
        middle_newlines, middle_ascii = _middle(fh, head_end, tail_start)
    marker = "" if middle_ascii else "é"
    head_text = head.decode("utf-8")
    text = head_text + marker + "\n" * middle_newlines + tail.decode("utf-8")
    lines = newlines + (0 if last_byte == 0x0A else 1) if nbytes else 0
    return Windowed(text, text.encode("utf-8"), chars, nbytes, lines, fast_tokens(cast(str, files)), head_cut,
                    len(head_text))


def windowed_kind(w: Windowed, command: str | None, utf8: Utf8Text | None) -> str:
    """``detect_kind`` of the whole text, from the windows (a JSON document: see the module's docstring)."""
    kind = detect_kind(w.text, command, utf8)
    if kind != "jsonl" and w.text[:16_000].lstrip()[:1] in ("{", "["):
        prefix = _json_prefix(w)
        if prefix is _COMPLETE:  # the document ends in the head: the sparse text is parsed whole
            return kind
        return "json" if prefix is not None else ("text" if kind == "json" else kind)
    return kind


def windowed_outline(w: Windowed, budget: int, command: str | None, kind: str, utf8: Utf8Text | None) -> Outline:
    """``build_outline`` of the whole text, from the windows."""
    if kind == "json" and w.text[:16_000].lstrip()[:1] in ("{", "["):
        value = _json_prefix(w)
        if value is not None and value is not _COMPLETE:
            note = (f"a JSON document of {w.nbytes} bytes, outlined from the values complete in its first "
                    f"{w.head_chars} characters (counts are of that part)")
            out = build_outline(json.dumps(value), max(1, budget - estimate_tokens(note) - 1), command, "json")
            out.lines.insert(0, note)
            out.facts["windowed"] = True
            return out
    out = build_outline(w.text, budget, command, kind, utf8)
    if out.kind == "binary":  # it counts the characters it was given: the whole text's
        out.lines = [ln.replace(f"({len(w.text)} characters", f"({w.chars} characters", 1) for ln in out.lines]
    return out


_NOTHING = object()
_COMPLETE = object()
_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


def _json_prefix(w: Windowed) -> Any:
    """The values complete in the kept head of a JSON document, as one value (None: a syntax error in the
    head; ``_COMPLETE``: the document ends in the head)."""
    head = w.text[:w.head_chars]
    try:
        value, _, complete = _prefix_value(head, 0, w.head_cut)
    except (ValueError, RecursionError):
        return None
    return _COMPLETE if complete else None if value is _NOTHING else value


def _skip(s: str, i: int) -> int:
    while i < len(s) and s[i] in _SPACE:
        i += 1
    return i


def _prefix_value(s: str, i: int, cut: bool) -> tuple[Any, int, bool]:
    """(value, end, complete) of the JSON value at ``s[i:]``, the part of it in ``s`` when ``s`` ends
    first; ValueError on a syntax error. ``cut``: ``s`` may end inside a scalar (a long line)."""
    i = _skip(s, i)
    if i >= len(s):
        return _NOTHING, i, False
    if s[i] not in "[{":
        return _scalar(s, i, cut)
    closing = "]" if s[i] == "[" else "}"
    items: list[Any] = []
    fields: dict[str, Any] = {}
    out: Any = items if closing == "]" else fields
    i = _skip(s, i + 1)
    if i < len(s) and s[i] == closing:
        return out, i + 1, True
    while True:
        if closing == "}":
            key, i, done = _scalar(s, _skip(s, i), cut)
            if not done:
                return out, i, False
            if not isinstance(key, str):
                raise ValueError("an object key must be a string")
            i = _skip(s, i)
            if i >= len(s):
                return out, i, False
            if s[i] != ":":
                raise ValueError("':' expected")
            value, i, done = _prefix_value(s, i + 1, cut)
            if value is not _NOTHING:
                fields[key] = value
        else:
            value, i, done = _prefix_value(s, i, cut)
            if value is not _NOTHING:
                items.append(value)
        if not done:
            return out, i, False
        i = _skip(s, i)
        if i >= len(s):
            return out, i, False
        if s[i] == closing:
            return out, i + 1, True
        if s[i] != ",":
            raise ValueError("',' expected")
        i += 1


def _scalar(s: str, i: int, cut: bool) -> tuple[Any, int, bool]:
    """A string, number, true, false or null at ``s[i]``; a JSON scalar holds no newline, so only a head
    cut inside a long line (``cut``) can end in one."""
    if i >= len(s):
        return _NOTHING, i, False
    try:
        value, end = _DECODER.raw_decode(s, i)
    except ValueError:
        if cut and "\n" not in s[i:]:
            return _NOTHING, len(s), False
        raise
    if end >= len(s) and cut:  # a number may go on past the cut
        return _NOTHING, len(s), False
    return value, end, True


def _scan(path: Path) -> tuple[int, int, int, list[tuple[int, int]]] | None:
    """Characters, newlines, the last byte, and (byte, character) checkpoints every BLOCK bytes at
    character starts; None when the file is not valid UTF-8."""
    chars = newlines = 0
    last = -1
    at = 0
    checkpoints: list[tuple[int, int]] = []
    carry = b""
    with open(path, "rb") as fh:
        while True:
            fresh = fh.read(READ)
            window = carry + fresh
            if not window:
                break
            cut = len(window) if not fresh else _complete(window)
            carry = window[cut:]
            window = window[:cut]
            try:
                decoded_chars = len(window.decode("utf-8"))
            except UnicodeDecodeError:
                return None
            if not fresh and carry:
                return None  # an incomplete character at the end
            arr = np.frombuffer(window, dtype=np.uint8)
            if window.isascii():
                checkpoints.extend((at + lo, chars + lo) for lo in range(0, len(window), BLOCK))
            else:  # at the first character start of each block: (arr & 0xC0) != 0x80 marks them
                starts = (arr & 0xC0) != 0x80
                before = prev = 0
                for lo in range(0, len(window), BLOCK):
                    b = lo
                    while b < len(window) and not starts[b]:
                        b += 1
                    before += int(np.count_nonzero(starts[prev:b]))
                    prev = b
                    checkpoints.append((at + b, chars + before))
            newlines += int(np.count_nonzero(arr == 10))
            chars += decoded_chars
            at += len(window)
            if window:
                last = window[-1]
            if not fresh:
                break
    return chars, newlines, last, checkpoints or [(0, 0)]


def _complete(window: bytes) -> int:
    """The length of ``window`` without an incomplete UTF-8 character at its end."""
    for back in range(1, min(4, len(window)) + 1):
        byte = window[-back]
        if byte & 0xC0 == 0x80:
            continue
        need = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4 if byte & 0xF8 == 0xF0 else 1
        return len(window) - back if need > back else len(window)
    return len(window)


def _head_end(fh: Any, files: FileText, keep: int) -> tuple[int, bool]:
    """Where the kept head ends: after the newline that ends the line of character ``keep`` (cut at
    that character when the line goes on for more than LINE_MAX bytes)."""
    at = files.byte_offset(keep)
    fh.seek(at)
    ahead = fh.read(LINE_MAX)
    nl = ahead.find(b"\n")
    if nl >= 0:
        return at + nl + 1, False
    if len(ahead) < LINE_MAX:
        return at + len(ahead), False  # the end of the file
    return at, True


def _line_start(fh: Any, at: int) -> int | None:
    """The start of the line that holds byte ``at``; None when it starts more than LINE_MAX bytes before."""
    lo = max(0, at - LINE_MAX)
    fh.seek(lo)
    nl = fh.read(at - lo).rfind(b"\n")
    return lo + nl + 1 if nl >= 0 else 0 if lo == 0 else None


def _non_empty_lines(data: bytes) -> int:
    return sum(1 for ln in data.decode("utf-8", "replace").splitlines() if ln.strip())


def _tail_start(fh: Any, files: FileText, keep_from: int) -> int:
    """Where the kept tail starts: at the start of the line of character ``keep_from``, moved back a line at
    a time until the tail holds TAIL_LINES non-empty lines; a line longer than LINE_MAX stops it there.

    The lines before are read backwards in blocks of ``BACK_READ`` bytes held in one buffer (what lies past
    the current line start is dropped as it moves), not with a read of up to LINE_MAX bytes per line: an
    output that ends in 200,000 blank lines took 23 s that way."""
    at = files.byte_offset(keep_from)
    start = _line_start(fh, at)
    if start is None:
        return at
    at = start
    fh.seek(at)
    need = TAIL_LINES - _non_empty_lines(fh.read())
    buf, buf_lo = b"", at  # bytes [buf_lo, buf_lo + len(buf)) of the file; the line before ``at`` ends in it
    while need > 0 and at > 0:
        lo = max(0, at - 1 - LINE_MAX)  # the previous line (it ends at byte at - 1) starts after a newline past lo
        while True:
            nl = buf.rfind(b"\n", max(0, lo - buf_lo), at - 1 - buf_lo)
            if nl >= 0:
                start = buf_lo + nl + 1
                break
            if buf_lo <= lo:  # no newline in the LINE_MAX bytes before: the file's start, or too long a line
                if lo > 0:
                    return at
                start = 0
                break
            more = max(lo, buf_lo - BACK_READ)
            fh.seek(more)
            buf = fh.read(buf_lo - more) + buf[: at - buf_lo]
            buf_lo = more
        line = buf[start - buf_lo : at - buf_lo]
        at = start
        if line.strip():  # (white space alone: no non-empty line, whatever splitlines makes of it)
            need -= _non_empty_lines(line)
        elif at > buf_lo:  # a run of white space lines: skip what of it the buffer holds in one step
            at = _blank_run_start(buf, buf_lo, at)
    return at


_BLANK = np.zeros(256, dtype=bool)
_BLANK[list(b" \t\n\r\x0b\x0c")] = True  # what ``bytes.strip`` removes


def _blank_run_start(buf: bytes, buf_lo: int, at: int) -> int:
    """Where the line-by-line walk from line start ``at`` gets to over the white space lines before it whose
    newlines ``buf`` (bytes from ``buf_lo``) holds: those lines count for nothing. None of them is longer than
    LINE_MAX (which would stop the walk): the buffer reaches back at most LINE_MAX bytes before a line start
    the walk has passed."""
    before = np.frombuffer(buf, dtype=np.uint8, count=at - 1 - buf_lo)  # up to the newline that ends at - 1
    solid = np.flatnonzero(~_BLANK[before])
    first = int(solid[-1]) + 1 if len(solid) else 0  # the white space run before ``at`` starts here in buf
    newlines = np.flatnonzero(before[first:] == 10)
    return int(newlines[0]) + first + buf_lo + 1 if len(newlines) else at


def _middle(fh: Any, lo: int, hi: int) -> tuple[int, bool]:
    """Newlines in bytes ``lo:hi`` of the file, and whether they are all ASCII."""
    fh.seek(lo)
    left = hi - lo
    newlines = 0
    ascii_only = True
    while left > 0:
        piece = fh.read(min(READ, left))
        if not piece:
            break
        left -= len(piece)
        newlines += int(np.count_nonzero(np.frombuffer(piece, dtype=np.uint8) == 10))
        ascii_only = ascii_only and piece.isascii()
    return newlines, ascii_only
