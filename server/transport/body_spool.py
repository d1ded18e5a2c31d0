"""A large HTTP request body held once: spooled to an unlinked 0600 file while it arrives, read back whole.

Collecting a body as a list of chunks and joining it holds it twice at the peak (the chunks and
the joined bytes); a 100 MB observe then cost 200 MB before any parser saw it. Past
``SPOOL_ABOVE`` the chunks go to a file under ``$BOSUN_HOME/spool`` instead (the page cache, not
this process's memory), and are handed on from there a piece at a time, so the one copy the app
makes (the SDK collects the body itself) is the only one this side of the parser. The
file is unlinked as soon as it is created (``tempfile.TemporaryFile``), so nothing is left behind,
even after a crash. Small bodies never touch the disk.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

log = logging.getLogger("bosun.http")

SPOOL_ABOVE = 1 << 20  # bytes: a body larger than this is spooled (below it, the copy costs less than a file)
READ_PIECE = 1 << 20  # bytes: a spooled body is handed on in pieces of this size
TRIM_ABOVE = 16 << 20  # bytes: after a request body this large, freed heap pages go back to the OS


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim`` (None elsewhere: musl, macOS)."""
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name).malloc_trim if name else None  # type: ignore[no-any-return]
    except (OSError, AttributeError):
        return None


_TRIM = _malloc_trim()


def release_freed_memory() -> None:
    """Give the heap pages freed by a large request back to the OS.

    The copies a 100 MB observe makes are freed when it answers, but glibc keeps freed heap
    pages for reuse (its mmap threshold rises after a large free, so later large buffers come
    from the heap too): measured in-process, RSS stayed ~100 MB higher without this. Blocking
    for a few ms at most; call it off the event loop."""
    if _TRIM is not None:
        _TRIM(0)


class BodyBuffer:
    """The chunks of one request body: in memory while small, in an unlinked file past ``SPOOL_ABOVE``."""

    def __init__(self, spool_dir: Path | None, spool_above: int = SPOOL_ABOVE) -> None:
        self.spool_dir = spool_dir
        self.spool_above = spool_above
        self.size = 0
        self._chunks: list[bytes] = []
        self._file: IO[bytes] | None = None

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        if self._file is not None:
            self._file.write(chunk)
            return
        self._chunks.append(chunk)
        if self.size > self.spool_above and self.spool_dir is not None:
            self._file = self._open()
            if self._file is not None:
                for held in self._chunks:
                    self._file.write(held)
                self._chunks = []

    def _open(self) -> IO[bytes] | None:
        """An unlinked 0600 file in the spool directory (None, and memory, if the disk refuses)."""
        assert self.spool_dir is not None
        try:
            self.spool_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            return tempfile.TemporaryFile(dir=self.spool_dir, prefix="body-")  # 0600, unlinked at once
        except OSError as exc:
            log.warning("cannot spool a %d-byte request body under %s (%s); holding it in memory",
                        self.size, self.spool_dir, exc)
            self.spool_dir = None
            return None

    @property
    def spooled(self) -> IO[bytes] | None:
        """The spool file holding the whole body (None while the body is in memory)."""
        if self._file is not None:
            self._file.flush()
        return self._file

    def pieces(self) -> Iterator[bytes]:
        """The body, in order: a small one as one object (a single chunk as it came, without a copy), a
        spooled one read back ``READ_PIECE`` bytes at a time, so this buffer never holds it whole:
        the app that reads it makes its own copy, and the body is not held twice."""
        if self._file is None:
            chunks, self._chunks = self._chunks, []
            yield chunks[0] if len(chunks) == 1 else b"".join(chunks)
            return
        try:
            self._file.flush()
            self._file.seek(0)
            while piece := self._file.read(READ_PIECE):
                yield piece
        finally:
            self.close()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._chunks = []
