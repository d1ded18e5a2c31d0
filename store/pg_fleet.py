"""The fleet's heartbeats on PostgreSQL (``bosun_daemons``; store/fleet.py says what they are for)."""

from __future__ import annotations

import time
from dataclasses import astuple, fields

from bosun.store.fleet import FORGET_S, Member
from bosun.store.pg_db import PgDatabase

_COLUMNS = [f.name for f in fields(Member)]


class PgFleet:
    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def beat(self, member: Member) -> None:
        cols = ", ".join(_COLUMNS)
        marks = ", ".join(["%s"] * len(_COLUMNS))
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in _COLUMNS if c != "origin")
        async with self.db.connection("record this daemon's heartbeat", wrote=True) as conn:
            await conn.execute(f"INSERT INTO bosun_daemons ({cols}) VALUES ({marks}) "
                               f"ON CONFLICT (origin) DO UPDATE SET {updates}", astuple(member))
            await conn.execute("DELETE FROM bosun_daemons WHERE seen_at < %s", (time.time() - FORGET_S,))

    async def members(self) -> list[Member]:
        rows = await self.db.fetch(f"SELECT {', '.join(_COLUMNS)} FROM bosun_daemons", (), "read the fleet")
        return [Member(*row) for row in rows]
