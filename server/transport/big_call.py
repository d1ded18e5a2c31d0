"""A huge ``observe`` call handed to the SDK small: its ``result`` string decoded into a file first.

The SDK's HTTP path holds a 100 MB body about four times over (its body-limit middleware, the
request body, ``json.loads`` of the bytes and of the text, the 100 MB ``result`` string), all on
the event loop. So when a spooled body is over ``BOSUN_BIG_OBSERVE_BYTES``:

1. its real (unescaped) quotes are found window by window (numpy, a few MiB of scratch); the
   longest string must hold all but at most ``ENVELOPE_MAX`` bytes of the body;
2. the body with that string replaced by a token is parsed as usual; it must be one JSON-RPC
   ``tools/call`` of ``observe`` (kind ``result`` or ``failure``) whose ``arguments.result`` is the
   token, else the original body goes to the SDK untouched (its own answer, its own errors);
3. the string is decoded (escapes included) in segments cut where no escape, surrogate pair or
   UTF-8 character is split, into a 0600 file under ``$BOSUN_HOME/spool``
   (``spooled_values.SpooledValue``), and the token is registered for the length of the request.

The SDK then answers the small request exactly as any other: session and header rules for both
wire eras, JSON or SSE, admission, deadline, idempotency (the fingerprint reads the file), and
the observe service reads the file (``services/observe.py``), scrubbing and outlining it in a
separate process. Runs on a thread: it reads files and holds the GIL for a few ms at a time.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from bosun.server.spooled_values import SpooledValue, register
from bosun.server.transport.json_scan import unescaped_quotes

log = logging.getLogger("bosun.http")

WINDOW = 1 << 20  # bytes scanned (and decoded) at a time
ENVELOPE_MAX = 1 << 20  # bytes of the body outside the big string at most
MAX_QUOTES = 100_000  # a body with more strings than this is not one big output: the SDK gets it
OBSERVED_KINDS = ("result", "failure")
STALE_S = 3600.0  # seconds: spool files older than this are a killed daemon's leftovers
_HIGH_SURROGATE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}")


@dataclass
class Handoff:
    """The small request the SDK gets, and the spooled value its token stands for."""

    envelope: bytes
    value: SpooledValue


def string_spans(body: IO[bytes]) -> list[tuple[int, int]] | None:
    """(opening quote, closing quote) of every JSON string in ``body``; None when there are too many."""
    quotes: list[int] = []
    escaped = False
    at = 0
    body.seek(0)
    while chunk := body.read(WINDOW):
        found, escaped = unescaped_quotes(np.frombuffer(chunk, dtype=np.uint8), escaped)
        quotes.extend((found + at).tolist())
        if len(quotes) > MAX_QUOTES:
            return None
        at += len(chunk)
    if len(quotes) % 2:
        return None
    return list(zip(quotes[0::2], quotes[1::2], strict=True))


def safe_cut(piece: bytes) -> int:
    """The longest prefix of ``piece`` (the inside of a JSON string, from a clean start) that splits no
    UTF-8 character, no escape, and no ``\\uD8xx\\uDCxx`` surrogate pair."""
    cut = len(piece)
    for back in range(1, min(4, cut) + 1):  # an incomplete UTF-8 sequence at the end goes to the next piece
        byte = piece[cut - back]
        if byte & 0xC0 == 0x80:
            continue
        need = 2 if byte & 0xE0 == 0xC0 else 3 if byte & 0xF0 == 0xE0 else 4 if byte & 0xF8 == 0xF0 else 1
        if need > back:
            cut -= back
        break

    def starts_escape(i: int) -> bool:
        run = 0
        while i - run - 1 >= 0 and piece[i - run - 1] == 0x5C:
            run += 1
        return piece[i] == 0x5C and run % 2 == 0

    for j in range(max(0, cut - 6), cut):  # an escape cut short (\n, \uXXXX) goes to the next piece whole
        if starts_escape(j) and (j + 2 > cut or (piece[j + 1] == 0x75 and j + 6 > cut)):
            cut = j
            break
    if cut >= 6 and _HIGH_SURROGATE.fullmatch(piece, cut - 6, cut) and starts_escape(cut - 6):
        cut -= 6  # a high surrogate waits for its low half (json joins the pair into one character)
    return cut


def decode_string(body: IO[bytes], start: int, end: int, out: IO[bytes]) -> int:
    """Decode the JSON string inside ``body[start:end]`` into ``out`` (UTF-8, lone surrogates kept);
    the bytes written. ValueError when it is not a valid JSON string."""
    body.seek(start)
    carry = b""
    left = end - start
    written = 0
    while left or carry:
        fresh = body.read(min(WINDOW, left)) if left else b""
        left -= len(fresh)
        piece = carry + fresh
        cut = len(piece) if not left else safe_cut(piece)
        if cut == 0 and left:
            carry = piece
            continue
        text = json.loads(b'"' + piece[:cut] + b'"')
        carry = piece[cut:]
        data = text.encode("utf-8", "surrogatepass")
        out.write(data)
        written += len(data)
    return written


def extract(body: IO[bytes], size: int, spool_dir: Path) -> Handoff | None:
    """The small request for a huge observe body, or None when the body is anything else."""
    spans = string_spans(body)
    if not spans:
        return None
    start, end = max(spans, key=lambda s: s[1] - s[0])
    if size - (end - start + 1) > ENVELOPE_MAX:
        return None
    stand_in = b'"bosun-spooled-value:?"'
    body.seek(0)
    head = body.read(start)
    body.seek(end + 1)
    tail = body.read()
    try:
        message = json.loads(head + stand_in + tail)
    except (ValueError, RecursionError):
        return None
    if not _observe_with_result(message, stand_in[1:-1].decode()):
        return None
    spool_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    sweep(spool_dir)
    fd, name = tempfile.mkstemp(dir=spool_dir, prefix="value-")  # 0600
    path = Path(name)
    try:
        with os.fdopen(fd, "wb") as out:
            written = decode_string(body, start + 1, end, out)
    except (ValueError, OSError) as exc:
        path.unlink(missing_ok=True)
        log.info("a huge observe body goes to the SDK whole: its result string could not be spooled (%s)", exc)
        return None
    value = SpooledValue(path, written)
    token = register(value)
    envelope = head + json.dumps(token).encode() + tail
    return Handoff(envelope, value)


def sweep(spool_dir: Path, older_than_s: float = STALE_S) -> None:
    """Remove the decoded and scrubbed files a killed daemon left (a live request is far younger: the call
    deadline is minutes). The files are named, not unlinked at once, because the worker process reads them."""
    cutoff = time.time() - older_than_s
    for pattern in ("value-*", "scrubbed-*"):
        for leftover in spool_dir.glob(pattern):
            with contextlib.suppress(OSError):
                if leftover.stat().st_mtime < cutoff:
                    leftover.unlink()


def _observe_with_result(message: Any, stand_in: str) -> bool:
    """Whether ``message`` is a ``tools/call`` of ``observe`` whose ``arguments.result`` is ``stand_in``
    (the token that took the spooled string's place)."""
    if not isinstance(message, dict) or message.get("method") != "tools/call" or "id" not in message:
        return False
    params = message.get("params")
    if not isinstance(params, dict) or params.get("name") != "observe":
        return False
    arguments = params.get("arguments")
    return (isinstance(arguments, dict) and arguments.get("result") == stand_in
            and arguments.get("kind") in OBSERVED_KINDS)
