"""The fleet on the dashboard and in ``bosun stats``: this daemon's heartbeat, and every daemon's.

Each daemon (each ``--workers`` worker, each sidecar) beats into the store every few seconds
(``store/fleet.py``); the snapshot any daemon serves then lists them all with their calls, failed
calls, sessions and RSS. The tasks and savings on the dashboard come from the shared store, so they
are already the fleet's; routing and precheck figures come from each host's telemetry file.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from typing import Any, ClassVar

import anyio

import bosun
from bosun.store.fleet import BEAT_S, Member, summary

log = logging.getLogger("bosun.fleet")
SESSION_WINDOW_S = 300.0  # a session counts while it made a request in the last five minutes


class Tally:
    """This process's tool calls and failed calls (the Recorder counts them), and its recent sessions."""

    calls: ClassVar[int] = 0
    errors: ClassVar[int] = 0
    sessions: ClassVar[dict[str, float]] = {}


def rss_kb() -> int:
    try:
        with open(f"/proc/{os.getpid()}/status") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def me(engine: Any, worker: int | None, started_at: float) -> Member:
    stores = engine.stores
    origin = getattr(stores, "origin", "") or f"bosun:{socket.gethostname()[:32]}:{os.getpid()}"
    now = time.time()
    sessions = sum(1 for seen in list(Tally.sessions.values()) if now - seen <= SESSION_WINDOW_S)
    return Member(origin, socket.gethostname()[:64], os.getpid(), worker, bosun.__version__, started_at, now,
                  Tally.calls, Tally.errors, sessions, rss_kb())


async def heartbeat(engine: Any, worker: int | None, stop: anyio.Event) -> None:
    """Beat every ``BEAT_S`` until ``stop``; a failed beat (the database restarting) is logged, not fatal."""
    started_at = time.time()
    while not stop.is_set():
        if engine.stores is not None:
            try:
                await engine.stores.fleet.beat(me(engine, worker, started_at))
            except Exception as exc:
                log.debug("fleet heartbeat failed: %s", exc)
        with anyio.move_on_after(BEAT_S):
            await stop.wait()


async def fleet_snapshot(engine: Any) -> dict[str, Any]:
    """The fleet as the dashboard draws it (``summary``), or ``{"error": ...}`` when the store cannot say."""
    if engine.stores is None:
        return {"daemons": 0, "hosts": 0, "calls": 0, "errors": 0, "sessions": 0, "members": []}
    try:
        return summary(await engine.stores.fleet.members())
    except Exception as exc:
        return {"error": str(exc), "daemons": 0, "hosts": 0, "calls": 0, "errors": 0, "sessions": 0, "members": []}
