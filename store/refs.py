"""Content-addressed blobs: ``mem://sha256:<hex>``, verified on every read.

``RefStore`` is the seam for a second backend (PostgreSQL, object storage):
the Engine and the tools only see the protocol.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import aiosqlite

from bosun.core.errors import IntegrityError, InvalidInput, NotFound

REF_PREFIX = "mem://sha256:"
_HEX = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class RefInfo:
    """What is known about a stored blob without reading it."""

    sha256: str
    media_type: str
    size: int
    created_at: float

    @property
    def ref(self) -> str:
        return REF_PREFIX + self.sha256


def make_ref(digest: str) -> str:
    return REF_PREFIX + digest


def parse_ref(ref: str, field: str = "ref") -> str:
    """Accept ``mem://sha256:<hex>``, ``sha256:<hex>``, ``bosun://ref/<hex>`` or bare hex."""
    if not isinstance(ref, str) or not ref.strip():
        raise InvalidInput(field, "must be a non-empty string", "mem://sha256:<64 hex chars>")
    text = ref.strip()
    for prefix in (REF_PREFIX, "sha256:", "bosun://ref/"):
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    text = text.lower()
    if not _HEX.match(text):
        raise InvalidInput(field, f"not a content address: {ref[:80]!r}", "mem://sha256:<64 hex chars>")
    return text


class RefStore(Protocol):
    """Persistence of content-addressed blobs."""

    async def put(self, data: bytes, media_type: str = "text/plain") -> str: ...

    async def put_many(self, items: Iterable[tuple[bytes, str]]) -> list[str]: ...

    async def get(self, ref: str) -> bytes: ...

    async def info(self, ref: str) -> RefInfo: ...

    async def exists(self, ref: str) -> bool: ...

    async def verify(self, ref: str) -> bool: ...


class SQLiteRefStore:
    """Blobs in the ``refs`` table of the bosun database."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self.conn = conn

    async def put(self, data: bytes, media_type: str = "text/plain") -> str:
        return (await self.put_many([(data, media_type)]))[0]

    async def put_many(self, items: Iterable[tuple[bytes, str]]) -> list[str]:
        """Store blobs in one transaction; idempotent (same bytes, same ref)."""
        rows = []
        refs = []
        now = time.time()
        for data, media_type in items:
            if not isinstance(data, bytes | bytearray | memoryview):
                raise InvalidInput("data", f"must be bytes, got {type(data).__name__}")
            blob = bytes(data)
            digest = hashlib.sha256(blob).hexdigest()
            rows.append((digest, media_type, len(blob), blob, now))
            refs.append(make_ref(digest))
        if rows:
            await self.conn.executemany(
                "INSERT OR IGNORE INTO refs (sha256, media_type, size, data, created_at) VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            await self.conn.commit()
        return refs

    async def get(self, ref: str) -> bytes:
        """The bytes behind ``ref``, re-hashed: raises IntegrityError rather than return wrong bytes."""
        digest = parse_ref(ref)
        rows = list(await self.conn.execute_fetchall("SELECT data FROM refs WHERE sha256 = ?", (digest,)))
        if not rows:
            raise NotFound("ref", make_ref(digest), "it was never stored here (check BOSUN_HOME)")
        data = bytes(rows[0][0])
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest:
            raise IntegrityError(
                f"ref {make_ref(digest)} failed verification: stored bytes hash to sha256:{actual}; "
                "the store was altered outside bosun"
            )
        return data

    async def info(self, ref: str) -> RefInfo:
        digest = parse_ref(ref)
        rows = list(
            await self.conn.execute_fetchall(
                "SELECT media_type, size, created_at FROM refs WHERE sha256 = ?", (digest,)
            )
        )
        if not rows:
            raise NotFound("ref", make_ref(digest))
        row = rows[0]
        return RefInfo(sha256=digest, media_type=row[0], size=int(row[1]), created_at=float(row[2]))

    async def exists(self, ref: str) -> bool:
        digest = parse_ref(ref)
        return bool(list(await self.conn.execute_fetchall("SELECT 1 FROM refs WHERE sha256 = ?", (digest,))))

    async def verify(self, ref: str) -> bool:
        """True when the blob is present and intact."""
        try:
            await self.get(ref)
        except (NotFound, IntegrityError):
            return False
        return True
