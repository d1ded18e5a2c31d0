"""Progress notifications for long tool calls (a first route while the index builds, a large audit,
``select_context`` over a big pool).

A tool hands ``progress_reporter(ctx)`` to its service, which awaits it with
``(progress, total, message)`` at the points it waits. The reporter is what the spec asks of
progress and what a tool must not have to think about:

- it sends nothing unless the caller asked (the SDK drops a report when the request carried no
  ``progressToken``; the in-memory client passes its callback instead of a token);
- the value strictly increases from one notification to the next (MUST in the spec), even when a
  service reports the same step twice ("still waiting for the model after 10 s");
- a report never fails the call: a client that went away while the tool works only loses the
  notification (the answer is what matters).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

log = logging.getLogger("bosun.server")

Progress = Callable[[float, float | None, str | None], Awaitable[None]]
STEP = 1e-3  # the nudge that keeps a repeated value increasing (progress is a fraction or a count)


class ProgressReporter:
    """Reports the progress of one request through ``send``, increasing and never raising."""

    def __init__(self, send: Callable[[float, float | None, str | None], Awaitable[None]]) -> None:
        self._send = send
        self._last: float | None = None

    async def __call__(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        value = float(progress)
        if self._last is not None and value <= self._last:
            value = self._last + STEP
        if total is not None and value > total:
            total = value  # a nudged value past the total: the total grows with it, never below progress
        self._last = value
        try:
            await self._send(value, total, message)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, anyio.EndOfStream):
            log.debug("progress notification dropped: the client's stream is closed")


def progress_reporter(ctx: Any) -> ProgressReporter:
    """The reporter of the request behind a tool's ``Context`` (``ctx.report_progress``, made safe)."""
    return ProgressReporter(ctx.report_progress)
