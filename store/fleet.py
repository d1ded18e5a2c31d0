"""Which daemons serve this state: each one's heartbeat, so any of them can show the whole fleet.

On PostgreSQL every daemon (a sidecar, a ``--workers`` worker) upserts one row of
``bosun_daemons`` every ``BEAT_S`` seconds: who it is (host, pid, worker index, version), since
when, and its own counters (tool calls, failed calls, sessions, RSS). A row not refreshed for
``STALE_S`` is a daemon that stopped or died; rows older than ``FORGET_S`` are deleted by the next
beat. On SQLite a daemon is alone with its home (``serve.lock``), so the fleet is itself.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any, Protocol

BEAT_S = 5.0
STALE_S = 20.0  # four missed beats
FORGET_S = 3600.0


@dataclass
class Member:
    """One daemon's heartbeat."""

    origin: str
    host: str
    pid: int
    worker: int | None
    version: str
    started_at: float
    seen_at: float
    calls: int = 0
    errors: int = 0
    sessions: int = 0
    rss_kb: int = 0

    def as_dict(self, now: float | None = None) -> dict[str, Any]:
        out = asdict(self)
        out["alive"] = ((now or time.time()) - self.seen_at) <= STALE_S
        return out


class FleetStore(Protocol):
    async def beat(self, member: Member) -> None: ...

    async def members(self) -> list[Member]: ...


class LocalFleet:
    """SQLite: the one daemon of the home."""

    def __init__(self) -> None:
        self.me: Member | None = None

    async def beat(self, member: Member) -> None:
        self.me = member

    async def members(self) -> list[Member]:
        return [self.me] if self.me is not None else []


def summary(members: list[Member], now: float | None = None) -> dict[str, Any]:
    """What the dashboard and ``bosun stats`` show: the daemons alive, their totals, and the stale ones."""
    now = now or time.time()
    rows = [m.as_dict(now) for m in sorted(members, key=lambda m: (m.host, m.worker or 0, m.pid))]
    alive = [r for r in rows if r["alive"]]
    return {"daemons": len(alive), "hosts": len({r["host"] for r in alive}),
            "calls": sum(r["calls"] for r in alive), "errors": sum(r["errors"] for r in alive),
            "sessions": sum(r["sessions"] for r in alive), "members": rows}
