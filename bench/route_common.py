"""Shared helpers for the routing benches: data paths, the real model, MetaTool as a corpus."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

from bench_io import shared_dir

from bosun.core.routing.corpus import Policy

REPO = Path(__file__).resolve().parents[1]


def load_model() -> Any:
    """The shipped embedded model, cached by content hash."""
    import tempfile

    from bosun.core.embedding import CachingEmbedder
    from bosun.server.model import load_embedder

    home = Path(os.environ.get("BOSUN_HOME", tempfile.gettempdir() + "/bosun-bench-home"))
    return CachingEmbedder(load_embedder(home))


def metatool_docs() -> list[Policy]:
    path = shared_dir() / "data" / "routing" / "metatool-docs.jsonl"
    out = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        out.append(Policy(name=row["doc_id"], surface=row["text"], text=row["text"], source="metatool", fmt="oiax"))
    return out


def metatool_queries() -> list[dict[str, Any]]:
    path = shared_dir() / "data" / "routing" / "metatool-queries-dev.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        return [json.loads(line) for line in fh]


def embed_cached(emb: Any, texts: list[str]) -> Any:
    """Embed with an on-disk cache (benches re-embed the same thousands of queries on every run)."""
    import hashlib
    import tempfile

    import numpy as np

    path = Path(tempfile.gettempdir()) / f"bosun-bench-vecs-{emb.model_id()}.npz"
    cache: dict[str, Any] = {}
    if path.exists():
        with np.load(path) as data:
            cache = {k: data[k] for k in data.files}
    keys = [hashlib.sha256(t.encode()).hexdigest()[:32] for t in texts]
    missing = [i for i, k in enumerate(keys) if k not in cache]
    if missing:
        fresh = emb.embed([texts[i] for i in missing])
        for i, vec in zip(missing, fresh, strict=True):
            cache[keys[i]] = vec
        np.savez(path, **cache)
    return np.vstack([cache[k] for k in keys]) if keys else np.zeros((0, emb.dimension()), np.float32)


SPLIT_SALT = "bosun-route-split-2026-11-30"


def split_of(qid: str) -> str:
    """'tune' (about 70%) or 'heldout': fixed by a salted hash of the query id, chosen before any result."""
    import hashlib

    return "tune" if hashlib.sha256(f"{SPLIT_SALT}:{qid}".encode()).digest()[0] < 179 else "heldout"


def policy_corpus(name: str) -> tuple[list[Policy], list[dict[str, Any]]]:
    """A labelled policy corpus of this repo ('demo' or 'heldout') as (policies, queries in MetaTool's shape)."""
    from bosun.core.routing.metrics import parse_labelled
    from bosun.server.services.policies import scan_corpus

    corpus, labels = {
        "demo": (REPO / "server" / "policies", REPO / "examples" / "policies-labelled.jsonl"),
        "heldout": (REPO / "examples" / "policies-heldout", REPO / "examples" / "policies-heldout-labelled.jsonl"),
    }[name]
    pols = scan_corpus([corpus]).policies
    rows = parse_labelled(labels.read_text().splitlines())
    qs = [{"qid": f"{name}-{i}", "query": r.prompt, "relevant": list(r.expected),
           "kind": ("multi" if len(r.expected) > 1 else "single") if r.expected else "awareness_neg"}
          for i, r in enumerate(rows)]
    return pols, qs
