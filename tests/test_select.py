"""select_context: core selection logic (HashEmbedder) and the tool's contract."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from mcp import Client

from bosun.core.embedding import HashEmbedder, l2_normalise
from bosun.core.errors import InvalidInput
from bosun.core.selection.lexical import LexicalView, terms
from bosun.core.selection.select import NEAR_TIE_EPSILON, STRATEGIES, Params, Pool, select
from bosun.core.tokens import estimate_tokens

EMB = HashEmbedder(64)


def make_pool(goal: str, cands: list[str], ctx: list[str] | None = None, ids: list[str] | None = None) -> Pool:
    ctx = ctx or []
    return Pool(
        goal=EMB.embed([goal])[0],
        candidates=EMB.embed(cands),
        tokens=[estimate_tokens(c) for c in cands],
        labels=ids or [f"c{i}" for i in range(len(cands))],
        context=EMB.embed(ctx) if ctx else None,
        context_labels=[f"ctx{i}" for i in range(len(ctx))],
        candidate_texts=cands,
        goal_text=goal,
        context_texts=ctx,
    )


def vec_pool(goal: list[float], cands: list[list[float]], tokens: list[int], ctx: list[list[float]] | None = None) -> Pool:
    """A pool with hand-made geometry, for rules that must hold exactly."""
    return Pool(
        goal=l2_normalise(np.array(goal, dtype=np.float32))[0],
        candidates=l2_normalise(np.array(cands, dtype=np.float32)),
        tokens=tokens,
        labels=[f"c{i}" for i in range(len(cands))],
        context=l2_normalise(np.array(ctx, dtype=np.float32)) if ctx else None,
        context_labels=[f"ctx{i}" for i in range(len(ctx or []))],
    )


OFF = Params(relevance_floor=0.0)  # the relative relevance floor off: tests of other rules
GOAL = "improve api retry handling for transient failures and rate limits"
CANDS = [
    "improve api retry handling for transient failures with fixed delay",
    "exponential backoff with jitter reduces rate limit collisions during retries",
    "capture request ids in logs for easier debugging",
]
CTX = ["the current client already retries transient failures with fixed delay"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_strategy_respects_the_budget_and_orders_picks(strategy: str) -> None:
    pool = make_pool(GOAL, CANDS * 3, CTX, ids=[f"c{i}" for i in range(9)])
    for budget in (0, 5, 13, 30, 1000):
        sel = select(pool, budget, strategy)
        assert sel.tokens_used <= budget
        assert len(set(sel.indices)) == len(sel.indices)
        # every candidate is either selected or rejected with a reason
        assert sorted(sel.indices + [r.index for r in sel.rejected]) == list(range(9))


def test_novelty_is_against_the_nearest_item_not_the_centroid() -> None:
    # the candidate copies one of three context items: the centroid would call it fairly novel
    ctx = [[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]]
    pool = vec_pool([1, 1, 1, 1], [[1, 0, 0, 0.01], [0, 0, 0.2, 1]], [10, 10], ctx)
    sel = select(pool, 10, "psi0", Params(relevance_floor=0.0, redundancy_threshold=1.0001))
    assert sel.indices == [1]
    first = select(pool, 100, "psi0", Params(relevance_floor=0.0, redundancy_threshold=1.0001))
    copy = next(p for p in first.selected if p.index == 0)
    assert copy.novelty < 0.01


def test_selection_is_iterative_each_pick_joins_the_context() -> None:
    # c0 and c1 are near-copies; c2 is less relevant but new. Baseline takes both copies.
    pool = vec_pool([1, 0.3, 0], [[1, 0, 0], [1, 0.02, 0], [0.3, 0.2, 1]], [10, 10, 10])
    assert select(pool, 20, "baseline", OFF).indices == [1, 0]
    psi = select(pool, 20, "psi0", Params(relevance_floor=0.0, redundancy_threshold=1.0001))
    assert psi.indices[0] in (0, 1) and psi.indices[1] == 2


def test_near_duplicates_are_rejected_as_redundant_with_the_pick() -> None:
    pool = make_pool(GOAL, [CANDS[0], CANDS[0] + " ", CANDS[2]])
    sel = select(pool, 1000, "psi0", OFF)
    assert 1 not in sel.indices or 0 not in sel.indices
    rej = [r for r in sel.rejected if r.reason == "redundant"]
    assert len(rej) == 1 and rej[0].redundant_with in ("c0", "c1") and "redundant with" in rej[0].why


def test_redundant_with_context_names_the_context_item() -> None:
    pool = make_pool(GOAL, [CTX[0], CANDS[1]], CTX)
    sel = select(pool, 1000, "hybrid", OFF)
    assert sel.indices == [1]
    assert sel.rejected[0].reason == "redundant" and sel.rejected[0].redundant_with == "ctx0"


def test_near_tie_rule_picks_higher_value_within_epsilon() -> None:
    # goal e0, context e3. c0: value 0.60, novelty 0.50 -> 0.300. c1: value 0.50, novelty 0.61 -> 0.305.
    # c1 scores higher, but by less than NEAR_TIE_EPSILON, so the more valuable c0 wins.
    def pool_for(c1_ctx: float) -> Pool:
        c0 = [0.6, 0.0, np.sqrt(1 - 0.36 - 0.25), 0.5]
        c1 = [0.5, np.sqrt(1 - 0.25 - c1_ctx**2), 0.0, c1_ctx]
        return Pool(goal=np.array([1, 0, 0, 0], np.float32), candidates=np.array([c1, c0], np.float32),
                    tokens=[5, 5], labels=["c1", "c0"], context=np.array([[0, 0, 0, 1]], np.float32),
                    context_labels=["x"])

    tie = select(pool_for(0.39), 5, "psi0", OFF)
    assert NEAR_TIE_EPSILON > 0.305 - 0.300
    assert tie.indices == [1] and abs(tie.selected[0].score - 0.300) < 1e-3
    clear = select(pool_for(0.30), 5, "psi0", OFF)  # c1: 0.5 * 0.70 = 0.35, a clear win
    assert clear.indices == [0]


def test_mmr_lambda_one_is_relevance_order() -> None:
    pool = make_pool(GOAL, CANDS)
    rel_order = select(pool, 1000, "baseline", OFF).indices
    assert select(pool, 1000, "mmr", Params(relevance_floor=0.0, mmr_lambda=1.0,
                                            redundancy_threshold=1.0001)).indices == rel_order


def test_over_budget_items_are_reported_and_smaller_ones_still_fit() -> None:
    big = "retry handling " * 200
    pool = make_pool(GOAL, [big, CANDS[0]])
    sel = select(pool, 50, "psi0", OFF)
    assert sel.indices == [1]
    assert sel.rejected[0].index == 0 and sel.rejected[0].reason == "over_budget"


def test_budget_smaller_than_every_candidate_is_an_empty_answer_with_reason() -> None:
    sel = select(make_pool(GOAL, CANDS), 3, "hybrid", OFF)
    assert sel.selected == [] and sel.note is not None and "larger than the budget" in sel.note


def test_irrelevant_items_fall_below_min_relevance() -> None:
    pool = vec_pool([1, 0, 0], [[1, 0.1, 0], [0.01, 0, 1]], [5, 5])
    sel = select(pool, 1000, "psi0", Params(relevance_floor=0.0, min_relevance=0.05))
    assert sel.indices == [0]
    assert sel.rejected[0].index == 1 and sel.rejected[0].reason == "irrelevant"


def test_max_items_and_bad_params() -> None:
    pool = make_pool(GOAL, CANDS)
    assert len(select(pool, 1000, "hybrid", Params(relevance_floor=0.0, max_items=1)).selected) == 1
    with pytest.raises(InvalidInput, match="strategy"):
        select(pool, 10, "nope", OFF)
    with pytest.raises(InvalidInput, match="mmr_lambda"):
        select(pool, 10, "mmr", Params(mmr_lambda=2.0))


def test_hybrid_multi_hop_follows_the_entity_a_pick_names() -> None:
    goal = "what office did the actress who starred in kiss and tell hold"
    cands = [
        "kiss and tell is a 1945 comedy film starring shirley temple as corliss archer",
        "shirley temple black was an actress who later served as chief of protocol",
        "a kiss for corliss is a 1949 comedy film about teenage romance",
        "the lord high treasurer was an english government office",
    ]
    pool = make_pool(goal, cands)
    toks = pool.tokens
    budget = toks[0] + toks[1]
    hyb = select(pool, budget, "hybrid", OFF)
    assert set(hyb.indices) == {0, 1}
    second = next(p for p in hyb.selected if p.index == 1)
    assert hyb.selected[0].index == 0 and "linked to c0" in second.why


def test_lexical_terms_and_view() -> None:
    assert terms("The Retries were Failing") == ("retrie", "fail") or terms("The Retries were Failing")[1] == "fail"
    view = LexicalView(["alpha beta", "beta gamma", "delta"])
    sims = view.similarity_to("beta")
    assert sims[0] > 0 and sims[1] > 0 and sims[2] == 0
    cols, vals = view.query("gamma delta unknown")
    assert len(cols) == 2 and abs(float((vals * vals).sum()) - 1.0) < 1e-5


# -- the tool ---------------------------------------------------------------------------------
async def call(client: Client, **args: Any) -> Any:
    """select_context with the relevance floor off (the HashEmbedder's similarities carry no meaning),
    so each test isolates its own rule; include_text travels in options."""
    options = {"relevance_floor": 0.0, **args.pop("options", {})}
    if "include_text" in args:
        options["include_text"] = args.pop("include_text")
    return await client.call_tool("select_context", {**args, "options": options})


async def test_tool_selects_in_order_with_the_forensic_view(client: Client) -> None:
    res = await call(client, goal=GOAL, candidates=[{"id": "dup", "text": CTX[0], "source": "legacy"}, *CANDS[1:]],
                     context=CTX, budget_tokens=200)
    assert not res.is_error, res.content[0].text
    out = res.structured_content
    ids = [s["id"] for s in out["selected"]]
    assert "dup" not in ids and ids[0] == "c1"
    first = out["selected"][0]
    assert {"id", "rank", "relevance", "novelty", "score", "why", "tokens"} <= set(first)
    rej = {r["id"]: r for r in out["rejected"]}
    assert rej["dup"]["reason"] == "redundant" and rej["dup"]["redundant_with"] == "ctx0"
    assert out["tokens_used"] <= 200


async def test_tool_reads_refs_and_caches_embeddings(client: Client, engine: Any) -> None:
    ref = await engine.refs.put(CANDS[1].encode())
    args = dict(goal=GOAL, candidates=[{"id": "r", "ref": ref}, CANDS[2]], budget_tokens=500, include_text=True)
    res = await call(client, **args)
    out = res.structured_content
    assert out["selected"][0]["id"] == "r" and out["selected"][0]["text"] == CANDS[1]
    emb = await engine.embedder()
    before = emb.inner  # the inner model sees no new texts on a repeat
    calls: list[int] = []
    orig = before.embed

    mine = {GOAL, *CANDS}

    def counting(texts: Any) -> Any:
        # the policy index may embed its own texts in the background: count only ours
        calls.extend(1 for t in texts if t in mine)
        return orig(texts)

    before.embed = counting  # type: ignore[method-assign]
    try:
        again = await call(client, **args)
    finally:
        before.embed = orig  # type: ignore[method-assign]
    assert again.structured_content["selected"] == out["selected"] and calls == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ({"candidates": [{"id": "a", "text": "x y"}, {"id": "a", "text": "z"}]}, "duplicate id 'a'"),
        ({"candidates": [{"text": "x" * 1_000_001}]}, "candidates[0].text: is 1,000,001 bytes"),
        ({"candidates": [{"ref": "mem://sha256:" + "0" * 64}]}, "candidates[0].ref"),
        ({"candidates": [{"id": "a"}]}, "exactly one of text, ref, policy"),
        ({"candidates": ["ok"], "goal": "  "}, "goal"),
        ({"candidates": ["ok"], "budget_tokens": -1}, "budget_tokens"),
        ({"candidates": ["ok"], "context": [{"id": "x", "text": "a", "colour": 1}]}, "unknown keys"),
    ],
)
async def test_tool_bad_input_names_the_field(client: Client, args: dict[str, Any], needle: str) -> None:
    full = {"goal": GOAL, "budget_tokens": 100, **args}
    res = await call(client, **full)
    assert res.is_error and needle in res.content[0].text, res.content[0].text


async def test_tool_empty_candidates_and_tiny_budget_are_answers(client: Client) -> None:
    empty = await call(client, goal=GOAL, candidates=[], budget_tokens=100)
    assert not empty.is_error and empty.structured_content["selected"] == []
    assert "no candidates" in empty.structured_content["note"]
    tiny = await call(client, goal=GOAL, candidates=CANDS, budget_tokens=2)
    assert not tiny.is_error and tiny.structured_content["selected"] == []
    assert "larger than the budget" in tiny.structured_content["note"]
    assert {r["reason"] for r in tiny.structured_content["rejected"]} == {"over_budget"}


def test_command_renders_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any) -> None:
    import argparse

    from bosun.server.commands import select as cmd

    req = {"goal": GOAL, "candidates": CANDS, "context": CTX, "budget": 40}
    path = tmp_path / "req.json"
    path.write_text(json.dumps(req))
    parser = argparse.ArgumentParser()
    cmd.add_arguments(parser)
    args = parser.parse_args([str(path), "--home", str(tmp_path / "home")])
    monkeypatch.setattr("bosun.server.engine.default_embedder_factory", lambda _c: HashEmbedder(64))
    assert cmd.run(args) == 0
    text = capsys.readouterr().out
    assert "strategy: hybrid" in text and "relev" in text and "c1" in text
    assert cmd.run(parser.parse_args([str(path), "--home", str(tmp_path / "home"), "--compare"])) == 0
    text = capsys.readouterr().out
    assert "strategy: psi0" in text and "strategy: baseline" in text and "comparison (hybrid vs psi0, baseline)" in text
    assert cmd.run(parser.parse_args([str(path), "--home", str(tmp_path / "home"), "--json"])) == 0
    assert json.loads(capsys.readouterr().out)["strategy"] == "hybrid"
    bad = tmp_path / "bad.json"
    bad.write_text("[1]")
    assert cmd.run(parser.parse_args([str(bad)])) == 2


async def test_tool_resolves_policy_names_through_the_policy_index(client: Client) -> None:
    res = await call(client, goal="who may grant production database access", budget_tokens=100_000,
                     candidates=[{"policy": "access-control"}, "the cafeteria opens at noon"], include_text=True)
    assert not res.is_error, res.content[0].text
    out = res.structured_content
    pol = next(s for s in out["selected"] if s["id"] == "access-control")
    assert pol["source"] == "bosun://policy/access-control" and len(pol["text"]) > 100
    missing = await call(client, goal="x", candidates=[{"policy": "no-such-policy"}], budget_tokens=100)
    assert missing.is_error and "candidates[0].policy" in missing.content[0].text


def test_lexical_view_is_reused_for_the_same_pool_and_gives_the_same_answer() -> None:
    from bosun.core.selection import lexical as select_lexical

    select_lexical._VIEWS.clear()
    pool = make_pool(GOAL, [*CANDS, "retry budgets cap how often clients retry"])
    first = select(pool, 1000, "hybrid", OFF)
    assert len(select_lexical._VIEWS) == 1
    view = next(iter(select_lexical._VIEWS.values()))
    again = select(pool, 1000, "hybrid", OFF)
    assert next(iter(select_lexical._VIEWS.values())) is view
    assert again.indices == first.indices and [p.score for p in again.selected] == [p.score for p in first.selected]


def test_hybrid_answers_for_a_pool_without_terms_when_the_vocabulary_is_large(monkeypatch: pytest.MonkeyPatch) -> None:
    """A big process vocabulary switches the view to pool-local ids; a pool whose texts hold
    no terms then has an empty vocabulary, and the goal's lookup must not index into it."""
    from bosun.core.selection import lexical as select_lexical

    monkeypatch.setattr(select_lexical, "_VOCAB", {f"zz{i}": i for i in range(70_000)})
    select_lexical.forget_texts()  # ids cached against the real vocabulary
    try:
        pool = make_pool("retry the upload with backoff", ["", "!!", "?"])
        out = select(pool, 100, "hybrid", OFF)
        assert len(out.selected) + out.rejected_total == 3
        assert all(p.relevance == pytest.approx(0.3 * r) for p, r in
                   zip(out.selected, (float(pool.candidates[p.index] @ pool.goal) for p in out.selected), strict=True))
    finally:
        select_lexical.forget_texts()


# -- relevance floor, iterative=false, nothing-new stop (issue 19 item 7) ----------------------
def test_relevance_floor_rejects_what_is_far_below_the_best_candidate() -> None:
    # c0 is on the goal, c1 barely related: the budget holds both, the floor keeps c1 out
    pool = vec_pool([1, 0, 0], [[1, 0.1, 0], [0.05, 1, 0]], [10, 10])
    assert select(pool, 100, "psi0", OFF).indices == [0, 1]
    sel = select(pool, 100, "psi0", Params(relevance_floor=0.3))
    assert sel.indices == [0]
    assert sel.rejected[0].reason == "irrelevant" and "below the floor" in sel.rejected[0].why
    with pytest.raises(InvalidInput, match="relevance_floor"):
        select(pool, 100, "psi0", Params(relevance_floor=1.5))


def test_iterative_false_scores_once_against_the_context() -> None:
    # c0 and c1 are near-copies; c2 is less relevant but new
    pool = vec_pool([1, 0.3, 0], [[1, 0, 0], [1, 0.02, 0], [0.3, 0.2, 1]], [10, 10, 10])
    again = Params(relevance_floor=0.0, redundancy_threshold=1.0001)
    assert select(pool, 20, "psi0", again).indices[1] == 2  # iterative: the copy loses its novelty
    once = select(pool, 20, "psi0", Params(relevance_floor=0.0, redundancy_threshold=1.0001, iterative=False))
    assert sorted(once.indices) == [0, 1]  # one shot: both copies keep the score they had


def test_an_item_that_adds_nothing_is_not_packed_because_it_fits() -> None:
    # the only candidate that fits repeats the context: hybrid scores it below zero and leaves the budget unused
    pool = make_pool(GOAL, [CANDS[0]], ctx=[CANDS[0] + " today"])
    sel = select(pool, 100, "hybrid", OFF)
    assert sel.indices == []
    assert sel.rejected[0].reason == "redundant"


async def test_tool_options_are_checked_naming_the_field(client: Client) -> None:
    for options, field in [({"max_items": "two"}, "options.max_items"), ({"colour": 1}, "options.colour"),
                           ({"relevance_floor": 2.0}, "options.relevance_floor"),
                           ({"show_rejected": -1}, "options.show_rejected")]:
        res = await client.call_tool("select_context", {"goal": GOAL, "candidates": CANDS, "options": options})
        assert res.is_error and field in res.content[0].text, (options, res.content)


async def test_tool_iterative_false_is_honoured(client: Client) -> None:
    cands = [CANDS[0], CANDS[0] + " again", CANDS[1]]
    args = {"goal": GOAL, "candidates": cands, "budget_tokens": 1000, "strategy": "psi0",
            "options": {"relevance_floor": 0.0}}
    iterative = (await client.call_tool("select_context", args)).structured_content
    once = (await client.call_tool("select_context", {**args, "iterative": False})).structured_content
    assert iterative is not None and once is not None
    # scored once, the near-copy is not recognised as redundant with the first pick
    assert len(once["selected"]) > len(iterative["selected"])


def _titled_pool() -> Pool:
    """A pick that names a titled candidate (its heading) while the two are close in meaning."""
    goal = "which county is tysons galleria in"
    cands = [
        "Tysons Galleria\nTysons Galleria is a shopping mall in McLean, Virginia, near Fairfax.",
        "McLean, Virginia\nMcLean, Virginia, near Fairfax, is a community in Fairfax County.",
        "Poughkeepsie Galleria\nThe Poughkeepsie Galleria is a shopping mall in New York.",
    ]
    e = np.eye(8, dtype=np.float32)
    vecs = np.stack([e[0], 0.8 * e[0] + 0.6 * e[1], 0.5 * e[0] + np.sqrt(0.75) * e[2]]).astype(np.float32)
    return Pool(goal=e[0], candidates=vecs, tokens=[estimate_tokens(c) for c in cands],
                labels=["galleria", "mclean", "poughkeepsie"], candidate_texts=cands, goal_text=goal)


def test_a_candidate_the_pick_names_is_not_redundant_with_it() -> None:
    pool = _titled_pool()
    budget = pool.tokens[0] + max(pool.tokens[1], pool.tokens[2])
    linked = select(pool, budget, "hybrid", OFF)
    assert linked.indices == [0, 1] and "linked to galleria" in linked.selected[1].why
    # without the rule, similarity 0.8 to the first pick makes the named county page look redundant
    plain = select(pool, budget, "hybrid", Params(relevance_floor=0.0, linked_not_redundant=False))
    assert plain.indices == [0, 2]


def test_the_link_exemption_needs_a_heading() -> None:
    pool = _titled_pool()
    untitled = [t.replace("\n", " ") for t in pool.candidate_texts or []]
    flat = Pool(goal=pool.goal, candidates=pool.candidates, tokens=pool.tokens, labels=pool.labels,
                candidate_texts=untitled, goal_text=pool.goal_text)
    budget = pool.tokens[0] + max(pool.tokens[1], pool.tokens[2])
    assert select(flat, budget, "hybrid", OFF).indices == [0, 2]  # sentences do not name their subject first


def test_look_ahead_picks_the_first_item_of_the_best_pair_that_fits() -> None:
    pool = _titled_pool()
    budget = pool.tokens[0] + max(pool.tokens[1], pool.tokens[2])
    assert select(pool, budget, "hybrid", Params(relevance_floor=0.0, lookahead=3)).indices[:1] == [0]
    with pytest.raises(InvalidInput, match="lookahead"):
        select(pool, budget, "hybrid", Params(lookahead=-1))


def test_a_big_pool_keeps_its_lexical_view(monkeypatch: pytest.MonkeyPatch) -> None:
    from bosun.core.selection import lexical as select_lexical

    select_lexical._VIEWS.clear()
    texts = [f"passage {i} about topic {i % 7} and item {i}" for i in range(300)]
    first = select_lexical.view_of(texts)
    assert select_lexical.view_of(texts) is first  # held: not rebuilt on the next call
    monkeypatch.setattr(select_lexical, "_VIEW_MAX_ENTRIES", len(first.indices) + 10)
    other = select_lexical.view_of([t + " more" for t in texts])  # both together exceed the total: the oldest goes
    assert list(select_lexical._VIEWS.values()) == [other]


def test_rejections_are_written_out_when_read_and_stay_the_same() -> None:
    pool = make_pool(GOAL, [*CANDS, "retry budgets cap how often clients retry", "the cafeteria opens at noon"])
    sel = select(pool, 25, "hybrid", OFF)
    assert sel.rejected_total == len(CANDS) + 2 - len(sel.selected)
    first = sel.rejected
    assert first and sel.rejected is first and {r.reason for r in first} <= {"redundant", "over_budget", "irrelevant"}


def test_options_carry_the_look_ahead() -> None:
    from bosun.server.services.select import options_params

    params, _, _ = options_params({"lookahead": 5})
    assert params.lookahead == 5 and Params().lookahead == 0
    with pytest.raises(InvalidInput, match=r"options\.lookahead"):
        options_params({"lookahead": -2})
    with pytest.raises(InvalidInput, match=r"options\.lookahead"):
        options_params({"lookahead": "5"})


def _comparison_pool() -> Pool:
    """A comparison question naming two titled documents; a third shares part of one title and is
    closer to the goal in meaning (the distractor a pick by similarity and term overlap prefers)."""
    goal = "Which band had more members, Screaming Trees or Letters to Cleo?"
    cands = [
        "Letters to Cleo\nLetters to Cleo are an alternative rock band from Boston, Massachusetts.",
        "Screaming Trees\nScreaming Trees was an American rock band formed in Ellensburg in 1985.",
        "Screaming Trees discography\nThe discography of Screaming Trees, a band with several members, lists albums.",
        "Mark Lanegan\nMark Lanegan was an American singer and songwriter from Ellensburg, Washington.",
        "Boston\nBoston is the capital and most populous city of Massachusetts.",
    ]
    e = np.eye(8, dtype=np.float32)
    vecs = np.stack([e[0], 0.6 * e[0] + 0.8 * e[1], 0.8 * e[0] + 0.6 * e[2], e[3], e[4]]).astype(np.float32)
    return Pool(goal=e[0], candidates=vecs, tokens=[estimate_tokens(c) for c in cands],
                labels=["cleo", "trees", "discography", "lanegan", "boston"], candidate_texts=cands, goal_text=goal)


def test_the_documents_the_goal_names_are_preferred() -> None:
    pool = _comparison_pool()
    two = Params(relevance_floor=0.0, max_items=2)
    named = select(pool, 10_000, "hybrid", two)
    assert sorted(named.indices) == [0, 1]
    assert "named by the goal" in named.selected[1].why
    # without the goal's links, the closer page that holds the same goal terms takes a place
    assert 2 in select(pool, 10_000, "hybrid", replace(two, goal_links=False)).indices


def test_named_by_weighs_the_share_of_the_heading_the_text_holds() -> None:
    pool = _comparison_pool()
    texts = [*(pool.candidate_texts or []), "screaming trees were loud in the ellensburg woods that year"]
    view = LexicalView(texts)
    cols, _ = view.query(pool.goal_text or "")
    present = np.zeros(view.v + 1, dtype=np.float32)
    present[cols] = 1.0
    named = view.named_by(present)
    assert named[0] == pytest.approx(1.0) and named[1] == pytest.approx(1.0)
    assert 0.0 < named[2] < 0.9  # "discography" is not in the goal
    assert named[3] == 0.0 and named[4] == 0.0
    assert named[5] == 0.0  # no heading line: a sentence does not name its subject first
