"""Engine.embed, the cache select_context and route share: a text with a known vector is never embedded again."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import numpy as np

from bosun.core.embedding import CachingEmbedder, HashEmbedder
from bosun.server.config import Config
from bosun.server.engine import Engine


class CountingEmbedder(HashEmbedder):
    """A HashEmbedder that counts every text the model is asked for (and can be held mid-call)."""

    def __init__(self) -> None:
        super().__init__(64)
        self.seen: list[str] = []
        self.gate = threading.Event()
        self.gate.set()

    def embed(self, texts: Any) -> Any:
        self.gate.wait(5)
        self.seen.extend(texts)
        return super().embed(texts)


async def _open(tmp_path: Path, model: CountingEmbedder) -> Engine:
    engine = Engine(Config(home=tmp_path, policies=[]), embedder_factory=lambda _c: model)
    await engine.open(watch_policies=False)
    await engine.embedder()
    return engine


async def test_concurrent_callers_embed_a_new_pool_once(tmp_path: Path) -> None:
    model = CountingEmbedder()
    engine = await _open(tmp_path, model)
    try:
        texts = [f"passage {i} about retries" for i in range(12)]
        model.gate.clear()  # the first caller holds the model while the second asks for the same texts
        first = asyncio.ensure_future(engine.embed(texts))
        await asyncio.sleep(0.05)
        second = asyncio.ensure_future(engine.embed(texts[::-1]))
        await asyncio.sleep(0.05)
        model.gate.set()
        a, b = await asyncio.gather(first, second)
        assert sorted(model.seen) == sorted(texts)  # each text once, not twice
        assert np.array_equal(a, b[::-1])
    finally:
        await engine.close()


async def test_a_memory_cache_smaller_than_the_call_does_not_re_embed(tmp_path: Path) -> None:
    model = CountingEmbedder()
    engine = await _open(tmp_path, model)
    try:
        emb = await engine.embedder()
        small = CachingEmbedder(model, max_items=3)  # far smaller than one call
        engine._embedder = small
        texts = [f"note {i}: the upload failed with 503" for i in range(10)]
        out = await engine.embed(texts)
        assert model.seen == texts
        assert np.allclose(out, HashEmbedder(64).embed(texts))
        model.seen.clear()
        again = await engine.embed(texts)  # evicted from memory, read back from the store
        assert model.seen == [] and np.array_equal(again, out)
        engine._embedder = emb
    finally:
        await engine.close()


async def test_hits_stay_warm_in_the_memory_cache(tmp_path: Path) -> None:
    model = CountingEmbedder()
    engine = Engine(Config(home=tmp_path, policies=[]), embedder_factory=lambda _c: model)
    await engine.open(watch_policies=False)
    try:
        await engine.embedder()
        engine._embedding_store = None  # memory only: what stays warm is what the LRU keeps
        engine._embedder = CachingEmbedder(model, max_items=3)
        await engine.embed(["a goal", "b", "c"])
        await engine.embed(["a goal"])  # used again: the most recent
        await engine.embed(["d", "e"])  # two new entries evict the two coldest (b, c), not the goal
        model.seen.clear()
        await engine.embed(["a goal"])
        assert model.seen == []
    finally:
        await engine.close()
