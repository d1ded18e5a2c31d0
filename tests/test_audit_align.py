"""Token-level soft alignment (core/audit/align.py): word states from an ONNX-like session, the soft
recall and its clause minimum, the cache, one model run per new text (its sentence vector seeds the
embedding cache), the wiring into the audit and the service."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from mcp import Client

from bosun.core.audit.align import (
    TokenEncoder,
    WordStates,
    aligned_coverage,
    best_of,
    budget_coverage,
    encoder_from_embedder,
    one_pass_words,
    seed_pooled,
    sentence_recall_many,
    soft_recall,
)
from bosun.core.audit.audit import ALIGNED_MODEL, audit, load_model
from bosun.core.audit.config import AuditConfig
from bosun.core.audit.match import ALIGNED_FEATURES
from bosun.core.embedding import CachingEmbedder, HashEmbedder, TokenStates, run_token_states, text_key
from bosun.server.engine import Engine
from bosun.server.services.audit import AuditService

DIM = 16


class _IdSession:
    """Stands in for the ONNX session: the state of a word piece is a fixed random vector of its id
    (no context), so equal words align with cosine 1 and different words with a small cosine."""

    def __init__(self) -> None:
        self.calls = 0

    def get_inputs(self) -> list[Any]:
        class _In:
            def __init__(self, name: str) -> None:
                self.name = name

        return [_In("input_ids"), _In("attention_mask")]

    def run(self, _names: Any, feed: dict[str, np.ndarray]) -> list[np.ndarray]:
        self.calls += 1
        ids = feed["input_ids"]
        out = np.stack([np.stack([np.random.default_rng(int(i)).standard_normal(DIM) for i in row]) for row in ids])
        return [out.astype(np.float32)]


def _tokenizer() -> Any:
    from importlib.resources import files

    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(files("bosun.core") / "models" / "all-MiniLM-L6-v2" / "tokenizer.json"))
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    return tok


class _StatesModel:
    """Stands in for FastEmbedEmbedder over the default model: ``embed_states`` runs the session once per
    batch (as server/model.py does) and ``embed`` returns the pooled vectors of a fresh run."""

    def __init__(self) -> None:
        self.session = _IdSession()
        self.tokenizer = _tokenizer()
        self.embedded = 0

    def embed_states(self, texts: Any) -> list[TokenStates]:
        return run_token_states(self.session, self.tokenizer, list(texts), ["input_ids", "attention_mask"])

    def has_token_states(self) -> bool:
        return True

    def embed(self, texts: Any) -> np.ndarray:
        self.embedded += len(texts)
        return np.stack([t.pooled for t in self.embed_states(texts)]) if texts else np.zeros((0, DIM), np.float32)

    def model_id(self) -> str:
        return "id-session"

    def dimension(self) -> int:
        return DIM

    def ready(self) -> bool:
        return True


@pytest.fixture
def encoder() -> TokenEncoder:
    return TokenEncoder(_StatesModel().embed_states)


def test_word_states_keep_content_words_stemmed(encoder: TokenEncoder) -> None:
    ws = encoder.encode(["The statute was unbelievably enacted in 1990."])[0]
    assert ws.tokens[0] == "statut" and ws.tokens[-1] == "1990" and len(ws.tokens) == 4  # "unbelievably": one word
    assert "the" not in ws.tokens and "was" not in ws.tokens
    assert ws.vecs.shape == (len(ws.tokens), DIM) and ws.vecs.dtype == np.float32
    assert np.allclose(np.linalg.norm(ws.vecs.astype(np.float32), axis=1), 1.0, atol=1e-2)


def test_batched_and_single_runs_agree_and_are_cached(encoder: TokenEncoder) -> None:
    texts = ["A short one.", "A much longer sentence about the museum that opened to the public in 1937.",
             "Paris is the capital of France."]
    together = encoder.encode(texts)
    assert encoder.runs == 3
    single = TokenEncoder(_StatesModel().embed_states)
    for text, ws in zip(texts, together, strict=True):
        alone = single.encode([text])[0]
        assert alone.tokens == ws.tokens and np.allclose(alone.vecs, ws.vecs)
    encoder.encode(texts + texts)
    assert encoder.runs == 3  # every text came from the cache


def test_soft_recall_and_the_clause_minimum(encoder: TokenEncoder) -> None:
    claim, ev_same, ev_other = encoder.encode([
        "The tower was built for the fair, and it was painted bright red.",
        "The tower was built for the fair.",
        "Museum tickets cost ten euros.",
    ])
    best = soft_recall(claim, [ev_same])
    assert best["tower"] == pytest.approx(1.0, abs=1e-2) and best["fair"] == pytest.approx(1.0, abs=1e-2)
    assert best["red"] < 0.9
    weights = dict.fromkeys(best, 1.0)
    whole, worst = aligned_coverage(best, weights, [("tower", "built", "fair"), ("paint", "bright", "red")])
    assert worst < whole < 1.0
    unrelated, _ = aligned_coverage(soft_recall(claim, [ev_other]), weights, [])
    assert unrelated < whole
    assert soft_recall(claim, []) == dict.fromkeys(claim.tokens, 0.0)
    assert aligned_coverage({}, {}, []) == (0.0, 0.0)


def test_one_product_for_all_claims_equals_one_claim_at_a_time(encoder: TokenEncoder) -> None:
    claims = encoder.encode(["The tower was built for the fair.", "Tickets cost ten euros.", "The the of."])
    sents = dict(enumerate(encoder.encode(["The tower opened for the fair.", "", "Museum tickets cost ten euros.",
                                           "Paris is in France."])))
    cands = [[0, 1, 3], [2, 0], [3]]
    many = [best_of(p) for p in sentence_recall_many(claims, cands, sents)]
    for claim, cs, got in zip(claims, cands, many, strict=True):
        want = soft_recall(claim, [sents[s] for s in cs])
        assert got.keys() == want.keys() and all(abs(got[k] - want[k]) < 1e-4 for k in want)
    assert [best_of(p) for p in sentence_recall_many(claims[:1], [[1]], sents)] == [dict.fromkeys(claims[0].tokens, 0.0)]
    per = sentence_recall_many(claims, cands, sents)
    again = sentence_recall_many(claims, cands, sents)  # the same texts again: kept by their digests
    assert all(a is b for a, b in zip(again, per, strict=True))
    anonymous = [WordStates(c.tokens, c.vecs) for c in claims]  # no digest: computed, not kept
    assert sentence_recall_many(anonymous, cands, sents)[0] is not sentence_recall_many(anonymous, cands, sents)[0]


def test_encoder_found_inside_the_embedder_wrappers() -> None:
    inner = _StatesModel()
    enc = encoder_from_embedder(CachingEmbedder(inner))
    assert enc is not None and enc.encode(["Paris is in France."])[0].tokens == ("paris", "franc")
    assert inner.session.calls == 1
    assert encoder_from_embedder(HashEmbedder(8)) is None
    assert encoder_from_embedder(CachingEmbedder(HashEmbedder(8))) is None

    class NoStates(_StatesModel):  # a fastembed model: the wrapper has the method but no states
        def has_token_states(self) -> bool:
            return False

    assert encoder_from_embedder(CachingEmbedder(NoStates())) is None


def test_one_run_per_new_text_gives_the_vector_and_the_word_states() -> None:
    """The pooled vector of a token-state run lands in the embedding cache (keyed by text_key), so the
    semantic matcher's embed of the same texts runs nothing; a text cut to MAX_CHARS seeds nothing."""
    inner = _StatesModel()
    cache = CachingEmbedder(inner)
    enc = encoder_from_embedder(cache)
    assert enc is not None
    texts = ["Paris is the capital of France.", "The tower opened in 1889.", "x " * 600]
    words = one_pass_words(enc, cache)(texts)
    assert inner.session.calls == 2 and enc.runs == 3  # the two short texts share a batch, the long one alone
    assert words[2].pooled is None and cache.get(text_key(texts[2])) is None
    for text, ws in zip(texts[:2], words[:2], strict=True):
        assert ws.pooled is not None and cache.get(text_key(text)) is ws.pooled
        assert np.allclose(np.linalg.norm(ws.pooled), 1.0, atol=1e-5)
    vecs = cache.embed(texts[:2])
    assert inner.embedded == 0 and cache.hits == 2  # no second run for the seeded texts
    fresh = inner.embed(texts[:2])
    assert np.allclose(vecs, fresh, atol=1e-6)
    assert seed_pooled(cache, texts, words) == 0  # already there: not replaced
    calls = inner.session.calls
    one_pass_words(enc, cache)(texts)
    assert enc.runs == 3 and inner.session.calls == calls


CHUNKS = [{"content": "The Affordable Care Act was signed into law by President Obama in March 2010."},
          {"content": "Museum tickets cost ten euros on weekdays."}]


def _embed(texts: list[str]) -> np.ndarray:
    return HashEmbedder(32).embed(texts)


def test_audit_with_word_states_uses_the_aligned_model(encoder: TokenEncoder) -> None:
    claim = "President Obama signed the Affordable Care Act into law in March 2010."
    cfg = AuditConfig(matcher="semantic")
    with_words = audit("", CHUNKS, claim, cfg, embed=_embed, words=encoder.encode)
    without = audit("", CHUNKS, claim, cfg, embed=_embed)
    assert with_words["token_alignment"] is True and without["token_alignment"] is False
    feats = with_words["claims"][0]["features"]
    assert feats["align"] > 0.9 and without["claims"][0]["features"]["align"] == 0.0
    assert load_model(ALIGNED_MODEL).features == ALIGNED_FEATURES
    assert audit("", CHUNKS, claim, LEXICAL, words=encoder.encode)["token_alignment"] is False


LEXICAL = AuditConfig(matcher="bm25")


async def test_service_aligns_with_the_models_session() -> None:
    inner = _StatesModel()
    cache = CachingEmbedder(inner)

    class Model:  # the Engine's surface the service uses (engine.embed: the cache, then the model)
        async def embed(self, texts: list[str]) -> np.ndarray:
            return cache.embed(texts)

        async def model_id(self) -> str:
            return "fake"

        async def judge(self) -> None:  # no judge: the rules decide (BOSUN_JUDGE=off)
            return None

        def judge_notice(self) -> None:
            return None

        async def embedder(self) -> Any:
            return cache

    seen: list[str] = []

    async def progress(_done: float, _total: float | None, message: str) -> None:
        seen.append(message)

    service = AuditService(Model())
    claim = "Obama signed the Affordable Care Act in 2010."
    rep = await service.report("", CHUNKS, claim, None, progress=progress)
    assert rep["token_alignment"] is True and inner.session.calls >= 1
    assert inner.embedded == 0  # the sentence vectors came from the token-state run
    assert any(m.startswith("embedding 1 claim(s)") for m in seen)
    assert rep["claims"][0]["features"]["align"] > 0.5
    calls = inner.session.calls
    again = await service.report("", CHUNKS, claim, None)
    assert inner.session.calls == calls and again["claims"] == rep["claims"]


async def test_service_without_token_states_falls_back_to_pooled_cosines() -> None:
    class Model:
        async def embed(self, texts: list[str]) -> np.ndarray:
            return _embed(texts)

        async def model_id(self) -> str:
            return "fake"

        async def judge(self) -> None:  # no judge: the rules decide (BOSUN_JUDGE=off)
            return None

        def judge_notice(self) -> None:
            return None

        async def embedder(self) -> Any:
            return HashEmbedder(32)

    rep = await AuditService(Model()).report("", CHUNKS, "Obama signed the Affordable Care Act in 2010.", None)
    assert rep["token_alignment"] is False and rep["matcher"] == "semantic"


@pytest.mark.model
async def test_real_model_aligns_a_paraphrase(real_client: Client) -> None:
    """With the real model, a synonym ("enacted" for "signed into law") aligns better than an unrelated page."""
    res = await real_client.call_tool("audit", {
        "response": "President Obama enacted the Affordable Care Act in March 2010.", "chunks": CHUNKS,
        "config": {"matcher": "semantic"}})
    report = res.structured_content
    assert report["token_alignment"] is True
    assert report["claims"][0]["features"]["align"] > 0.6


@pytest.mark.model
async def test_real_model_one_pass_gives_embeds_vectors_bit_for_bit(real_client: Client, real_engine: Engine) -> None:
    """The default model's ``embed_states`` (one session run) gives the same sentence vectors as ``embed``
    (route and select use those), alone or in other batch company, and token states that mean-pool into them."""
    cache = await real_engine.embedder()
    model = cache.inner
    texts = ["bosun", "The Affordable Care Act was signed into law in March 2010.", "", "héllo wörld 漢字",
             "roll back the production deploy " * 12]
    states = model.embed_states(texts)
    pooled = np.stack([s.pooled for s in states])
    assert pooled.dtype == np.float32 and np.array_equal(pooled, model.embed(texts))
    assert np.array_equal(model.embed_states(texts[1:2])[0].pooled, pooled[1])
    for ts in states:
        assert ts.states.shape == (sum(ts.encoding.attention_mask), model.dimension())
        mean = ts.states.astype(np.float64).mean(axis=0)
        assert np.allclose(mean / np.linalg.norm(mean), ts.pooled, atol=1e-5)


def test_budget_coverage_does_not_rise_with_unrelated_sentences() -> None:
    """The best cosine over every candidate rises when unrelated sentences are added (a maximum over more
    words); the coverage by the best three sentences does not: the same claim against its two supporting
    sentences, and against those two plus ten distractors that each happen to match one word a little."""
    support = {"tower": [0.9, 0.3], "built": [0.8, 0.2], "fair": [0.2, 0.85]}
    weights = {"tower": 2.0, "built": 1.0, "fair": 1.0}
    alone = {t: np.array(v, dtype=np.float32) for t, v in support.items()}
    rng = np.random.default_rng(7)
    noise = {t: np.concatenate([alone[t], rng.uniform(0.2, 0.6, 10).astype(np.float32)]) for t in support}
    noise["fair"][5] = 0.95  # one distractor shares the word "fair" in another sense
    assert budget_coverage(alone, weights, 3) == pytest.approx((2 * 0.9 + 0.8 + 0.85) / 4, abs=1e-6)
    best_alone, best_noise = best_of(alone), best_of(noise)
    assert best_noise["fair"] > best_alone["fair"]  # the plain maximum is moved by the distractor
    assert budget_coverage(noise, weights, 3) <= budget_coverage(alone, weights, 3) + 0.03
    assert budget_coverage(noise, weights, 1) == pytest.approx((2 * 0.9 + 0.8 + 0.2) / 4, abs=1e-6)
    assert budget_coverage({}, weights, 3) == 0.0
