"""The Embedder protocol and the pure helpers around it.

Only ``bosun.server.model`` imports fastembed; everything else sees this
protocol, so tests can inject ``HashEmbedder`` where the test is about logic.
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of shape [n, d]."""

    def embed(self, texts: Sequence[str]) -> Vectors: ...

    def model_id(self) -> str: ...

    def dimension(self) -> int: ...

    def ready(self) -> bool: ...


def l2_normalise(vectors: npt.NDArray[np.floating]) -> Vectors:
    """Row-normalise; zero rows stay zero instead of becoming NaN."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim == 1:
        arr = arr[None, :]
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return (arr / norms).astype(np.float32, copy=False)


def cost_batches(tokens: Sequence[int], max_batch: int, budget: int) -> list[list[int]]:
    """Indices of the texts, shortest first, cut into batches of at most ``max_batch`` whose size x longest
    length^2 (``tokens`` per text) stays within ``budget``: a transformer's attention memory grows with that
    product, and onnxruntime's arena keeps its peak."""
    order = sorted(range(len(tokens)), key=tokens.__getitem__)
    batches: list[list[int]] = []
    batch: list[int] = []
    for i in order:
        n = max(1, tokens[i])
        if batch and (len(batch) >= max_batch or (len(batch) + 1) * n * n > budget):
            batches.append(batch)
            batch = []
        batch.append(i)
    if batch:
        batches.append(batch)
    return batches


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Attention-masked mean of a batch's last hidden states, unit length, in the states' dtype: fastembed's
    pooling for all-MiniLM-L6-v2 (``common/utils`` + ``PooledNormalizedEmbedding``), step for step, so the
    sentence vector of a token-state run equals ``embed``'s."""
    summed = np.sum(hidden, axis=1, where=mask[:, :, np.newaxis].astype(bool), dtype=np.float64)
    pooled = summed / np.maximum(np.sum(mask, axis=1, keepdims=True), 1e-9)
    norm = np.maximum(np.linalg.norm(pooled, ord=2, axis=1, keepdims=True), 1e-12)
    return (pooled / norm).astype(hidden.dtype, copy=False)


@dataclass(frozen=True)
class TokenStates:
    """One text's single pass through the model: its sentence vector (what ``embed`` returns) and the
    contextual token states it was pooled from, so a caller that needs both runs the model once."""

    pooled: Vectors  # [d] float32, unit length
    states: np.ndarray  # [tokens, d], the attended tokens only (no padding)
    encoding: Any  # the tokenizer's Encoding of the text (word_ids, offsets, attention_mask)


class _Session(Protocol):
    def run(self, output_names: Any, input_feed: dict[str, np.ndarray]) -> list[np.ndarray]: ...


# a token-state pass sends at most this many texts per session run, and batch x (longest length)^2 stays
# within the budget (attention memory, as the model's own batches)
STATES_MAX_BATCH = 32
STATES_BATCH_TOKENS2 = 4 * 64 * 64


def run_token_states(session: _Session, tokenizer: Any, texts: Sequence[str], input_names: Sequence[str],
                     max_batch: int = STATES_MAX_BATCH, budget: int = STATES_BATCH_TOKENS2) -> list[TokenStates]:
    """Tokenise once, run the texts shortest first in batches cut by ``cost_batches`` on their real token
    lengths (each batch padded only to its own longest text), and keep per text the pooled vector and the
    unpadded token states. ``session`` is an onnxruntime session (or a stand-in with ``run``); the tokenizer
    pads on the right (BERT's), so cutting every row to the batch's longest text drops padding only."""
    if (getattr(tokenizer, "padding", None) or {}).get("direction", "right") != "right":
        raise ValueError("run_token_states needs a tokenizer that pads on the right")
    encs = tokenizer.encode_batch(list(texts))
    lengths = [sum(e.attention_mask) for e in encs]
    out: list[TokenStates | None] = [None] * len(encs)
    for batch in cost_batches(lengths, max_batch, budget):
        length = max(1, max(lengths[i] for i in batch))
        ids = np.array([encs[i].ids[:length] for i in batch], dtype=np.int64)
        mask = np.array([encs[i].attention_mask[:length] for i in batch], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = session.run(None, {n: feed[n] for n in input_names if n in feed})[0]
        pooled = l2_normalise(mean_pool(hidden, mask))
        for row, i in enumerate(batch):
            out[i] = TokenStates(pooled[row], np.asarray(hidden[row, :lengths[i]], dtype=np.float32), encs[i])
    return [t for t in out if t is not None]


@runtime_checkable
class TokenStatesModel(Protocol):
    """A model that can return the token states behind its sentence vectors (server/model.py's default)."""

    def embed_states(self, texts: Sequence[str]) -> list[TokenStates]: ...


def text_key(text: str) -> str:
    """Content hash used to cache an embedding (model id is kept beside it)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


_TOKEN = re.compile(r"[a-z0-9]+")


class HashEmbedder:
    """Deterministic bag-of-hashed-words embedder for tests about logic.

    Texts that share words get similar vectors; it carries no meaning beyond
    that, so tests about meaning must use the real model.
    """

    def __init__(self, dim: int = 64) -> None:
        self._dim = dim

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _TOKEN.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                idx = int.from_bytes(digest[:4], "little") % self._dim
                sign = 1.0 if digest[4] & 1 else -1.0
                out[row, idx] += sign
        return l2_normalise(out)

    def model_id(self) -> str:
        return f"hash-bow-{self._dim}"

    def dimension(self) -> int:
        return self._dim

    def ready(self) -> bool:
        return True


class CachingEmbedder:
    """Wraps an Embedder with an in-memory LRU keyed by content hash.

    Re-embedding the same candidates, policies or chunks costs a dict lookup.
    """

    def __init__(self, inner: Embedder, max_items: int = 50_000) -> None:
        self.inner = inner
        self.max_items = max_items
        self._cache: OrderedDict[str, Vectors] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def embed(self, texts: Sequence[str]) -> Vectors:
        dim = self.inner.dimension()
        out = np.empty((len(texts), dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        for i, text in enumerate(texts):
            key = text_key(text)
            vec = self._cache.get(key)
            if vec is None:
                missing.setdefault(key, []).append(i)
            else:
                self._cache.move_to_end(key)
                out[i] = vec
                self.hits += 1
        if missing:
            keys = list(missing)
            fresh = self.inner.embed([texts[missing[k][0]] for k in keys])
            for key, vec in zip(keys, fresh, strict=True):
                self.put(key, vec)
                for i in missing[key]:
                    out[i] = vec
            self.misses += len(keys)
        return out

    def get(self, key: str) -> Vectors | None:
        return self._cache.get(key)

    def clear(self) -> None:
        """Forget every vector (benchmarks measure a cold call with it)."""
        self._cache.clear()

    def put(self, key: str, vec: Vectors) -> None:
        self._cache[key] = vec
        self._cache.move_to_end(key)
        while len(self._cache) > self.max_items:
            self._cache.popitem(last=False)

    def model_id(self) -> str:
        return self.inner.model_id()

    def dimension(self) -> int:
        return self.inner.dimension()

    def ready(self) -> bool:
        return self.inner.ready()
