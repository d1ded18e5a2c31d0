"""Routing by meaning with the real model on the demo corpus: ranking, abstention, evidence."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client

from bosun.core.routing.abstain import SHIPPED, divergence
from bosun.core.routing.metrics import compute, parse_labelled
from bosun.core.routing.route import STOP_WORDS, PolicyIndex
from bosun.server.services.policies import PolicyService

LABELLED = Path(__file__).resolve().parents[1] / "examples" / "policies-labelled.jsonl"



@pytest.mark.model
async def test_demo_corpus_ranking_abstention_and_evidence(real_client: Client, real_engine: object) -> None:
    await real_client.call_tool("route", {"prompt": "warm up"})
    svc: PolicyService = real_engine.policies
    rows = parse_labelled(LABELLED.read_text().splitlines())
    routed = []
    for row in rows:
        out = await svc.route(row.prompt)
        routed.append([h["name"] for h in out["hits"]])
    m = compute(rows, routed)
    assert m["recall_at_2"] >= 0.85 and m["top1"] >= 0.78
    assert m["false_alarms"] == 0  # of 18 negatives (the one-shared-word ones abstain: tests/test_route_abstain.py)
    # 2 of 8 sibling prompts also route the harmful sibling (second hit) since the self-calibrated decision
    # and the shared stemmer (1 of 8 before): reported in bench/results/route.md
    assert m["harmful_sibling_rate"] <= 0.25


    # off-topic prompts abstain; evidence is dismissible at a glance
    for prompt in ("What's for lunch?", "Write a haiku about autumn", "Translate this into French"):
        out = (await real_client.call_tool("route", {"prompt": prompt})).structured_content
        assert out is not None and out["hits"] == [] and out["abstained"] is True, prompt
    out = (await real_client.call_tool("route", {"prompt": "I accidentally committed the AWS access key to git"})).structured_content
    assert out is not None
    # secrets-handling and git-history nearly tie under z-score fusion (3.54 vs 3.59: "committed" and
    # "git" are git-history's words, the key is secrets-handling's body): both must be routed
    assert {h["name"] for h in out["hits"]} == {"secrets-handling", "git-history"}
    top = next(h for h in out["hits"] if h["name"] == "secrets-handling")
    matched = next(w for w in top["why"] if w.startswith("matched: "))
    words = matched.removeprefix("matched: ").split(", ")
    assert "key" in words and not set(words) & STOP_WORDS
    nearest = next(w for w in top["why"] if w.startswith("nearest: "))
    assert "semantic match" not in nearest and '"' in nearest
    # the only notice is the corpus's self-calibration: no divergence (same model the weights came from)
    assert [n for n in out.get("notices", []) if "far from" in n] == []
    assert any(n.startswith("self-calibrated on this corpus") for n in out["notices"])
    # the real model's prompts go through the package's adapter (its probe matched the live model)
    assert (await svc.listing())["prompt_adapter"] is True


def test_divergence_reasons() -> None:
    assert divergence(SHIPPED, 17, 0.55, SHIPPED.model_id) == []
    reasons = divergence(SHIPPED, 6006, 0.05, "other-model")
    assert len(reasons) == 3 and "other-model" in reasons[0] and "6006" in reasons[1] and "0.05" in reasons[2]


def test_clauses_split_a_multi_intent_prompt_only() -> None:
    from bosun.core.routing.route import clause_texts

    assert clause_texts("Show me today's stock market trends and any recent news headlines about them") == [
        "Show me today's stock market trends", "any recent news headlines about them"]
    assert clause_texts("Deploy the billing service to production") == []  # one intent
    assert clause_texts("Deploy it and test") == []  # "test" alone is not an intent of its own
    many = "Book a flight, rent a car, reserve a hotel room, order airport taxis"
    assert clause_texts(many) == []  # past MAX_CLAUSES a prompt is a paragraph, not a list of intents


def _finance_news_index() -> PolicyIndex:
    from bosun.core.embedding import HashEmbedder
    from bosun.core.routing.corpus import Policy
    from bosun.core.routing.route import build_index_with

    docs = {"finance": "stock market prices, share quotes and company earnings",
            "news": "latest news headlines and breaking stories from newspapers",
            "weather": "weather forecast, rain and temperature for a city"}
    pols = [Policy(name=n, surface=s, text=s, source="test", fmt="oiax") for n, s in docs.items()]
    return build_index_with(pols, HashEmbedder(64))


def test_each_clause_finds_its_own_document() -> None:
    from bosun.core.embedding import HashEmbedder
    from bosun.core.routing.abstain import GATE_OFF
    from bosun.core.routing.route import _clause_hits

    index = _finance_news_index()
    parts = ["share quotes and stock market prices for Amazon", "breaking news headlines today"]
    vecs = HashEmbedder(64).embed(parts)
    found = _clause_hits(index, SHIPPED, list(zip(parts, vecs, strict=True)), {"finance"}, 0.0, GATE_OFF,
                         True, True)
    assert [h.name for h in found] == ["news"]  # finance is already routed; the news clause adds news
    assert any("news" in w for w in found[0].why)
    # each clause faces the same bar as a prompt: one no candidate clears adds nothing
    assert _clause_hits(index, SHIPPED, list(zip(parts, vecs, strict=True)), set(), 1.01, GATE_OFF,
                        True, True) == []


def test_once_the_prompt_routed_a_clause_fills_the_free_slot_at_the_first_document_bar() -> None:
    from bosun.core.embedding import HashEmbedder
    from bosun.core.routing.abstain import GATE_OFF
    from bosun.core.routing.calibrate import SelfCalibration
    from bosun.core.routing.route import clause_texts, route

    index = _finance_news_index()
    emb = HashEmbedder(64)
    prompt = "share quotes and stock market prices for Amazon, and breaking news headlines today"
    parts = clause_texts(prompt)
    assert parts[-1] == "breaking news headlines today"
    cv = list(zip(parts, emb.embed(parts), strict=True))
    qvec = emb.embed([prompt])[0]
    # the prompt's own runner-up and any clause on its own face an impossible bar; its first document does not
    cal = SelfCalibration(0.0, GATE_OFF, 1.01, 1, 0.0, 0.0, clause_threshold=1.01, clause_solo_bg_z=GATE_OFF)
    out = route(index, prompt, qvec, SHIPPED, clause_vecs=cv, calibration=cal)
    assert [h.name for h in out.hits] == ["finance", "news"]  # the news clause takes the free slot
    silent = SelfCalibration(1.01, GATE_OFF, 1.01, 1, 0.0, 0.0, clause_threshold=1.01, clause_solo_bg_z=GATE_OFF)
    assert route(index, prompt, qvec, SHIPPED, clause_vecs=cv, calibration=silent).hits == []  # no abstention undone
