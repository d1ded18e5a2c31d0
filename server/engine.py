"""The Engine: the warm state one bosun process holds for every transport.

It owns the database connection, the stores, the embedding model (loaded in the
background so ``initialize`` is answered at once; tools that need it await
``embedder()``), and one typed service per capability, built together in
``_compose``. Tools reach a service as an attribute (``engine.tasks``,
``engine.policies``, ...); background work is owned by ``engine.background`` so a
shutdown stops it within a deadline.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import aiosqlite
import anyio
import numpy as np

import bosun
from bosun.core.embedding import CachingEmbedder, Embedder, Vectors, text_key
from bosun.core.errors import BosunError
from bosun.core.judge import Judge
from bosun.core.redact import Redactor
from bosun.server.background import Background
from bosun.server.config import Config
from bosun.server.services.audit import AuditService
from bosun.server.services.checkpoint import CheckpointService
from bosun.server.services.compass import CompassService
from bosun.server.services.files import FileService
from bosun.server.services.handoff import HandoffService
from bosun.server.services.ledger import LedgerService
from bosun.server.services.observe import ObserveService
from bosun.server.services.plan import PlanService
from bosun.server.services.policies import PolicyService
from bosun.server.services.precheck import PrecheckService
from bosun.server.services.recall import RecallService, RefResolver
from bosun.server.services.select import SelectService
from bosun.server.services.tasks import TaskService
from bosun.store.backend import Stores, open_stores
from bosun.store.embeddings import EmbeddingStore
from bosun.store.idempotency import IdempotencyStore
from bosun.store.private import private_dir
from bosun.store.refs import RefStore

log = logging.getLogger("bosun.engine")

EmbedderFactory = Callable[[Config], Embedder]
JudgeFactory = Callable[[Config], "Judge | None"]
CLOSE_DEADLINE_S = 2.0  # background work gets this long to stop before the stores close


class ModelUnavailable(BosunError):
    """The embedding model failed to load or did not become ready in time."""


def default_embedder_factory(config: Config) -> Embedder:
    from bosun.server.model import ModelSpec, load_embedder

    spec = ModelSpec(threads=config.model_threads, model_dir=config.model_dir)
    if config.model_name:
        spec.name = config.model_name
    return load_embedder(config.home, spec)


def default_judge_factory(config: Config) -> Judge | None:
    from bosun.server.judge_model import load_judge

    return load_judge(config.home, config.judge, config.model_threads)


class Engine:
    """Holds the warm state; created once per process, opened by the first transport."""

    def __init__(self, config: Config | None = None, embedder_factory: EmbedderFactory | None = None,
                 judge_factory: JudgeFactory | None = None) -> None:
        self.config = config or Config.from_env()
        self._embedder_factory = embedder_factory or default_embedder_factory
        # an injected embedder (tests, benches) runs without the shipped judge unless one is injected too
        self._judge_factory = judge_factory or (default_judge_factory if embedder_factory is None else None)
        self.started_at = time.time()
        self.stores: Stores | None = None  # store/backend.py: SQLite in BOSUN_HOME or PostgreSQL
        self.db: aiosqlite.Connection | None = None  # SQLite's writer (store/db.py: the connection policy)
        self._reader: aiosqlite.Connection | None = None  # SQLite's reader: every tool read
        self.idempotency: IdempotencyStore | None = None
        self.admission: Any = None  # server/idempotency.py's Admission, once a server is built
        self._refs: RefStore | None = None
        self._embedding_store: EmbeddingStore | None = None
        self._embedder: CachingEmbedder | None = None
        self._ready = asyncio.Event()
        self._load_task: asyncio.Task[None] | None = None
        self.model_state = "not_started"  # not_started | loading | ready | failed
        self.model_error: str | None = None
        self.model_load_seconds: float | None = None
        self.model_ready_at: float | None = None  # wall-clock time the model became ready
        self.model_loads = 0
        self._embed_lock = asyncio.Lock()
        self._judge: Judge | None = None
        self._judge_ready = asyncio.Event()
        self.judge_state = "not_started"  # not_started | loading | ready | failed | off
        self.judge_error: str | None = None
        self.judge_load_seconds: float | None = None
        self.background = Background()
        self._compose()

    def _compose(self) -> None:
        """Build every service once, each with what it needs (the one composition point)."""
        cfg = self.config
        # one redactor: secrets are scrubbed the same way before anything is hashed, stored or compared
        self.redactor = Redactor(cfg.redact_disable, cfg.redact_extra)
        # the Engine is the stores' view (``refs``, ``store_set``) and the models' (``embed``, ``judge``) that
        # services are typed by (services/ports.py): they open after this, so services read them at call time
        self.tasks = TaskService(self, self.redactor)
        self.ledger = LedgerService(self.tasks, cfg.prices, cfg.price_model)
        resolver = RefResolver(self)
        self.files = FileService(cfg, self, self.tasks, self.redactor)
        self.observe = ObserveService(cfg, self, self.tasks, self.redactor, resolver, self.files)
        self.recall = RecallService(self.tasks, resolver)
        self.precheck = PrecheckService(cfg, self.tasks, self.redactor, self.ledger)
        self.handoff = HandoffService(self, self.tasks, resolver)
        self.plan = PlanService(self.tasks, self.ledger, cfg)
        self.checkpoint = CheckpointService(cfg, self, self.tasks, self.ledger)
        self.policies = PolicyService(self)
        self.compass = CompassService(self)  # route over a caller's tool list: one warm index per list
        self.select = SelectService(self, self.policies)
        self.audit = AuditService(self)

    # -- lifecycle -------------------------------------------------------------------------
    async def open(self, watch_policies: bool = True) -> None:
        """Open the store and start loading the model (and the policy corpus) in the background.

        ``watch_policies=False`` is for one-shot CLI commands that never route.
        """
        private_dir(self.config.home)
        stores = self.stores = await open_stores(self.config.db_path, self.config.database_url)
        self.db, self._reader = stores.conn, stores.reader
        self._refs = stores.refs
        self._embedding_store = stores.embeddings
        self.idempotency = stores.idempotency
        try:
            # another daemon's task write (PostgreSQL) reaches this daemon's subscriptions like a local one
            await stores.watch_tasks(self._task_changed_elsewhere, self._tasks_changed_unseen)
            await self.idempotency.prune()
        except BaseException:
            await stores.aclose()  # a failed open leaves no pool or thread behind
            self.stores = self.db = self._reader = None
            raise
        self._load_task = self.background.spawn(self._load_model(), "model-load")
        self.background.spawn(self._load_judge(), "judge-load")
        if watch_policies:
            self.policies.start()

    async def close(self) -> None:
        """Stop background work within ``CLOSE_DEADLINE_S``, then close the stores (never cancelled midway)."""
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(CLOSE_DEADLINE_S):
                await self.policies.aclose()
            await self.background.aclose(CLOSE_DEADLINE_S)
            await self.tasks.aclose()
            if self.stores is not None:
                await self.stores.aclose()  # finishes the blob writes already submitted, then closes
            self.db = self._reader = None

    def _task_changed_elsewhere(self, task_id: str) -> None:
        """Another daemon wrote ``task_id``: bring the cached state up to date (one incremental read, so an
        update based on the version that daemon answered is not refused as stale here), then tell this
        daemon's listeners (manifest subscriptions, the dashboard) as if the write had been local."""
        if task_id not in self.tasks._states or self.background.stopping.is_set():
            self.tasks.changes.notify(task_id)
            return

        async def catch_up() -> None:
            try:
                await self.tasks.get(task_id)
            except Exception:  # the listeners still hear of it; their own read reports any failure
                log.warning("catching up task %s after another daemon's write failed", task_id, exc_info=True)
            self.tasks.changes.notify(task_id)

        self.background.spawn(catch_up(), f"catch-up-{task_id}")

    def _tasks_changed_unseen(self) -> None:
        """The change listener reconnected: notices may have been missed, so every task held is news."""
        for task_id in list(self.tasks._states):
            self.tasks.changes.notify(task_id)

    async def _load_model(self) -> None:
        self.model_state = "loading"
        self.model_loads += 1
        t0 = time.perf_counter()
        try:
            inner = await self.background.in_thread(self._embedder_factory, self.config)
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

    async def _load_judge(self) -> None:
        """The cross-encoder judge, beside the embedder: route and audit use it once it is ready."""
        if self._judge_factory is None or self.config.judge.strip().lower() in ("off", "0", "false", "none"):
            self.judge_state = "off"
            self._judge_ready.set()
            return
        self.judge_state = "loading"
        t0 = time.perf_counter()
        try:
            judge = await self.background.in_thread(self._judge_factory, self.config)
        except Exception as exc:  # shown in /healthz and on every answer that would have used it
            self.judge_state = "failed"
            self.judge_error = f"{type(exc).__name__}: {exc}"
            log.error("judge failed to load: %s", self.judge_error)
            self._judge_ready.set()
            return
        self._judge = judge
        self.judge_state = "off" if judge is None else "ready"
        self.judge_load_seconds = time.perf_counter() - t0
        self._judge_ready.set()
        if judge is not None:
            log.info("judge %s ready in %.2fs", judge.model_id(), self.judge_load_seconds)

    async def judge(self) -> Judge | None:
        """The warm judge (waiting for its load like ``embedder``), or None when it is off or failed to load
        (the callers then score without it and say so)."""
        if not self._judge_ready.is_set():
            try:
                with anyio.fail_after(self.config.model_timeout_s):
                    await self._judge_ready.wait()
            except TimeoutError:
                return None
        return self._judge

    def judge_notice(self) -> str | None:
        """One line for an answer scored without the judge because it failed to load."""
        if self.judge_state == "failed":
            return f"scored without the judge, which failed to load: {self.judge_error}"
        return None

    def judge_health(self) -> dict[str, Any]:
        out: dict[str, Any] = {"state": self.judge_state}
        if self._judge is not None:
            out["model"] = self._judge.model_id()
        if self.judge_load_seconds is not None:
            out["load_seconds"] = round(self.judge_load_seconds, 3)
        if self.judge_error:
            out["error"] = self.judge_error
        return out

    # -- access ----------------------------------------------------------------------------
    @property
    def refs(self) -> RefStore:
        if self._refs is None:
            raise RuntimeError("engine is not open")
        return self._refs

    @property
    def store_set(self) -> Stores:
        """Every store of the open backend (services use these Protocols, never a connection)."""
        if self.stores is None:
            raise RuntimeError("engine is not open")
        return self.stores

    @property
    def conn(self) -> aiosqlite.Connection:
        """SQLite's writer connection (writes only; reads go to ``reader``); tests and SQLite tooling only."""
        if self.db is None:
            raise RuntimeError("engine is not open" if self.stores is None else
                               f"the {self.stores.backend} backend has no SQLite connection")
        return self.db

    @property
    def reader(self) -> aiosqlite.Connection:
        """SQLite's read-only connection (the writer for an in-memory database); SQLite tooling only."""
        if self.db is None:
            raise RuntimeError("engine is not open" if self.stores is None else
                               f"the {self.stores.backend} backend has no SQLite connection")
        return self._reader or self.db

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
        """Embed with a two-level cache by content hash: memory, then the store, then the model.

        A text whose vector is known is never embedded again: hits refresh their place in the memory
        LRU, the answer is assembled from the vectors found by this call (an LRU smaller than the call
        cannot evict them before they are read), and texts another caller is embedding are looked up
        again once the model lock is ours (two agents selecting from one new pool embed it once).
        """
        emb = await self.embedder()
        if not texts:
            return np.zeros((0, emb.dimension()), dtype=np.float32)
        keys = [text_key(t) for t in texts]
        found: dict[str, Vectors] = {}
        for key in dict.fromkeys(keys):
            vec = emb.get(key)
            if vec is not None:
                emb.put(key, vec)  # recently used: kept over cold entries
                found[key] = vec
        missing = [k for k in dict.fromkeys(keys) if k not in found]
        if missing and self._embedding_store is not None:
            stored = await self._embedding_store.get_many(emb.model_id(), missing)
            for key, vec in stored.items():
                emb.put(key, vec)
            found.update(stored)
            missing = [k for k in missing if k not in found]
        if missing:
            async with self._embed_lock:  # in a thread: inference on the loop would stall every agent
                for key in missing:  # embedded by another caller while this one waited for the lock
                    vec = emb.get(key)
                    if vec is not None:
                        found[key] = vec
                todo = set(missing) - found.keys()
                first = {k: t for k, t in zip(keys, texts, strict=True) if k in todo}
                fresh = (await self.background.in_thread(emb.inner.embed, list(first.values())) if first
                         else np.zeros((0, emb.dimension()), dtype=np.float32))
                for key, vec in zip(first, fresh, strict=True):
                    emb.put(key, vec)
                    found[key] = vec
            if first and self._embedding_store is not None:
                await self._embedding_store.put_many(emb.model_id(), zip(first, fresh, strict=True))
        out = np.empty((len(texts), emb.dimension()), dtype=np.float32)
        for i, key in enumerate(keys):
            out[i] = found[key]
        return out

    def _store_health(self) -> dict[str, Any]:
        """The store entry of /healthz: backend, where (no password), schema version."""
        if self.stores is None:
            from bosun.store.schema import SCHEMA_VERSION

            return {"backend": "postgresql" if self.config.database_url else "sqlite",
                    "path": str(self.config.db_path), "schema_version": SCHEMA_VERSION, "open": False}
        entry: dict[str, Any] = {"backend": self.stores.backend, "schema_version": self.stores.schema_version}
        entry["path" if self.stores.backend == "sqlite" else "url"] = self.stores.location
        return entry

    def health(self, detail: bool = True) -> dict[str, Any]:
        """The body of GET /healthz; without ``detail`` liveness only (no paths, versions or errors)."""
        if not detail:
            return {"status": "ok" if self.model_ready() else ("failed" if self.model_state == "failed" else "starting")}
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
            "judge": self.judge_health(),
            "route_index": self.policies.index_state(),
            "store": self._store_health(),
            "admission": None if self.admission is None else {
                "max_inflight": self.admission.max_inflight, "waiting": self.admission.waiting,
                "refused": self.admission.refused},
            "uptime_s": round(time.time() - self.started_at, 3),
        }
