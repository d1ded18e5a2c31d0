"""A huge output observed in a separate process: scrub, hash, count, outline and shape it from files.

Redaction and outline building are pure-Python work that holds the GIL for up to a second at a
time on a 100 MB output: in the daemon, every other agent waited for it. Here they run
in a child process (one per huge observe: its memory goes back to the OS when it exits; at a lower
CPU priority), fed from files, so the daemon never holds the output and its event loop stays free.

The child reads its sources (file ranges and literal text, one UTF-8 stream decoded with
``errors="replace"``, as ``read_spool`` and ``clean_text`` do), scrubs them a chunk of whole lines
at a time (``chunked_redact.py``) into ``out`` while hashing and counting, and with ``sqlite_db``
stores the scrubbed file in the SQLite ref store (``blob_file.sqlite_put_file``, 1 MiB writes).
Then it measures and shapes it as the in-process observe does (``observe_shape``): over
``WINDOWED_ABOVE`` (4 MiB) from bounded windows of the file (``core/offload/outline_window.py``:
the text is never held whole), below it from the whole text. The answer is the same
(tests/test_big_observe*.py compare them; a huge JSON document is the one kind outlined otherwise).
Its peak memory is a fixed ceiling (~70 MB for a 100 MB log, measured: the interpreter, numpy and
a 4 MiB chunk's redaction), not a multiple of the payload (3.4x before the windows).

Protocol: one JSON request on stdin, one JSON answer on stdout (``{"ok": ...}`` or ``{"error": ...}``).
"""

from __future__ import annotations

import asyncio
import codecs
import hashlib
import json
import logging
import os
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bosun.core.errors import BosunError
from bosun.core.offload.offload import PruneMode, decide, get_mode, outline_budget
from bosun.core.offload.outline_window import (
    WINDOWED_ABOVE,
    Windowed,
    window_file,
    windowed_kind,
    windowed_outline,
)
from bosun.server.services.observe_shape import Measured, measure, shape

log = logging.getLogger("bosun.offload")

READ = 1 << 20  # bytes per read from a source file
NICE = 10  # the worker yields the CPU to the daemon and the agents' own processes: one agent's bulk work
# must not slow every other agent's small calls (the machine may have no spare core)


def source_pieces(sources: list[dict[str, Any]]) -> Iterator[bytes]:
    """The sources as one stream of clean UTF-8: invalid bytes (and a JSON string's lone surrogates,
    spooled with ``surrogatepass``) become U+FFFD exactly as ``bytes.decode(errors="replace")``."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    for source in sources:
        if "text" in source:
            yield decoder.decode(str(source["text"]).encode("utf-8")).encode("utf-8")
            continue
        with open(source["path"], "rb") as fh:
            fh.seek(int(source.get("start", 0)))
            left = source.get("length")
            while left is None or left > 0:
                piece = fh.read(READ if left is None else min(READ, left))
                if not piece:
                    break
                if left is not None:
                    left -= len(piece)
                yield decoder.decode(piece).encode("utf-8")
    tail = decoder.decode(b"", final=True)
    if tail:
        yield tail.encode("utf-8")


def observe_files(request: dict[str, Any]) -> dict[str, Any]:
    """Scrub the sources into ``request["out"]``, then measure and shape the scrubbed text."""
    from bosun.core.redact import Redactor
    from bosun.server.chunked_redact import redact_chunks

    redactor = Redactor(request.get("redact_disable") or (), request.get("redact_extra") or ())
    digest = hashlib.sha256()
    out_path = Path(request["out"])
    with open(out_path, "wb") as out:
        def emit(data: bytes) -> None:
            digest.update(data)
            out.write(data)

        totals = redact_chunks(source_pieces(request["sources"]), redactor, emit)
    redactions = totals.counts
    hexdigest = digest.hexdigest()
    stored = False
    if request.get("sqlite_db"):  # stored from here: SQLite's copies of the blob go with this process
        from bosun.server.blob_file import sqlite_put_file

        sqlite_put_file(str(request["sqlite_db"]), out_path, hexdigest, str(request.get("media_type")))
        stored = True
    prune = get_mode(request.get("prune"))
    command, offload, failed = request.get("command"), request.get("offload"), bool(request.get("failed"))
    windowed = window_file(out_path, int(request.get("window_above", WINDOWED_ABOVE)))
    if windowed is not None:  # the outline from bounded windows of the file: the text is never held whole
        measured = measure_windowed(windowed, redactions, prune, command, offload, failed)
        text, nbytes = windowed.text, windowed.nbytes
    else:
        data = out_path.read_bytes()
        text, nbytes = data.decode("utf-8", "replace"), len(data)
        measured = measure(text, data, redactions, prune, command, offload, failed)
        del data
    shaped = shape(text, nbytes, hexdigest, measured, redactions, offload, request.get("intent"), failed)
    return {"digest": hexdigest, "nbytes": nbytes, "tokens": measured.tokens, "lines": totals.lines,
            "redactions": redactions, "shaped": shaped.as_json(), "stored": stored,
            "windowed": windowed is not None, "peak_rss_kb": peak_rss_kb()}


def measure_windowed(w: Windowed, redactions: dict[str, int], prune: PruneMode, command: str | None,
                     offload: bool | None, failed: bool) -> Measured:
    """``observe_shape.measure`` of the whole text, from its windows (the same steps, with the whole
    text's token estimate and line count, which the sparse text does not have)."""
    utf8 = w.utf8(redactions)
    choice = decide(w.tokens, prune, command, offload)
    kind = windowed_kind(w, command, utf8)
    outline = None
    if choice.offload or failed or kind == "test":  # as measure: a test run's outcome sets tests_passed
        outline = windowed_outline(w, outline_budget(prune, w.tokens, kind), command, kind, utf8)
    return Measured(w.lines, w.tokens, choice, outline)


def peak_rss_kb() -> int:
    """This process's peak resident memory so far, KiB (0 where /proc is missing). ``VmHWM``, not
    ``ru_maxrss``: that one carries the parent's peak over the exec (the daemon's, ~230 MB)."""
    try:
        with open("/proc/self/status") as fh:
            return next((int(line.split()[1]) for line in fh if line.startswith("VmHWM:")), 0)
    except OSError:
        return 0


class WorkerFailed(BosunError):
    """The worker process ended without an answer (killed, out of memory, or a bug: its stderr says)."""


async def run_worker(request: dict[str, Any]) -> dict[str, Any]:
    """``observe_files(request)`` in a fresh child process; the child is killed if the call is cancelled."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bosun.server.offload_worker",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        out, err = await proc.communicate(json.dumps(request).encode())
    except BaseException:  # cancelled (deadline, client gone): the child's work is of no use
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    try:
        answer = json.loads(out)
    except ValueError:
        answer = None
    if isinstance(answer, dict) and "sqlite_error" in answer:  # storing the blob failed: say what, and if safe
        from bosun.store.db import storage_error

        raise storage_error(sqlite3.OperationalError(str(answer["sqlite_error"])), "store the payload")
    if not isinstance(answer, dict) or "ok" not in answer:
        detail = answer.get("error") if isinstance(answer, dict) else err.decode("utf-8", "replace")[-400:]
        log.warning("offload worker failed (exit %s): %s", proc.returncode, detail)
        raise WorkerFailed(f"observe: the process that scrubs and outlines a huge output failed (exit "
                           f"{proc.returncode}); nothing was applied; retrying is safe")
    got = dict(answer["ok"])
    log.info("offload worker: %d bytes, %s, peak RSS %.0f MB", got.get("nbytes", 0),
             "windowed" if got.get("windowed") else "whole", got.get("peak_rss_kb", 0) / 1024)
    return got


def main() -> int:
    try:
        os.nice(NICE)
    except OSError:  # not permitted here: run at the daemon's priority
        pass
    request = json.loads(sys.stdin.buffer.read())
    try:
        answer: dict[str, Any] = {"ok": observe_files(request)}
    except sqlite3.Error as exc:
        answer = {"sqlite_error": str(exc)}
    except Exception as exc:  # reported to the daemon, which answers the call with a tool error
        answer = {"error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(json.dumps(answer))
    sys.stdout.flush()
    return 0 if "ok" in answer else 1


if __name__ == "__main__":
    sys.exit(main())
