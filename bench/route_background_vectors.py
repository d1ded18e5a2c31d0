"""Embed the background prompts with the shipped model and write them as package data.

Run once per model (and after editing ``core/routing/background.py``); the server verifies one
vector against the live model before using the file.

    python bench/route_background_vectors.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from route_common import REPO, load_model

from bosun.core.routing import shipped_vectors
from bosun.core.routing.background import BACKGROUND


def main() -> int:
    emb = load_model()
    texts = list(BACKGROUND)
    vecs = emb.inner.embed(texts)
    out = REPO / "core" / "routing" / "data"
    out.mkdir(exist_ok=True)
    path = shipped_vectors.save(out, emb.model_id(), texts, vecs)
    print(f"wrote {path} ({len(texts)} prompts, {emb.model_id()}, {path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
