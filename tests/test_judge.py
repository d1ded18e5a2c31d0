"""The judge: loading (digest, provisioned directories, off), route re-ranking and admission, audit verdicts.

Logic tests use a tiny graph the tests build (tests/judge_tiny.py); the tests about meaning use the shipped
judge (marked ``model``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from bosun.core.audit.align import WordStates
from bosun.core.audit.audit import JUDGED_MODEL, audit, load_model
from bosun.core.audit.claims import content_tokens
from bosun.core.audit.config import AuditConfig
from bosun.core.embedding import HashEmbedder
from bosun.core.judge import evidence_window
from bosun.core.routing.corpus import Policy
from bosun.core.routing.rerank import JudgePoint, judged_route
from bosun.core.routing.route import build_index_with
from bosun.server.config import Config
from bosun.server.engine import Engine
from bosun.server.judge_model import (
    JudgeChoice,
    OnnxJudge,
    load_judge,
    load_shipped,
    shipped_dir,
    tokenizer_path,
)
from bosun.server.model import ModelError
from bosun.server.provision import FETCHABLE, MISMATCH, PRESENT, UNAVAILABLE, provision_judge
from tests import judge_tiny

BOOSTS = {
    "refund": (0.0, 0.0, 0.0, 6.0),
    "reimbursement": (0.0, 0.0, 0.0, 12.0),
    "weather": (0.0, 0.0, 0.0, -400.0),
    "confirmed": (6.0, 0.0, 0.0, 0.0),
    "never": (0.0, 30.0, 0.0, 0.0),
    "maybe": (0.0, 0.0, 30.0, 0.0),
}


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return judge_tiny.build(tmp_path_factory.mktemp("judge") / "tiny", BOOSTS)


@pytest.fixture(scope="module")
def tiny(tiny_dir: Path) -> OnnxJudge:
    return OnnxJudge(tiny_dir / "model.onnx", tokenizer_path(), "tiny")


def test_tiny_judge_scores_the_words_it_was_built_on(tiny: OnnxJudge) -> None:
    rel = tiny.relevance([("how do I get a refund", "refunds policy"), ("hello", "nice day today")])
    assert rel[0] > 0.9 and abs(float(rel[1]) - 0.5) < 1e-6
    probs = tiny.claim_probs([("it was confirmed", "text"), ("it never happened", "text"), ("maybe", "so")])
    assert probs.shape == (3, 3) and np.allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    assert [int(i) for i in probs.argmax(axis=1)] == [0, 1, 2]


def test_a_batch_keeps_its_order_whatever_the_lengths(tiny: OnnxJudge) -> None:
    pairs = [("refund " * (i % 7 + 1), "x " * (40 - i)) for i in range(70)]
    one_by_one = np.concatenate([tiny.relevance([p]) for p in pairs])
    assert np.allclose(tiny.relevance(pairs), one_by_one, atol=1e-6)


def test_a_relevance_only_judge_refuses_claims(tmp_path: Path) -> None:
    d = judge_tiny.build(tmp_path / "rel", BOOSTS, outputs=1)
    judge = OnnxJudge(d / "model.onnx", tokenizer_path(), "rel")
    assert not judge.has_claims and judge.relevance([("refund", "x")])[0] > 0.5
    with pytest.raises(ModelError, match="relevance only"):
        judge.claim_probs([("a", "b")])


def test_choice_parsing(tmp_path: Path) -> None:
    assert JudgeChoice.parse("on").kind == "shipped" and JudgeChoice.parse("").kind == "shipped"
    assert JudgeChoice.parse("off").kind == "off" and JudgeChoice.parse("0").kind == "off"
    assert JudgeChoice.parse(str(tmp_path)) == JudgeChoice("path", str(tmp_path.resolve()))
    assert JudgeChoice.parse("Xenova/ms-marco-MiniLM-L-6-v2") == JudgeChoice("name", "Xenova/ms-marco-MiniLM-L-6-v2")


def test_the_shipped_judge_refuses_a_file_that_differs_from_its_digest(tmp_path: Path) -> None:
    copy = tmp_path / "judge"
    shutil.copytree(shipped_dir(), copy)
    with (copy / "model.onnx").open("ab") as fh:
        fh.write(b"\0")
    with pytest.raises(ModelError, match="tampered"):
        load_shipped(directory=copy)


def test_provision_a_judge_directory_then_load_it_and_catch_a_change(tmp_path: Path, tiny_dir: Path) -> None:
    home = tmp_path / "home"
    d = tmp_path / "mine"
    shutil.copytree(tiny_dir, d)
    assert provision_judge(str(d), home, check=True).state == FETCHABLE  # present, not recorded yet
    with pytest.raises(ModelError, match="not provisioned"):
        load_judge(home, str(d))
    report = provision_judge(str(d), home, check=False)
    assert report.state == PRESENT, report.detail
    assert "BOSUN_JUDGE=" in report.detail
    judge = load_judge(home, str(d))
    assert judge is not None and judge.relevance([("refund", "x")])[0] > 0.9
    assert provision_judge(str(d), home, check=True).state == PRESENT
    with (d / "model.onnx").open("ab") as fh:
        fh.write(b"\0")
    assert provision_judge(str(d), home, check=True).state == MISMATCH
    with pytest.raises(ModelError, match="differ from the manifest"):
        load_judge(home, str(d))


def test_provision_names_what_is_wrong(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert provision_judge(str(empty), tmp_path, check=False).state == UNAVAILABLE
    assert provision_judge("off", tmp_path, check=False).state == UNAVAILABLE
    assert load_judge(tmp_path, "off") is None


def _policies() -> list[Policy]:
    def pol(name: str, surface: str) -> Policy:
        return Policy(name=name, surface=surface, text=f"# {name}\n\n{surface}\n", source=f"{name}.md", fmt="oiax")

    return [pol("refunds", "when a customer asks for reimbursement of a payment"),
            pol("invoices", "issuing invoice documents to customers"),
            pol("deploys", "shipping code to production")]


def test_judged_route_reorders_and_admits_on_the_judge(tiny: OnnxJudge) -> None:
    emb = HashEmbedder(64)
    index = build_index_with(_policies(), emb, adapter=False)
    prompt = "shipping code to production: the customer wants money back"
    res = judged_route(index, prompt, emb.embed([prompt])[0], tiny, 2, JudgePoint(0.6, 0.6))
    assert [h.name for h in res.hits] == ["refunds"]  # the judge's pick, whatever the first stage's order
    assert res.hits[0].score > 0.9 and any("judge: relevant" in w for w in res.hits[0].why)
    assert res.order[0] == 0 and res.best_rejected == pytest.approx(0.5, abs=1e-6)
    off = judged_route(index, "what is the weather", emb.embed(["what is the weather"])[0], tiny, 2,
                       JudgePoint(0.6, 0.6))
    assert off.abstained and off.hits == []


def test_audit_with_the_judge_names_the_chunk_and_reports_its_reading(tiny: OnnxJudge) -> None:
    chunks = [{"id": "c1", "content": "The launch was confirmed for Monday.", "source_url": "https://a.example/x"},
              {"id": "c2", "content": "Sales rose in spring.", "source_url": "https://b.example/y"}]
    cfg = AuditConfig(allowed_domains=[])
    rep = audit("", chunks, "The launch was confirmed for Monday.", cfg, judge=tiny)
    claim = rep["claims"][0]
    assert claim["verdict"] == "supported" and claim["judge"]["supported"] > 0.9
    assert claim["source_chunk"]["id"] == "c1" and "chunk c1" in claim["note"]
    assert "judge" in claim and rep["judge"] == "tiny"
    rep = audit("", chunks, "The launch never happened on Monday.", cfg, judge=tiny)
    claim = rep["claims"][0]
    rules = audit("", chunks, "The launch never happened on Monday.", cfg)["claims"][0]
    assert claim["judge"]["refuted"] > 0.9 and "refuted 1.00" in claim["note"]
    if load_model(JUDGED_MODEL).refutes:  # the shipped arm keeps the judge's sure refutation
        assert claim["verdict"] == "contradicted" and claim["evidence"][0]["chunk_id"] == "c1"
    else:  # measured to cost accuracy: the reading is reported, the verdict stays the rules'
        assert claim["verdict"] == rules["verdict"] != "supported"
    rep = audit("", chunks, "The launch maybe moved to Monday.", cfg, judge=tiny)
    assert rep["claims"][0]["verdict"] == "unsupported" and rep["claims"][0]["nearest"]["chunk_id"] == "c1"


def _hashed_words(texts: list[str]) -> list[WordStates]:
    return [WordStates(tuple(content_tokens(t)), HashEmbedder(16).embed(content_tokens(t))) for t in texts]


def test_the_judges_reading_enters_the_confidence_model_when_tokens_align(tiny: OnnxJudge) -> None:
    """With the full semantic matcher, the judged arm of audit_model.json scores the rules' features plus the
    judge's two; the judge reading the same evidence as supporting raises the confidence it gives."""
    chunks = [{"id": "c1", "content": "The launch was confirmed for Monday.", "source_url": "https://a.example/x"}]
    cfg = AuditConfig(allowed_domains=[])
    embed = HashEmbedder(16).embed
    rep = audit("", chunks, "The launch was confirmed for Monday.", cfg, embed=embed, words=_hashed_words,
                judge=tiny)
    claim = rep["claims"][0]
    assert rep["token_alignment"] is True and {"judge_sup", "judge_ref"} <= set(claim["features"])
    judged = load_model(JUDGED_MODEL)
    assert claim["confidence"] == pytest.approx(judged.prob(claim["features"]), abs=1e-3)
    unsure = dict(claim["features"], judge_sup=0.0, judge_ref=0.0)
    assert judged.prob(claim["features"]) > judged.prob(unsure)  # P(supported) 1.0 vs 0.5 from the judge
    if judged.refutes:  # the shipped arm measured the judge's sure refutation worth keeping
        rep = audit("", chunks, "The launch never happened on Monday.", cfg, embed=embed, words=_hashed_words,
                    judge=tiny)
        assert rep["claims"][0]["verdict"] == "contradicted"


def test_evidence_window_keeps_the_sentences_that_share_the_claims_words() -> None:
    text, best = evidence_window("Albarn's debut album was released in 2014.",
                                 ["He likes cats. His debut album Everyday Robots was released in 2014.",
                                  "Blur is a band from London."], budget_words=12)
    assert text == "His debut album Everyday Robots was released in 2014." and best == [0]


async def test_engine_reports_the_judge_in_health_and_off_turns_it_off(tmp_path: Path, tiny: OnnxJudge) -> None:
    assert Config.from_env(env={}).judge == "off"  # the default: the shipped judge measured below the rules
    cfg = Config.from_env(env={"BOSUN_JUDGE": "off"}, home=tmp_path / "h1", policies=[])
    eng = Engine(cfg, embedder_factory=lambda _c: HashEmbedder(64), judge_factory=lambda _c: tiny)
    await eng.open(watch_policies=False)
    try:
        assert await eng.judge() is None and eng.health()["judge"] == {"state": "off"}
    finally:
        await eng.close()
    eng = Engine(Config.from_env(env={"BOSUN_JUDGE": "on"}, home=tmp_path / "h2", policies=[]),
                 embedder_factory=lambda _c: HashEmbedder(64), judge_factory=lambda _c: tiny)
    await eng.open(watch_policies=False)
    try:
        assert await eng.judge() is tiny
        assert eng.health()["judge"]["state"] == "ready" and eng.health()["judge"]["model"] == "tiny"
    finally:
        await eng.close()


async def test_a_judge_that_fails_to_load_is_reported_and_answers_say_so(tmp_path: Path) -> None:
    def broken(_c: Config) -> OnnxJudge:
        raise ModelError("the judge file is gone")

    eng = Engine(Config.from_env(env={"BOSUN_JUDGE": "on"}, home=tmp_path / "h", policies=[]),
                 embedder_factory=lambda _c: HashEmbedder(64), judge_factory=broken)
    await eng.open(watch_policies=False)
    try:
        assert await eng.judge() is None
        health = eng.health()["judge"]
        assert health["state"] == "failed" and "gone" in health["error"]
        rep = await eng.audit.report("", [{"content": "a b c", "source_url": "https://a.example"}], "a b c.", None)
        assert any("failed to load" in n for n in rep.get("notices", []))
    finally:
        await eng.close()


@pytest.mark.model
def test_the_shipped_judge_reads_a_changed_number_and_a_relevant_document() -> None:
    judge = load_shipped()
    card = json.loads((shipped_dir() / "judge.json").read_text())
    assert card["sha256"] and card["bytes"] == (shipped_dir() / "model.onnx").stat().st_size
    ev = "The company was founded in 1998 in Seattle and employs about 400 people."
    probs = judge.claim_probs([("The company was founded in 1998.", ev), ("The company was founded in 2005.", ev)])
    assert probs[0, 0] > probs[1, 0] and probs[1, 1] > probs[0, 1]
    rel = judge.relevance([("how do I roll back a failed database migration", "database migrations: changing a "
                            "production schema, writing and reverting migrations"),
                           ("how do I roll back a failed database migration", "frontend accessibility: colour "
                            "contrast, keyboard navigation and screen readers")])
    assert rel[0] > rel[1]  # the order; its calibration is what measured poorly (docs/judge.md)
