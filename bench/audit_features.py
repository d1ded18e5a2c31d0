"""Feature extraction for the audit model, exactly as bosun.core.audit computes it at run time.

Embeddings (real model) are cached in $BOSUN_AUDIT_CACHE (default /tmp/bosun-audit-emb.npz) by
content hash, so re-running training or evaluation does not re-embed. Only claims and their BM25
candidate sentences are embedded, as in the daemon.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np

from bosun.core.audit.align import best_of, sentence_recall
from bosun.core.audit.audit import embed_text
from bosun.core.audit.claims import _LIST_MARK, strip_citations
from bosun.core.audit.index import build_index
from bosun.core.audit.match import (
    alignment,
    alignment_extras,
    budget_alignment,
    candidates,
    claim_terms,
    match_claim,
)
from bosun.core.embedding import text_key

sys.path.insert(0, str(Path(__file__).resolve().parent))
from audit_data import Example

SHIFT_K = 5  # sentences kept per claim in the evidence-shift variant (FEVER-style sets give ~5)

CACHE = Path(os.environ.get("BOSUN_AUDIT_CACHE", "/tmp/bosun-audit-emb.npz"))
ALIGN_CACHE = CACHE.with_name(CACHE.stem + "-align.json")  # token-alignment features by claim + candidates
BEST_CACHE = CACHE.with_name(CACHE.stem + "-best.json")  # each claim word's best token cosine, same keys
PER_CACHE = CACHE.with_name(CACHE.stem + "-per.json")  # ... against each candidate sentence, same keys


class EmbedCache:
    """Real-model embeddings keyed by content hash, persisted to one npz file."""

    def __init__(self) -> None:
        self.vecs: dict[str, np.ndarray] = {}
        if CACHE.exists():
            data = np.load(CACHE)
            self.vecs = dict(zip(data["keys"].tolist(), data["vecs"], strict=True))
        self._model = None
        self._encoder = None
        self.aligned: dict[str, tuple[float, float]] = (
            {k: tuple(v) for k, v in json.loads(ALIGN_CACHE.read_text()).items()} if ALIGN_CACHE.exists() else {})
        self.best: dict[str, dict[str, float]] = (
            json.loads(BEST_CACHE.read_text()) if BEST_CACHE.exists() else {})
        self.per: dict[str, dict[str, list[float]]] = json.loads(PER_CACHE.read_text()) if PER_CACHE.exists() else {}
        self.dirty = False

    def model(self):  # type: ignore[no-untyped-def]
        if self._model is None:
            from bosun.server.model import ModelSpec, load_embedder

            home = Path(os.environ.get("BOSUN_HOME", str(Path.home() / ".bosun")))
            self._model = load_embedder(home, ModelSpec(threads=2))
        return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        keys = [text_key(t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self.vecs))
        if missing:
            first = {}
            for k, t in zip(keys, texts, strict=True):
                if k in missing and k not in first:
                    first[k] = t
            vecs = self.model().embed(list(first.values()))
            for k, v in zip(first, vecs, strict=True):
                self.vecs[k] = v
            self.dirty = True
        if not keys:
            return np.zeros((0, 384), dtype=np.float32)
        return np.stack([self.vecs[k] for k in keys]).astype(np.float32)

    def encoder(self):  # type: ignore[no-untyped-def]
        """The token-state encoder on the same loaded model (align.py)."""
        if self._encoder is None:
            from bosun.core.audit.align import encoder_from_embedder

            self._encoder = encoder_from_embedder(self.model())
        return self._encoder

    def align(self, claim: str, cands: list[str], compute) -> tuple[float, float]:  # type: ignore[no-untyped-def]
        """The alignment features of one claim and its candidates, cached on disk by their texts."""
        key = text_key("\x00".join([claim, *cands]))
        if key not in self.aligned:
            self.aligned[key] = compute(self.encoder())
            self.dirty = True
        return self.aligned[key]

    def best_cosines(self, claim: str, cands: list[str]) -> dict[str, float]:
        """Each claim word's best token cosine against the candidates (soft_recall), cached on disk."""
        key = text_key("\x00".join([claim, *cands]))
        if key not in self.best:
            self.best[key] = best_of(self.sentence_cosines(claim, cands))
            self.dirty = True
        return self.best[key]

    def sentence_cosines(self, claim: str, cands: list[str]) -> dict[str, np.ndarray]:
        """Each claim word's best token cosine against each candidate (sentence_recall), cached on disk."""
        key = text_key("\x00".join([claim, *cands]))
        if key not in self.per:
            states = self.encoder().encode([claim, *cands])
            self.per[key] = {t: [round(float(x), 5) for x in v] for t, v in sentence_recall(states[0], states[1:]).items()}
            self.dirty = True
        return {t: np.array(v, dtype=np.float32) for t, v in self.per[key].items()}

    def save(self) -> None:
        if self.dirty:
            BEST_CACHE.write_text(json.dumps(self.best))
            PER_CACHE.write_text(json.dumps(self.per))
            ALIGN_CACHE.write_text(json.dumps(self.aligned))
            keys = list(self.vecs)
            np.savez(CACHE, keys=np.array(keys), vecs=np.stack([self.vecs[k] for k in keys]))
            self.dirty = False


def clean_claim(text: str) -> str:
    return _LIST_MARK.sub("", strip_citations(text)).strip()


def texts_for(ex: Example) -> list[str]:
    """What the semantic matcher embeds for this example: the claim and its candidate sentences."""
    index = build_index([c["content"] for c in ex.chunks])
    claim = clean_claim(ex.claim)
    cands = candidates(claim_terms(claim, index), index)
    return [embed_text(claim)] + [embed_text(index.sentences[s].text) for s in cands]


def features(ex: Example, emb: EmbedCache | None) -> dict[str, float]:
    contents = [c["content"] for c in ex.chunks]
    index = build_index(contents)
    claim = clean_claim(ex.claim)
    terms = claim_terms(claim, index)
    cands = candidates(terms, index)
    if emb is not None and cands:
        vecs = emb.embed([embed_text(claim)] + [embed_text(index.sentences[s].text) for s in cands])
        m = match_claim(claim, index, contents, vecs[0], dict(zip(cands, vecs[1:], strict=True)), terms, cands)
        texts = [embed_text(index.sentences[s].text) for s in cands]

        def compute(encoder):  # type: ignore[no-untyped-def]
            return alignment(claim, index, emb.best_cosines(claim, texts))

        m.features["align"], m.features["align_min"] = emb.align(claim, texts, compute)
        m.features.update(alignment_extras(claim, index, emb.best_cosines(claim, texts)))
        m.features.update(budget_alignment(index, emb.sentence_cosines(claim, texts)))
    else:
        m = match_claim(claim, index, contents, terms=terms, cands=cands)
    return m.features


class JudgeCache:
    """The judge's reading of each claim (read_claims, as at run time), cached on disk per model file."""

    def __init__(self, judge, digest: str) -> None:  # type: ignore[no-untyped-def]
        self.judge = judge
        self.path = CACHE.with_name(f"{CACHE.stem}-judge-{digest[:12]}.json")
        self.rows: dict[str, list[float] | None] = json.loads(self.path.read_text()) if self.path.exists() else {}
        self.dirty = False

    def features(self, ex: Example) -> dict[str, float]:
        """judge_sup / judge_ref for the example (the neutral 0 / 0 where no sentence shares a word)."""
        from bosun.core.audit.judged import JudgeReading, judge_features, read_claims

        index = build_index([c["content"] for c in ex.chunks])
        claim = clean_claim(ex.claim)
        key = text_key("\x00".join([claim, *(s.text for s in index.sentences)]))
        if key not in self.rows:
            got = read_claims([claim], [s.text for s in index.sentences], self.judge)[0] if index.sentences else None
            self.rows[key] = None if got is None else [got.supported, got.refuted, got.nei]
            self.dirty = True
        row = self.rows[key]
        if row is None:
            return {"judge_sup": 0.0, "judge_ref": 0.0, "judge_read": 0.0}
        return judge_features(JudgeReading(row[0], row[1], row[2], ())) | {"judge_read": 1.0}

    def save(self) -> None:
        if self.dirty:
            self.path.write_text(json.dumps(self.rows))
            self.dirty = False


def shifted(ex: Example, emb: EmbedCache, k: int = SHIFT_K) -> Example:
    """The same claim against only the ``k`` of its candidate sentences most similar to it (the model's
    cosine), one sentence per chunk: short, retrieved evidence, as FEVER-style sets (a claim and ~5
    Wikipedia sentences) give it. The label is kept, so a supported claim whose support was not retrieved
    becomes noise for every arm alike. It shifts what the features see (size of the evidence, the IDF of
    the call, how much of a page is around the support) without new data."""
    if not ex.chunks:
        return ex
    index = build_index([c["content"] for c in ex.chunks])
    claim = clean_claim(ex.claim)
    cands = candidates(claim_terms(claim, index), index)
    if not cands:
        return Example(ex.dataset, ex.group, ex.claim, [], ex.label, ex.judgeable)
    v = emb.embed([embed_text(claim)] + [embed_text(index.sentences[s].text) for s in cands])
    order = np.argsort(-(v[1:] @ v[0]), kind="stable")[:k]
    keep = sorted(cands[int(i)] for i in order)
    chunks = [{"content": index.sentences[s].text, "source_url": ex.chunks[index.sentences[s].chunk].get("source_url"),
               "id": f"s{s}"} for s in keep]
    return Example(ex.dataset, ex.group, ex.claim, chunks, ex.label, ex.judgeable)
