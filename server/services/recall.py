"""RecallService: read only the needed part of a stored payload, verified against its hash.

Also resolves the short refs observe hands out (``mem://sha256:<16 hex>``) to full digests,
through the store's prefix index, for recall and for drop receipts.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from bosun.core.offload.offload import short_ref
from bosun.core.offload.query import run_query
from bosun.core.tokens import estimate_tokens
from bosun.server.services.tasks import TaskService
from bosun.store.refindex import RefIndex, SQLiteRefIndex
from bosun.store.refs import SQLiteRefStore, make_ref, verified

if TYPE_CHECKING:
    from bosun.server.services.ports import OpenStores

OFF_LOOP_BYTES = 256 * 1024  # smaller payloads answer in well under a millisecond: a thread hop would cost more


class RefResolver:
    """Full digests for full or short refs (the index opens with the stores)."""

    def __init__(self, stores: OpenStores) -> None:
        self.stores = stores
        self._index: RefIndex | None = None

    async def resolve(self, ref: str, field: str = "ref") -> str:
        if self._index is None:
            self._index = self.stores.store_set.ref_index  # SQLite or PostgreSQL (store/backend.py)
        return await self._index.resolve(ref, field)

    async def read(self, ref: str) -> tuple[str, bytes]:
        """(digest, verified bytes) of a full or short ref: on SQLite a short ref is resolved and read in one
        reader hop instead of two (each hop is a thread handoff: a third of recall's own CPU)."""
        if self._index is None:
            self._index = self.stores.store_set.ref_index
        index, refs = self._index, self.stores.refs
        if isinstance(index, SQLiteRefIndex) and isinstance(refs, SQLiteRefStore) and index.conn is refs.reader:
            digest, data = await index.resolve_with_data(ref)
            if data is not None:
                return digest, await verified(digest, data)
        else:
            digest = await index.resolve(ref)
        return digest, await refs.get(digest)


class RecallService:
    """recall(ref, op, ...) and the ledger entry it leaves when the caller names its task."""

    def __init__(self, tasks: TaskService, refs: RefResolver) -> None:
        self.tasks = tasks
        self.resolver = refs

    async def recall(self, ref: str, op: str, task_id: str | None = None, **query: Any) -> tuple[dict[str, Any], str]:
        """Run one recall op on a stored payload: (structured answer, model-facing text).

        The bytes come through ``RefStore.get`` (re-hashed on every read); the text is the
        recalled part under a one-line header, not JSON-escaped.
        """
        digest, data = await self.resolver.read(ref)
        # scoring a query over a large payload is pure Python: in a thread the event loop keeps serving
        # the other agents (the GIL is handed over every few ms) instead of waiting for the whole scan
        res = await asyncio.to_thread(run_query, data, op, **query) if len(data) > OFF_LOOP_BYTES else \
            run_query(data, op, **query)
        out: dict[str, Any] = {"ref": short_ref(digest), "op": op, "text": res.text, "total_bytes": res.total_bytes,
                               "total_lines": res.total_lines, "truncated": res.truncated}
        if res.note:
            out["note"] = res.note
        out.update(res.extra)
        meta = {k: v for k, v in out.items() if k not in ("text", "ref", "recall")}
        text = f"[{short_ref(digest)} {' '.join(f'{k}={v}' for k, v in meta.items())}]\n{res.text}"
        if task_id is not None:
            await self.note_recall(task_id, make_ref(digest), op, estimate_tokens(text))
        return out, text

    async def note_recall(self, task_id: str, ref: str, op: str, tokens: int) -> None:
        await self.tasks.append(task_id, "recalled", {"ref": ref, "op": op, "tokens": tokens})
