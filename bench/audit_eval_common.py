"""Shared by the audit benchmarks: the real embedding model, cached by content hash."""

from __future__ import annotations

from typing import Any

_CACHE: Any = None


def _cache() -> Any:
    """One EmbedCache (one loaded model) for the pooled vectors and the word states."""
    global _CACHE
    if _CACHE is None:
        from audit_features import EmbedCache

        _CACHE = EmbedCache()
    return _CACHE


def default_embedder() -> Any:
    """``embed(texts)`` backed by the real model and the bench's on-disk cache, or None without a model."""
    try:
        cache = _cache()

        def embed(texts: list[str]) -> Any:
            out = cache.embed(texts)
            cache.save()
            return out

        return embed
    except Exception:  # no model on this machine: the caller reports that
        return None


def default_words() -> Any:
    """``words(texts)``: contextual word states from the same model (core/audit/align.py), or None."""
    try:
        encoder = _cache().encoder()
        return encoder.encode if encoder is not None else None
    except Exception:  # no model on this machine: the caller reports that
        return None
