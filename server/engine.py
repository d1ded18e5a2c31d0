"""The Engine: the warm state one bosun process holds for every transport.

It owns the database connection, the stores, and the embedding model, which
loads in a background task so ``initialize`` is answered at once; tools that
need the model await ``embedder()``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar, cast

import aiosqlite
import anyio
import numpy as np

import bosun
from bosun.core.embedding import CachingEmbedder, Embedder, Vectors, text_key
from bosun.core.errors import BosunError
from bosun.server.config import Config
from bosun.server.services.audit import AuditService
from bosun.store.db import open_db
from bosun.store.embeddings import SQLiteEmbeddingStore
from bosun.store.refs import BlobWriter, RefStore, SQLiteRefStore
from bosun.store.schema import SCHEMA_VERSION

log = logging.getLogger("bosun.engine")

EmbedderFactory = Callable[[Config], Embedder]
T = TypeVar("T")


class ModelUnavailable(BosunError):
    """The embedding model failed to load or did not become ready in time."""


def default_embedder_factory(config: Config) -> Embedder:
    from bosun.server.model import ModelSpec, load_embedder

    spec = ModelSpec(threads=config.model_threads, model_dir=config.model_dir)
    if config.model_name:
        spec.name = config.model_name
    return load_embedder(config.home, spec)


class Engine:
    """Holds the warm state; created once per process, opened by the first transport."""

    def __init__(self, config: Config | None = None, embedder_factory: EmbedderFactory | None = None) -> None:
        self.config = config or Config()
        self._embedder_factory = embedder_factory or default_embedder_factory
        self.started_at = time.time()
        self.db: aiosqlite.Connection | None = None
        self._refs: RefStore | None = None
        self._embedding_store: SQLiteEmbeddingStore | None = None
        self._embedder: CachingEmbedder | None = None
        self._ready = asyncio.Event()
        self._load_task: asyncio.Task[None] | None = None
        self.model_state = "not_started"  # not_started | loading | ready | failed
        self.model_error: str | None = None
        self.model_load_seconds: float | None = None
        self.model_ready_at: float | None = None  # wall-clock time the model became ready
        self.model_loads = 0
        self.extensions: dict[str, Any] = {}  # per-feature warm state (policy index, loop guards, ...)
        self._embed_lock = asyncio.Lock()

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self) -> None:
        """Open the store and start loading the model in the background."""
        self.config.home.mkdir(parents=True, exist_ok=True)
        self.db = await open_db(self.config.db_path)
        path = str(self.config.db_path)
        self._refs = SQLiteRefStore(self.db, None if path == ":memory:" else BlobWriter(path))
        self._embedding_store = SQLiteEmbeddingStore(self.db)
        self._load_task = asyncio.get_running_loop().create_task(self._load_model())

    async def close(self) -> None:
        if self._load_task is not None and not self._load_task.done():
            self._load_task.cancel()
            try:
                await self._load_task
            except (asyncio.CancelledError, Exception):
                pass
        for hook in list(self.extensions.values()):
            closer = getattr(hook, "aclose", None)
            if closer is not None:
                await closer()
        if isinstance(self._refs, SQLiteRefStore):
            await anyio.to_thread.run_sync(self._refs.close)  # waits for submitted writes
        if self.db is not None:
            await self.db.close()
            self.db = None

    async def _load_model(self) -> None:
        self.model_state = "loading"
        self.model_loads += 1
        t0 = time.perf_counter()
        try:
            inner = await anyio.to_thread.run_sync(self._embedder_factory, self.config)
        except Exception as exc:  # the operator must see why; never a silent lexical-only mode
            self.model_state = "failed"
            self.model_error = f"{type(exc).__name__}: {exc}"
            log.error("embedding model failed to load: %s", self.model_error)
            self._ready.set()
            return
        self._embedder = CachingEmbedder(inner)
        self.model_load_seconds = time.perf_counter() - t0
        self.model_ready_at = time.time()
        self.model_state = "ready"
        self._ready.set()
        log.info("model %s ready in %.2fs", inner.model_id(), self.model_load_seconds)

    # -- access ----------------------------------------------------------------------------
    @property
    def refs(self) -> RefStore:
        if self._refs is None:
            raise RuntimeError("engine is not open")
        return self._refs

    @property
    def conn(self) -> aiosqlite.Connection:
        if self.db is None:
            raise RuntimeError("engine is not open")
        return self.db

    def extension(self, key: str, factory: Callable[[Engine], T]) -> T:
        """The feature service stored under ``key``, created by ``factory(engine)`` on first use."""
        if key not in self.extensions:
            self.extensions[key] = factory(self)
        return cast(T, self.extensions[key])

    @property
    def audit(self) -> AuditService:
        return self.extension("audit", lambda engine: AuditService(engine))

    async def model_id(self) -> str:
        """The warm model's id (waits for the model like ``embedder``)."""
        return (await self.embedder()).model_id()

    def model_ready(self) -> bool:
        return self.model_state == "ready"

    async def embedder(self) -> CachingEmbedder:
        """The warm model, waiting for the background load if it is still running."""
        if not self._ready.is_set():
            try:
                with anyio.fail_after(self.config.model_timeout_s):
                    await self._ready.wait()
            except TimeoutError as exc:
                raise ModelUnavailable(
                    f"the embedding model is still loading after {self.config.model_timeout_s:.0f}s"
                ) from exc
        if self._embedder is None:
            raise ModelUnavailable(f"the embedding model failed to load: {self.model_error}; run `bosun provision --check`")
        return self._embedder

    async def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed with a two-level cache: memory, then the store, then the model (in a thread)."""
        emb = await self.embedder()
        if not texts:
            return np.zeros((0, emb.dimension()), dtype=np.float32)
        keys = [text_key(t) for t in texts]
        missing = [k for k in dict.fromkeys(keys) if emb.get(k) is None]
        if missing and self._embedding_store is not None:
            stored = await self._embedding_store.get_many(emb.model_id(), missing)
            for key, vec in stored.items():
                emb.put(key, vec)
            missing = [k for k in missing if k not in stored]
        if missing:
            first = {}
            for key, text in zip(keys, texts, strict=True):
                if key in missing and key not in first:
                    first[key] = text
            async with self._embed_lock:
                fresh = await anyio.to_thread.run_sync(emb.inner.embed, list(first.values()))
            for key, vec in zip(first, fresh, strict=True):
                emb.put(key, vec)
            if self._embedding_store is not None:
                await self._embedding_store.put_many(emb.model_id(), zip(first, fresh, strict=True))
        out = np.empty((len(texts), emb.dimension()), dtype=np.float32)
        for i, key in enumerate(keys):
            cached = emb.get(key)
            # evicted between put and read under a tiny LRU: recompute
            out[i] = cached if cached is not None else emb.inner.embed([texts[i]])[0]
        return out

    def health(self) -> dict[str, Any]:
        """The body of GET /healthz."""
        model_id = self._embedder.model_id() if self._embedder is not None else None
        return {
            "status": "ok" if self.model_ready() else ("failed" if self.model_state == "failed" else "starting"),
            "version": bosun.__version__,
            "model": {
                "id": model_id,
                "state": self.model_state,
                "error": self.model_error,
                "load_seconds": self.model_load_seconds,
                "ready_at": self.model_ready_at,
                "loads": self.model_loads,
            },
            "store": {"path": str(self.config.db_path), "schema_version": SCHEMA_VERSION},
            "uptime_s": round(time.time() - self.started_at, 3),
        }
