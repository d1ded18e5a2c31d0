"""JSON read without parsing it: nesting depth, real quotes, a top-level id (numpy over byte positions).

Why a module of its own: the HTTP guard (``http_guard.py``) measures every body's depth as it arrives, the
big-call path (``big_call.py``) finds the strings of a huge body, and the stdio transport measures each line;
all three scan the same way, and none of them may parse a 100,000-level document (a ``RecursionError``).
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

MAX_DEPTH = 64  # no bosun argument nests deeper than ~10 levels
_STEP = np.zeros(256, dtype=np.int8)
_STEP[[ord("["), ord("{")]] = 1
_STEP[[ord("]"), ord("}")]] = -1


def _structure(body: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Positions of the real (unescaped) quotes, and of the brackets outside strings with their +1/-1 moves.

    Vectorised over the positions of quotes, backslashes and brackets only (no recursion, no regex):
    a bracket after an odd number of real quotes is inside a string."""
    data = np.frombuffer(body, dtype=np.uint8)
    folded = data | 0x20  # '[' -> '{' and ']' -> '}': one comparison each (no other byte folds onto them)
    brackets = np.flatnonzero((folded == 0x7B) | (folded == 0x7D))
    quotes, _ = unescaped_quotes(data, False)
    outside = brackets[np.searchsorted(quotes, brackets) % 2 == 0]
    return quotes, outside, _STEP[data[outside]].astype(np.int64)


def json_depth(body: bytes) -> int:
    """The deepest bracket nesting of a JSON text, brackets inside strings skipped."""
    if b"[" not in body and b"{" not in body:
        return 0
    scan = DepthScan()
    scan.feed(body)
    return scan.deepest


class DepthScan:
    """``json_depth`` over a body fed in pieces as it arrives, in windows of ``WINDOW`` bytes.

    What a piece leaves open is carried to the next: whether it ended inside a string, whether it
    ended on an odd run of backslashes (the next byte is escaped), and the nesting depth. So a
    body is measured once, while it is read, with a few windows' worth of scratch memory, not
    several arrays the size of the body."""

    WINDOW = 1 << 20

    def __init__(self) -> None:
        self.depth = 0
        self.deepest = 0
        self.in_string = False
        self.escaped = False  # the byte before this piece was an unescaped backslash

    def feed(self, piece: bytes | memoryview) -> None:
        view = memoryview(piece)
        if not view.nbytes:
            return
        for at in range(0, len(view), self.WINDOW):
            self._window(np.frombuffer(view[at:at + self.WINDOW], dtype=np.uint8))

    def _window(self, data: np.ndarray) -> None:
        if not data.size:
            return
        folded = data | 0x20  # '[' -> '{' and ']' -> '}': one comparison each (no other byte folds onto them)
        brackets = np.flatnonzero((folded == 0x7B) | (folded == 0x7D))
        quotes, self.escaped = unescaped_quotes(data, self.escaped)
        inside = (np.searchsorted(quotes, brackets) + (1 if self.in_string else 0)) % 2 == 1
        moves = _STEP[data[brackets[~inside]]].astype(np.int64)
        if moves.size:
            path = np.cumsum(moves) + self.depth
            self.deepest = max(self.deepest, int(path.max()))
            self.depth = int(path[-1])
        self.in_string ^= quotes.size % 2 == 1


def unescaped_quotes(data: np.ndarray, escaped: bool) -> tuple[np.ndarray, bool]:
    """Positions of the quotes in ``data`` that no backslash escapes, and whether the byte after ``data``
    is escaped (it ends on an odd run of backslashes). ``escaped``: the byte before ``data`` was an
    unescaped backslash (so ``data[0]`` is escaped). A window of a body fed in pieces."""
    quotes = np.flatnonzero(data == 0x22)
    slashes = np.flatnonzero(data == 0x5C)
    carried = 1 if escaped else 0  # an odd backslash run from the piece before counts at position 0
    if not slashes.size:
        if carried and quotes.size and quotes[0] == 0:
            quotes = quotes[1:]
        return quotes, False
    starts = np.ones(slashes.size, dtype=bool)
    starts[1:] = np.diff(slashes) != 1
    run_start = np.maximum.accumulate(np.where(starts, np.arange(slashes.size), 0))
    if quotes.size:
        j = np.searchsorted(slashes, quotes - 1)
        j_ok = np.minimum(j, slashes.size - 1)
        ends_here = (j < slashes.size) & (slashes[j_ok] == quotes - 1)
        run = np.where(ends_here, j_ok - run_start[j_ok] + 1, 0)
        run += np.where(ends_here & (slashes[run_start[j_ok]] == 0), carried, 0)
        run[quotes == 0] = carried
        quotes = quotes[run % 2 == 0]
    last = slashes.size - 1
    if slashes[last] != data.size - 1:
        return quotes, False
    # the window ends on a backslash run: does it escape what follows?
    length = last - run_start[last] + 1 + (carried if slashes[run_start[last]] == 0 else 0)
    return quotes, length % 2 == 1


_ID_KEY = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.){0,200}")')


def top_level_id(body: bytes) -> Any:
    """The ``id`` member of a JSON-RPC message too deep to parse (None if there is none or it is unclear).

    Lets a transport answer a refused request by its id instead of leaving the caller waiting."""
    quotes, brackets, moves = _structure(body)
    depth_after = np.cumsum(moves)
    for match in _ID_KEY.finditer(body):
        at = match.start()
        if np.searchsorted(quotes, at) % 2 == 1:  # this quote closes a string: "id" is text, not a key
            continue
        before = int(np.searchsorted(brackets, at))
        if before and int(depth_after[before - 1]) == 1:
            try:
                return json.loads(match.group(1))
            except ValueError:
                return None
    return None


class DepthLimit:
    """Whether a body fed in pieces nests deeper than ``limit``, scanning only when it could.

    A body with at most ``limit`` opening brackets cannot nest deeper than ``limit``: counting
    them is a C loop (about a microsecond for a tool call), where the scan costs ~100 us of numpy
    set-up per body, on every call. Pieces are held (by reference) until the count passes the
    limit or they reach a window's worth, then scanned in order, so the answer is exact."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.scan = DepthScan()
        self._opened = 0
        self._held: list[bytes] = []
        self._held_bytes = 0
        self._scanning = False

    def feed(self, piece: bytes) -> None:
        if self._scanning:
            self.scan.feed(piece)
            return
        self._opened += piece.count(b"[") + piece.count(b"{")
        self._held.append(piece)
        self._held_bytes += len(piece)
        if self._opened > self.limit or self._held_bytes >= DepthScan.WINDOW:
            self._scanning = True
            held, self._held = self._held, []
            for earlier in held:
                self.scan.feed(earlier)

    @property
    def exceeded(self) -> bool:
        return self._scanning and self.scan.deepest > self.limit
