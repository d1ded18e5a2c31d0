"""Redaction of a payload that is never held whole: ``Redactor.redact_bytes`` over chunks of whole lines.

Every rule of ``core/redact.py`` looks at one line at a time (the regex runs on the line around
an anchor hit; no pattern crosses a newline), except ``private_key``, whose window runs from a
``-----BEGIN ... PRIVATE KEY-----`` line to the next ``-----END`` line. So a chunk that ends at a
newline, and never between a BEGIN line and the END line after it, is scrubbed exactly as the same
lines are inside the whole text: the cuts are chosen that way, and the same secrets are found
(``tests/test_big_observe_redact.py`` places secrets across every kind of edge).

Limits: a single line longer than the chunk makes the chunk grow to hold it (the rules need the
whole line), and so does a BEGIN line whose END never comes (the whole rest is one window, as on
the whole text). ``BOSUN_REDACT_EXTRA`` rules are applied per chunk: a custom pattern that spans
lines can miss a match across a cut.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from bosun.core.redact import Redactor

CHUNK = 1 << 20  # bytes of whole lines redacted at a time (1 MiB: as fast as 4 MiB, measured; peak 49 vs 72 MB)
_BEGIN_KEY = re.compile(rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")
_END_ANY = re.compile(rb"-----end ", re.IGNORECASE)  # what ends the rule's window (core/redact.py: end_needle)


@dataclass
class RedactTotals:
    """What a chunked redaction took out and wrote (rule -> count; bytes and lines written)."""

    counts: dict[str, int] = field(default_factory=dict)
    nbytes: int = 0
    newlines: int = 0
    last_byte: int = -1  # the last byte written (-1: nothing): a last line without a newline still counts

    @property
    def lines(self) -> int:
        """``count_lines`` of everything written."""
        if not self.nbytes:
            return 0
        return self.newlines + (0 if self.last_byte == 0x0A else 1)


def safe_cut(buf: bytes | bytearray, target: int, final: bool, key_rule: bool = True) -> int:
    """Where the next chunk of ``buf`` ends: after the last newline within ``target`` bytes (after the
    first one past it for a longer line), and never between a private key's BEGIN line and the END
    line after it. 0 when ``buf`` must grow first; ``len(buf)`` at the end of the input (``final``)."""
    if final and len(buf) <= target:
        return len(buf)
    cut = buf.rfind(b"\n", 0, target) + 1
    if cut == 0:  # one line longer than the target: the whole line goes in one chunk
        nl = buf.find(b"\n", target)
        if nl < 0:
            return len(buf) if final else 0
        cut = nl + 1
    while key_rule:
        last_begin = None
        for found in _BEGIN_KEY.finditer(buf, 0, cut):
            last_begin = found
        if last_begin is None or _END_ANY.search(buf, last_begin.start(), cut) is not None:
            return cut
        end = _END_ANY.search(buf, last_begin.start())  # the END (of any kind) that closes the window
        if end is None:
            return len(buf) if final else 0
        nl = buf.find(b"\n", end.end())
        if nl < 0:
            return len(buf) if final else 0
        cut = nl + 1  # and check again: a BEGIN between the old and the new cut needs its END too
    return cut


def redact_chunks(pieces: Iterable[bytes], redactor: Redactor, emit: Callable[[bytes], None],
                  chunk: int = CHUNK) -> RedactTotals:
    """Scrub the text that ``pieces`` make up, ``chunk`` bytes of whole lines at a time, handing each
    scrubbed chunk to ``emit``: the same bytes and counts as ``redactor.redact_bytes`` of the whole."""
    totals = RedactTotals()
    key_rule = "private_key" in redactor.names
    buf = bytearray()

    def flush(upto: int) -> None:
        data, counts = redactor.redact_bytes(bytes(buf[:upto]))
        del buf[:upto]
        for name, n in counts.items():
            totals.counts[name] = totals.counts.get(name, 0) + n
        if data:
            totals.nbytes += len(data)
            totals.newlines += data.count(b"\n")
            totals.last_byte = data[-1]
            emit(data)

    for piece in pieces:
        buf += piece
        while len(buf) >= chunk:
            cut = safe_cut(buf, chunk, False, key_rule)
            if not cut:
                break
            flush(cut)
    while buf:
        flush(safe_cut(buf, chunk, True, key_rule))
    return totals
