"""The audit's general checks (roles, antonym events, add-on clauses), its flat-cost plan, and the
progress it reports while waiting for the model."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from bosun.core.audit.audit import audit, plan_audit
from bosun.core.audit.config import AuditConfig
from bosun.core.audit.consistency import check
from bosun.core.audit.index import build_index, clear_caches
from bosun.core.audit.match import SMALL_INDEX, TOP_CHUNKS, TOP_K, clauses
from bosun.core.embedding import HashEmbedder
from bosun.server.services import audit as service_mod
from bosun.server.services.audit import AuditService

LEX = AuditConfig(matcher="bm25")


def test_role_reversal_is_a_contradiction_and_the_passive_is_not() -> None:
    ev = "Facebook agreed to acquire Instagram for about $1 billion in April 2012."
    assert [m.kind for m in check("Instagram agreed to acquire Facebook for about $1 billion in April 2012.", ev)] == ["role"]
    assert check("Instagram was acquired by Facebook for about $1 billion in April 2012.",
                 "Facebook acquired Instagram for about $1 billion in April 2012.") == []
    assert [m.kind for m in check("Facebook was acquired by Instagram for about $1 billion in April 2012.",
                                  "Facebook acquired Instagram for about $1 billion in April 2012.")] == ["role"]
    # two names in different clauses are not a relation between them
    assert check("Armstrong walked on the Moon, while Collins stayed in orbit.",
                 "Collins stayed in orbit, while Armstrong walked on the Moon.") == []


def test_antonym_events() -> None:
    ev = "The Affordable Care Act was signed into law by President Barack Obama on March 23, 2010."
    assert check("The Affordable Care Act was repealed by President Barack Obama on March 23, 2010.", ev)[0].kind == "negation"
    assert check("The court upheld the ruling in June 2022.", "The court overturned the ruling in June 2022.")[0].kind == "negation"
    assert check("The Affordable Care Act was signed by President Barack Obama on March 23, 2010.", ev) == []


def test_add_on_clause_makes_a_claim_partially_supported() -> None:
    chunks = [{"content": "The Eiffel Tower was built for the 1889 World's Fair in Paris."},
              {"content": "It is 330 metres tall."}]
    base = "The Eiffel Tower was built for the 1889 World's Fair in Paris."
    ok = audit("", chunks, base, LEX)["claims"][0]
    assert ok["verdict"] == "supported"
    rep = audit("", chunks, base[:-1] + ", and it was originally painted bright red to honour the navy.", LEX)
    claim = rep["claims"][0]
    assert claim["verdict"] == "partially_supported" and not claim["supported"]
    assert "painted bright red" in claim["note"] and claim["evidence"]
    assert rep["counts"]["partially_supported"] == 1 and "partially_supported_claims" in rep["policy_issues"]
    assert rep["compliance_rate"] == 0.0


def test_clauses() -> None:
    assert len(clauses("The tower was built in 1889, and it was painted red.")) == 2
    assert len(clauses("Salt and pepper are common seasonings.")) == 1


def test_verdict_does_not_depend_on_how_sources_are_chunked() -> None:
    sents = ["Metformin is the first-line medication for type 2 diabetes.",
             "It lowers blood glucose by reducing hepatic glucose production.",
             "Common side effects include diarrhoea and nausea.",
             "The Brooklyn Bridge opened on May 24, 1883."]
    for claim in ("Metformin lowers blood glucose by reducing hepatic glucose production.",
                  "Metformin causes severe hair loss in most patients."):
        one = audit("", [{"content": " ".join(sents)}], claim, LEX)["claims"][0]
        each = audit("", [{"content": s} for s in sents], claim, LEX)["claims"][0]
        assert one["verdict"] == each["verdict"]
        assert one["confidence"] == pytest.approx(each["confidence"], abs=1e-6)


def _many_chunks(n: int) -> list[dict[str, Any]]:
    return [{"content": f"Report {i} says plant {i} produced {i * 7} tonnes of steel in {1950 + i % 70}. "
                        f"Its workers number {i * 3}. The site lies near river {i % 13}."} for i in range(n)]


def test_semantic_plan_embeds_only_candidates_and_the_index_is_reused() -> None:
    clear_caches()
    chunks = _many_chunks(300)
    response = "Plant 12 produced 84 tonnes of steel in 1962. Plant 40 produced 280 tonnes of steel in 1990."
    plan = plan_audit("", chunks, response, AuditConfig(matcher="semantic"))
    assert plan.index.size == 900 > SMALL_INDEX
    assert len(plan.texts_to_embed()) <= len(plan.claims) * (1 + TOP_K + TOP_CHUNKS) < 900
    assert build_index([c["content"] for c in chunks]) is plan.index  # warm: the same index object


def test_claim_without_word_overlap_still_gets_semantic_candidates_on_small_sources() -> None:
    chunks = [{"content": "Acetylsalicylic acid reduces a high body temperature."}]
    plan = plan_audit("", chunks, "Aspirin lowers fever.", AuditConfig(matcher="semantic"))
    assert plan.candidates == [[0]]


class _SlowModel:
    """Embeds only after the test has seen a 'still waiting' progress message (no timing race)."""

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def embed(self, texts: list[str]) -> np.ndarray:
        await self.release.wait()
        rng = np.random.default_rng(len(texts))
        v = rng.normal(size=(len(texts), 8)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    async def model_id(self) -> str:
        return "slow-test-model"

    async def judge(self) -> None:  # no judge: the rules decide (BOSUN_JUDGE=off)
        return None

    def judge_notice(self) -> None:
        return None

    async def embedder(self) -> HashEmbedder:  # as Engine.embedder: waits for the model load
        await self.release.wait()
        return HashEmbedder(8)  # no token states: the service embeds without the alignment


async def test_progress_says_the_audit_is_waiting_for_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service_mod, "HEARTBEAT_S", 0.01)
    model = _SlowModel()
    messages: list[str] = []

    async def progress(done: float, total: float | None, message: str) -> None:
        messages.append(message)
        if "still waiting" in message:
            model.release.set()

    svc = AuditService(model)
    rep = await svc.report("", [{"content": "Aspirin lowers fever in adults."}], "Aspirin lowers fever in adults.",
                           None, progress=progress)
    assert rep["matcher"] == "semantic" and rep["matcher_model"] == "slow-test-model"
    assert "waiting for the embedding model" in messages[0] and "1 claim(s)" in messages[0]
    assert any("still waiting" in m for m in messages)
    assert messages[-1].startswith("matching")
    # without a progress callback nothing changes
    model.release.set()
    assert (await svc.report("", [{"content": "Aspirin lowers fever in adults."}],
                             "Aspirin lowers fever in adults.", None))["matcher"] == "semantic"


def test_specific_words_and_evidence_size_features() -> None:
    """A claim's date or name missing from the evidence lowers specific_cov (a common word does not);
    log_sentences grows with the evidence; sem_union is the cosine with the mean of the best three."""
    from bosun.core.audit.match import match_claim

    ev = "Facebook agreed to acquire Instagram for about $1 billion in April 2012."
    index = build_index([ev])
    same = match_claim("Facebook agreed to acquire Instagram in April 2012.", index, [ev]).features
    other_month = match_claim("Facebook agreed to acquire Instagram in June 2012.", index, [ev]).features
    common_word = match_claim("Facebook agreed to quickly acquire Instagram in April 2012.", index, [ev]).features
    assert same["specific_cov"] == 1.0
    assert other_month["specific_cov"] < 1.0
    assert common_word["specific_cov"] == 1.0
    many = [ev] + [f"Unrelated sentence number {i} about gardens." for i in range(30)]
    assert match_claim("Facebook acquired Instagram.", build_index(many), many).features["log_sentences"] > \
        same["log_sentences"]
    vecs = np.eye(4, dtype=np.float32)
    claim_vec = np.array([1.0, 1.0, 1.0, 0.0], dtype=np.float32) / np.sqrt(3)
    sents = ["Facebook bought Instagram.", "Instagram cost a billion.", "It was in April 2012.", "Gardens."]
    idx = build_index(sents)
    f = match_claim("Facebook bought Instagram for a billion in April 2012.", idx, sents, claim_vec,
                    {i: vecs[i] for i in range(4)}).features
    assert f["sem_union"] == pytest.approx(1.0, abs=1e-5)
    assert f["sem_max"] == pytest.approx(1 / np.sqrt(3), abs=1e-5)
