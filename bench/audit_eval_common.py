"""Shared by the audit benchmarks: the real embedding model, cached by content hash."""

from __future__ import annotations

from typing import Any


def default_embedder() -> Any:
    """``embed(texts)`` backed by the real model and the bench's on-disk cache, or None without a model."""
    try:
        from audit_features import EmbedCache

        cache = EmbedCache()

        def embed(texts: list[str]) -> Any:
            out = cache.embed(texts)
            cache.save()
            return out

        return embed
    except Exception:  # no model on this machine: the caller reports that
        return None
