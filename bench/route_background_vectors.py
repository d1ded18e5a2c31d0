"""Embed the package's own texts with the shipped model and write them as package data.

Two files: the background prompts, and every text the demo corpus (``server/policies``) embeds.
Run once per model (and after editing ``core/routing/background.py``, the demo corpus or how texts
are cut: a text whose sha256 is not in the file is embedded by the server as before); the server
verifies one vector of each file against the live model before using it.

    python bench/route_background_vectors.py
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from route_common import REPO, load_model

from bosun.core.routing import shipped_vectors
from bosun.core.routing.background import BACKGROUND
from bosun.server.services.policies import _plan, demo_corpus_dir


def main() -> int:
    emb = load_model()
    out = REPO / "core" / "routing" / "data"
    out.mkdir(exist_ok=True)
    plan = _plan([demo_corpus_dir()])
    for kind, texts in ((shipped_vectors.BACKGROUND, list(BACKGROUND)),
                        (shipped_vectors.DEMO, list(dict.fromkeys(plan.first + plan.rest)))):
        vecs = emb.inner.embed(texts)
        path = shipped_vectors.save(out, emb.model_id(), texts, vecs, kind)
        print(f"wrote {path} ({len(texts)} texts, {emb.model_id()}, {path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
