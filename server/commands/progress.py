"""Progress on stderr for long CLI commands: shown when stderr is a terminal, silent otherwise.

Long work (``bosun eval route`` over a labelled set, ``provision`` assembling a model, ``verify``
over many refs, the first route while the index builds) used to print nothing until it was done.
A ``Progress`` redraws one line in place (``\\r``) at most every ``MIN_INTERVAL_S``: what it is
doing, ``done/total`` with a percentage and an estimate of the time left, or only the elapsed
time when the total is unknown. A heartbeat thread keeps the elapsed time moving while the
caller is blocked (a model load, an index build), so a terminal never looks frozen.

Piped, redirected or under CI, nothing is written (a log must not fill with ``\\r`` frames);
``BOSUN_PROGRESS=off`` silences it on a terminal too, ``=on`` forces it (tests, screen captures).
Stdlib only: any command may import it without numpy.

Usage::

    with Progress("verifying refs", total=len(refs)) as bar:
        for ref in refs:
            ...
            bar.advance()

    for item in track(items, "scoring prompts"):
        ...
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import TextIO, TypeVar

T = TypeVar("T")
ENV = "BOSUN_PROGRESS"
MIN_INTERVAL_S = 0.1  # redraws per second are capped at 10: a fast loop must not spend its time drawing
HEARTBEAT_S = 0.5  # how often a blocked caller's elapsed time is redrawn
WIDTH = 24  # characters of the bar


def enabled_for(stream: TextIO) -> bool:
    """Whether progress goes to ``stream``: ``BOSUN_PROGRESS`` decides if set, else only a terminal."""
    setting = os.environ.get(ENV, "").strip().lower()
    if setting in ("off", "0", "false", "no"):
        return False
    if setting in ("on", "1", "true", "yes"):
        return True
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream
        return False


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s" if seconds >= 10 else f"{seconds:.1f}s"
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s"


class Progress:
    """One progress line for one piece of long work (a context manager; thread-safe)."""

    def __init__(self, label: str, total: int | None = None, *, stream: TextIO | None = None,
                 enabled: bool | None = None, heartbeat: bool = True) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled_for(self.stream) if enabled is None else enabled
        self.label = label
        self.total = total if total is None or total >= 0 else None
        self.done = 0
        self.note = ""
        self.started = time.monotonic()
        self._last_draw = 0.0
        self._width = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.enabled and heartbeat:
            self._thread = threading.Thread(target=self._beat, name="bosun-progress", daemon=True)
            self._thread.start()

    # -- the caller's side -----------------------------------------------------------------
    def advance(self, n: int = 1, note: str | None = None) -> None:
        """``n`` more units done (and optionally what is being worked on now)."""
        with self._lock:
            self.done += n
            if note is not None:
                self.note = note
        self._draw()

    def stage(self, label: str, total: int | None = None) -> None:
        """A new phase of the same work: a new label, the count restarted (``total`` may be unknown)."""
        with self._lock:
            self.label = label
            self.total = total
            self.done = 0
            self.note = ""
            self.started = time.monotonic()
        self._draw(force=True)

    def close(self, message: str | None = None) -> None:
        """Stop, clear the line, and print ``message`` (a final summary) if given."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * HEARTBEAT_S)
            self._thread = None
        if not self.enabled:
            return
        with self._lock:
            self._write("\r" + " " * self._width + "\r")
            self._width = 0
            if message:
                self._write(message.rstrip("\n") + "\n")

    def __enter__(self) -> Progress:
        self._draw(force=True)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- drawing ---------------------------------------------------------------------------
    def line(self) -> str:
        """The text of the progress line as it would be drawn now."""
        elapsed = time.monotonic() - self.started
        parts = [self.label]
        if self.total:
            share = min(1.0, self.done / self.total)
            filled = round(share * WIDTH)
            parts.append(f"[{'#' * filled}{'.' * (WIDTH - filled)}] {self.done}/{self.total} {share:>4.0%}")
            if 0 < self.done < self.total:
                left = elapsed / self.done * (self.total - self.done)
                parts.append(f"{_duration(elapsed)} elapsed, ~{_duration(left)} left")
            else:
                parts.append(_duration(elapsed))
        else:
            if self.done:
                parts.append(str(self.done))
            parts.append(f"{_duration(elapsed)} elapsed")
        if self.note:
            parts.append(self.note)
        return "  ".join(parts)

    def _draw(self, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        with self._lock:
            if not force and now - self._last_draw < MIN_INTERVAL_S:
                return
            self._last_draw = now
            text = self.line()
            columns = _columns()
            if len(text) > columns - 1:
                text = text[: max(10, columns - 2)] + "…"
            pad = max(0, self._width - len(text))
            self._write("\r" + text + " " * pad)
            self._width = len(text)

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):  # the terminal went away: progress is never worth a failure
            self.enabled = False

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            self._draw(force=True)


def _columns() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except (OSError, ValueError, AttributeError):
        return 100


def track(items: Iterable[T], label: str, total: int | None = None, *, stream: TextIO | None = None,
          enabled: bool | None = None) -> Iterator[T]:
    """Iterate ``items`` with a progress line (``total`` defaults to ``len(items)`` when it has one)."""
    if total is None:
        try:
            total = len(items)  # type: ignore[arg-type]
        except TypeError:
            total = None
    with Progress(label, total, stream=stream, enabled=enabled) as bar:
        for item in items:
            yield item
            bar.advance()
