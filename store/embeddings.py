"""Persistent embedding cache keyed by (model id, sha256 of the text).

A restart or a corpus reload re-embeds only texts it has never seen.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import aiosqlite
import numpy as np

from bosun.core.embedding import Vectors
from bosun.store.db import fetch, run_many


class EmbeddingStore(Protocol):
    """The persistent embedding cache (either backend)."""

    async def get_many(self, model_id: str, keys: Sequence[str]) -> dict[str, Vectors]: ...

    async def put_many(self, model_id: str, items: Iterable[tuple[str, Vectors]]) -> None: ...


class SQLiteEmbeddingStore:
    """Vectors in the ``embeddings`` table, float32 bytes."""

    def __init__(self, conn: aiosqlite.Connection, reader: aiosqlite.Connection | None = None) -> None:
        self.conn = conn
        self.reader = reader or conn

    async def get_many(self, model_id: str, keys: Sequence[str]) -> dict[str, Vectors]:
        found: dict[str, Vectors] = {}
        for start in range(0, len(keys), 500):
            chunk = list(keys[start : start + 500])
            marks = ",".join("?" * len(chunk))
            rows = await fetch(self.reader,
                               f"SELECT sha256, dim, vec FROM embeddings WHERE model_id = ? AND sha256 IN ({marks})",
                               (model_id, *chunk), "read cached embeddings")
            for sha, dim, blob in rows:
                vec = np.frombuffer(bytes(blob), dtype=np.float32)
                if vec.shape[0] == int(dim):
                    found[sha] = vec
        return found

    async def put_many(self, model_id: str, items: Iterable[tuple[str, Vectors]]) -> None:
        rows = [(model_id, key, int(vec.shape[0]), np.asarray(vec, np.float32).tobytes()) for key, vec in items]
        if rows:
            await run_many(self.conn, "INSERT OR REPLACE INTO embeddings (model_id, sha256, dim, vec) VALUES (?, ?, ?, ?)",
                           rows, "cache embeddings")
