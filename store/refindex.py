"""Short refs: resolve a unique sha256 prefix to the full content address.

Stubs carry a 16-hex prefix (64 bits) to save prompt tokens; the full address
is what is stored, journaled and verified. An ambiguous or unknown prefix is a
clear error, never a guess.
"""

from __future__ import annotations

import re
from typing import Protocol

import aiosqlite

from bosun.core.errors import InvalidInput, NotFound
from bosun.store.db import INLINE_MAX_BYTES, InlineReader, fetch

MIN_PREFIX = 12
_HEXPART = re.compile(r"^[0-9a-f]+$")
_PREFIXES = ("mem://sha256:", "sha256:", "bosun://ref/")


def split_ref(ref: str, field: str = "ref") -> str:
    """The lower-case hex part of a ref in any accepted spelling (may be a prefix)."""
    if not isinstance(ref, str) or not ref.strip():
        raise InvalidInput(field, "must be a non-empty string", "mem://sha256:<hex> from observe")
    text = ref.strip()
    for prefix in _PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix) :]
            break
    text = text.lower()
    if not _HEXPART.match(text) or not MIN_PREFIX <= len(text) <= 64:
        raise InvalidInput(
            field, f"not a content address: {ref[:80]!r}", f"mem://sha256:<{MIN_PREFIX}..64 hex chars>"
        )
    return text


class RefIndex(Protocol):
    """Short-ref resolution and prefix completion over the stored refs (either backend)."""

    async def resolve(self, ref: str, field: str = "ref") -> str: ...

    async def complete(self, hexpart: str, limit: int) -> list[str]:
        """Up to ``limit`` stored digests starting with the lower-case hex ``hexpart``, in order."""
        ...


async def resolve_prefix(index: RefIndex, ref: str, field: str = "ref") -> str:
    """The one digest a full or short ref names, through ``index.complete`` (either backend)."""
    hexpart = split_ref(ref, field)
    if len(hexpart) == 64:
        return hexpart
    rows = await index.complete(hexpart, 2)
    if not rows:
        raise NotFound("ref", f"mem://sha256:{hexpart}", "no stored payload has this prefix")
    if len(rows) > 1:
        raise InvalidInput(field, f"prefix {hexpart} matches several refs", "give more hex digits or the full ref")
    return rows[0]


# the inline form of the lookup: the bytes only when small (size is len(data), written with it)
_SMALL_WITH_DATA = ("SELECT sha256, CASE WHEN size <= ? THEN data END FROM refs WHERE sha256 >= ? AND sha256 < ? "
                    "ORDER BY sha256 LIMIT 2")


class SQLiteRefIndex:
    """Prefix lookup over the ``refs`` table (a range scan on its primary key).

    Give it the reader connection (``db.open_reader``): the lookup then never touches the writer's
    connection, and it is one hop either way (see the connection policy in ``store/db.py``).
    """

    def __init__(self, conn: aiosqlite.Connection, inline: InlineReader | None = None) -> None:
        self.conn = conn
        self.inline = inline  # small rows answered on the loop's thread, without a hop (store/db.py)

    async def resolve(self, ref: str, field: str = "ref") -> str:
        return await resolve_prefix(self, ref, field)

    async def resolve_with_data(self, ref: str, field: str = "ref") -> tuple[str, bytes | None]:
        """``resolve`` plus the stored bytes, in one reader hop for a short ref (a recall would otherwise
        pay a second hop for ``RefStore.get``); bytes None for a full ref, which needs no lookup here.

        Same answers and errors as ``resolve``; the caller still verifies the bytes against the digest."""
        hexpart = split_ref(ref, field)
        if len(hexpart) == 64:
            return hexpart, None
        bounds = (hexpart, hexpart + "g")
        rows = self.inline.fetch(_SMALL_WITH_DATA, (INLINE_MAX_BYTES, *bounds)) if self.inline is not None else None
        if rows is None or (len(rows) == 1 and rows[0][1] is None):  # not answered inline, or a large blob
            rows = await fetch(self.conn, "SELECT sha256, data FROM refs WHERE sha256 >= ? AND sha256 < ? "
                               "ORDER BY sha256 LIMIT 2", bounds, "resolve a short ref")
        if not rows:
            raise NotFound("ref", f"mem://sha256:{hexpart}", "no stored payload has this prefix")
        if len(rows) > 1:
            raise InvalidInput(field, f"prefix {hexpart} matches several refs", "give more hex digits or the full ref")
        return str(rows[0][0]), bytes(rows[0][1])

    async def complete(self, hexpart: str, limit: int) -> list[str]:
        upper = hexpart + "g"  # 'g' sorts after every hex digit
        rows = await fetch(self.conn, "SELECT sha256 FROM refs WHERE sha256 >= ? AND sha256 < ? ORDER BY sha256 LIMIT ?",
                           (hexpart, upper, int(limit)), "resolve a short ref")
        return [str(r[0]) for r in rows]
