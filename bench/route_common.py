"""Shared helpers for the routing benches: data paths, the real model, MetaTool as a corpus."""

from __future__ import annotations

import gzip
import json
import os
import zipfile
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
    """Embed with an on-disk cache (benches re-embed the same thousands of queries on every run).

    One ``.npz`` per model under ``~/.cache/bosun-bench`` holding (keys, matrix); written to a temporary
    file and renamed, so a bench running beside another one never reads half a file (a corrupt or
    missing cache is simply rebuilt).
    """
    import fcntl
    import hashlib
    import tempfile

    import numpy as np

    folder = Path(os.environ.get("BOSUN_BENCH_CACHE", Path.home() / ".cache" / "bosun-bench"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"vecs-{emb.model_id()}.npz"
    keys = [hashlib.sha256(t.encode()).hexdigest()[:32] for t in texts]
    cache = _read_cache(path)
    missing = list(dict.fromkeys(i for i, k in enumerate(keys) if k not in cache))
    if missing:
        fresh = {keys[i]: np.asarray(vec, np.float32)
                 for i, vec in zip(missing, emb.embed([texts[i] for i in missing]), strict=True)}
        cache.update(fresh)
        with open(folder / f"{path.name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # read-merge-write under a lock: another bench's vectors are kept
            merged = _read_cache(path)
            merged.update(fresh)
            fd, tmp = tempfile.mkstemp(dir=folder, suffix=".npz")
            with os.fdopen(fd, "wb") as fh:
                np.savez(fh, keys=np.asarray(list(merged)), vecs=np.vstack(list(merged.values())))
            os.replace(tmp, path)
    return np.vstack([cache[k] for k in keys]) if keys else np.zeros((0, emb.dimension()), np.float32)


def _read_cache(path: Path) -> dict[str, Any]:
    """The cached vectors by key ({} when the file is missing or unreadable)."""
    import numpy as np

    try:
        with np.load(path) as data:
            return dict(zip(data["keys"].tolist(), data["vecs"], strict=True))
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
        return {}


class BenchEmbedder:
    """An Embedder whose vectors come from ``embed_cached`` (document texts are cached across runs too)."""

    def __init__(self, emb: Any) -> None:
        self.emb = emb

    def embed(self, texts: list[str]) -> Any:
        return embed_cached(self.emb, list(texts))

    def dimension(self) -> int:
        return int(self.emb.dimension())

    def model_id(self) -> str:
        return str(self.emb.model_id())


SPLIT_SALT = "bosun-route-split-2026-11-30"


def split_of(qid: str) -> str:
    """'tune' (about 70%) or 'heldout': fixed by a salted hash of the query id, chosen before any result."""
    import hashlib

    return "tune" if hashlib.sha256(f"{SPLIT_SALT}:{qid}".encode()).digest()[0] < 179 else "heldout"


def policy_corpus(name: str) -> tuple[list[Policy], list[dict[str, Any]]]:
    """A labelled policy corpus of this repo ('demo', 'heldout' or the blind dev corpus 'bookwell') as (policies, queries in MetaTool's shape)."""
    from bosun.core.routing.metrics import parse_labelled
    from bosun.server.services.policies import scan_corpus

    blind = REPO / "bench" / "corpora" / "policies-bookwell-dev"  # written blind; the dev one (README there)
    corpus, labels = {
        "demo": (REPO / "server" / "policies", REPO / "examples" / "policies-labelled.jsonl"),
        "heldout": (REPO / "examples" / "policies-heldout", REPO / "examples" / "policies-heldout-labelled.jsonl"),
        "bookwell": (blind / "policies", blind / "prompts.jsonl"),
    }[name]
    pols = scan_corpus([corpus]).policies
    rows = parse_labelled(labels.read_text().splitlines())
    qs = [{"qid": f"{name}-{i}", "query": r.prompt, "relevant": list(r.expected),
           "kind": ("multi" if len(r.expected) > 1 else "single") if r.expected else "awareness_neg"}
          for i, r in enumerate(rows)]
    return pols, qs
