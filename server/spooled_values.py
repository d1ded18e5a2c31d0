"""Huge string arguments held in files, not in memory: the hand-off between the HTTP guard and observe.

A ``tools/call`` of ``observe`` whose body is huge never reaches the SDK whole
(``transport/big_call.py``): its ``result`` string is decoded into a spool file and the SDK gets
the same request with ``result`` replaced by a token naming that file. The SDK then does all it
does for any call (session and header rules, admission, deadline, idempotency, the answer's wire
form); ``observe`` and the idempotency fingerprint look the token up here and read the file.

A token is 128 random bits, registered only while its request runs: a client that sends a string
that looks like one, or a stale one, gets it observed as the text it is.
"""

from __future__ import annotations

import codecs
import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

TOKEN_PREFIX = "bosun-spooled-value:"
READ = 1 << 20


@dataclass
class SpooledValue:
    """A decoded JSON string in a 0600 file (UTF-8, lone surrogates kept with ``surrogatepass``)."""

    path: Path
    size: int  # bytes in the file
    token: str = ""
    users: int = 1  # the request that spooled it, plus each call reading it; the file goes with the last

    def acquire(self) -> SpooledValue:
        self.users += 1
        return self

    def release(self) -> None:
        self.users -= 1
        if self.users <= 0:
            _VALUES.pop(self.token, None)
            with contextlib.suppress(OSError):
                self.path.unlink()

    def text_slices(self, chars: int = READ) -> Iterator[str]:
        """The string, a slice at a time (slices end on character boundaries)."""
        decoder = codecs.getincrementaldecoder("utf-8")(errors="surrogatepass")
        with open(self.path, "rb") as fh:
            while piece := fh.read(chars):
                text = decoder.decode(piece)
                if text:
                    yield text
        rest = decoder.decode(b"", final=True)
        if rest:
            yield rest


_VALUES: dict[str, SpooledValue] = {}


def register(value: SpooledValue) -> str:
    """Register ``value`` under a fresh token (what the SDK sees in its place)."""
    value.token = TOKEN_PREFIX + secrets.token_hex(16)
    _VALUES[value.token] = value
    return value.token


def lookup(candidate: object) -> SpooledValue | None:
    """The spooled value a string argument stands for (None for any other value)."""
    if isinstance(candidate, str) and candidate.startswith(TOKEN_PREFIX):
        return _VALUES.get(candidate)
    return None
