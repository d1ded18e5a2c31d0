"""The embedding cache and the idempotency records on PostgreSQL (same contracts as the SQLite ones)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import numpy as np

from bosun.core.embedding import Vectors
from bosun.store.idempotency import RETENTION_S, Record
from bosun.store.pg_db import PgDatabase


class PgEmbeddingStore:
    """Vectors in the ``embeddings`` table, float32 bytes."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def get_many(self, model_id: str, keys: Sequence[str]) -> dict[str, Vectors]:
        found: dict[str, Vectors] = {}
        for start in range(0, len(keys), 1000):
            chunk = list(keys[start : start + 1000])
            rows = await self.db.fetch("SELECT sha256, dim, vec FROM embeddings WHERE model_id = %s "
                                       "AND sha256 = ANY(%s)", (model_id, chunk), "read cached embeddings")
            for sha, dim, blob in rows:
                vec = np.frombuffer(bytes(blob), dtype=np.float32)
                if vec.shape[0] == int(dim):
                    found[str(sha)] = vec
        return found

    async def put_many(self, model_id: str, items: Iterable[tuple[str, Vectors]]) -> None:
        rows = [(model_id, key, int(vec.shape[0]), np.asarray(vec, np.float32).tobytes()) for key, vec in items]
        if not rows:
            return
        async with self.db.connection("cache embeddings", wrote=True) as conn:
            async with conn.cursor() as cur:
                await cur.executemany(
                    "INSERT INTO embeddings (model_id, sha256, dim, vec) VALUES (%s, %s, %s, %b) "
                    "ON CONFLICT (model_id, sha256) DO UPDATE SET dim = EXCLUDED.dim, vec = EXCLUDED.vec", rows)


class PgIdempotencyStore:
    """The ``idempotency`` table (rows are inserted by the journal's trigger, never here)."""

    def __init__(self, db: PgDatabase) -> None:
        self.db = db

    async def get(self, key: str) -> Record | None:
        rows = await self.db.fetch("SELECT key, task_id, seq, created_at, fingerprint, answer FROM idempotency "
                                   "WHERE key = %s", (key,), "look up the idempotency key")
        if not rows:
            return None
        r = rows[0]
        return Record(str(r[0]), str(r[1]), int(r[2]), float(r[3]), r[4], r[5])

    async def keep_answer(self, key: str, fingerprint: str, answer: str | None) -> None:
        await self.db.run("UPDATE idempotency SET fingerprint = %s, answer = %s WHERE key = %s AND answer IS NULL",
                          (fingerprint, answer, key), "keep the call's answer")

    async def prune(self, older_than_s: float = RETENTION_S) -> None:
        await self.db.run("DELETE FROM idempotency WHERE created_at < %s", (time.time() - older_than_s,),
                          "prune idempotency keys")
