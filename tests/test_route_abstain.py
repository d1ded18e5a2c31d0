"""The corroboration gate: one shared word must not route an unrelated prompt on its own."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from mcp import Client

from bosun.core.embedding import HashEmbedder
from bosun.core.routing.abstain import GATE_OFF, SHIPPED, OperatingPoint, admissible
from bosun.core.routing.background import BACKGROUND
from bosun.core.routing.corpus import parse_policy
from bosun.core.routing.route import build_index_with, matched_counts, mention_only, score, split_quoted

DEPLOY = """# Production deploys

**Agent-trigger:** deploying a service to production, rollback plans, canary rollouts

Every deploy has a written rollback plan before it starts.

Canary traffic is watched for fifteen minutes before the rollout continues.
"""
FLAGS = """# Feature flags

**Agent-trigger:** adding or removing feature flags, kill switches

Stale flags are removed with their dead code.
"""


def _index():  # type: ignore[no-untyped-def]
    pols = [parse_policy("/c/deploys.md", DEPLOY), parse_policy("/c/flags.md", FLAGS)]
    return build_index_with([p for p in pols if p is not None], HashEmbedder(64))


def test_matched_counts_need_words_together_in_one_place() -> None:
    index = _index()
    counts = lambda prompt: matched_counts(index, prompt).tolist()  # noqa: E731
    assert counts("plan a three-day trip to Lisbon") == [1.0, 0.0]  # "plan" alone
    assert counts("what is the rollback plan for this deploy?") == [3.0, 0.0]  # surface: rollback, plan, deploy
    assert counts("remove the stale code") == [0.0, 3.0]  # one body paragraph: stale, removed (stemmed), code
    # two words of one document, but in different paragraphs and not both in the surface: still one place each
    assert counts("fifteen plans") == [1.0, 0.0]
    assert counts("zzz qqq") == [0.0, 0.0]
    # two words in one body paragraph: a paragraph mentions many things, the surface states the situation;
    # they count only where every body paragraph counts (body_min=1), which the gate reads as weaker evidence
    assert counts("more canary traffic") == [1.0, 0.0]  # canary on the surface; canary + traffic in a paragraph
    assert matched_counts(index, "more canary traffic", body_min=1).tolist() == [2.0, 0.0]
    # quoted words are mentioned, not used
    assert counts("translate 'rollback plan' into German") == [0.0, 0.0]


def test_matched_counts_for_ranked_documents_only_equal_the_full_counts() -> None:
    from bosun.core.routing.route import matched_counts_pair

    index = _index()
    for prompt in ("what is the rollback plan for this deploy?", "remove the stale code", "more canary traffic"):
        full = matched_counts_pair(index, prompt)
        for doc in range(len(index)):
            part = matched_counts_pair(index, prompt, docs=np.array([doc], np.int64))
            assert part[0][doc] == full[0][doc] and part[1][doc] == full[1][doc]
            assert part[0].sum() == full[0][doc]  # documents left out count nothing


def test_quoted_text_is_a_mention() -> None:
    assert split_quoted("Translate 'rate limit' into German") == ("Translate   into German", "rate limit")
    assert split_quoted('say "kill switch" twice') == ("say   twice", "kill switch")
    assert split_quoted("It's Friday and Sam's deploy failed") == ("It's Friday and Sam's deploy failed", "")
    assert split_quoted("Remove the `dark_mode` flag") == ("Remove the `dark_mode` flag", "")  # code, not a mention
    # a quotation holding more of the prompt's content words than the text around it is the request itself
    pasted = 'Here is my question: "find a curated playlist of popular jazz songs from the fifties"'
    assert split_quoted(pasted) == (pasted, "")
    assert split_quoted('"Show me the weather forecast for Paris tomorrow"')[1] == ""
    assert split_quoted("Translate 'good morning' into Spanish")[1] == "good morning"  # equal or fewer: a mention
    index = _index()
    assert mention_only(index, "translate 'rollback plan' into German").tolist() == [True, False]
    # a shared word outside the quotes: the request itself is about the document
    assert mention_only(index, "the deploy failed with 'rollback plan missing'").tolist() == [False, False]
    assert mention_only(index, "what is the rollback plan").tolist() == [False, False]


def test_index_keeps_each_documents_background() -> None:
    index = _index()
    assert index.bg_mean is not None and index.bg_sd is not None and index.bg_vecs is not None
    assert index.bg_vecs.shape[0] == len(BACKGROUND) and index.bg_mean.shape == (2,)
    assert float(index.bg_sd.min()) >= 0.03  # the floor keeps a flat background from inflating z
    sc = score(index, "rollback plan", HashEmbedder(64).embed(["rollback plan"])[0])
    assert sc.bg_z is not None and sc.words is not None and sc.bg_near is not None


def test_gate_is_monotone_and_can_be_switched_off() -> None:
    op = dataclasses.replace(SHIPPED, solo_bg_z=3.0)
    solo = {"multi": 0.0, "bg_z": 5.0, "bg_gap": 0.05}
    assert admissible(op, solo, 0.9, 0.5)
    assert not admissible(op, solo, 0.4, 0.5)  # never admits what the model rejected
    assert not admissible(op, {**solo, "bg_z": 2.9}, 0.99, 0.5)  # not distinct from the background
    assert not admissible(op, {**solo, "bg_gap": -0.01}, 0.99, 0.5)  # reads like an everyday request
    assert admissible(op, {**solo, "multi": 1.0, "bg_z": -1.0, "bg_gap": -0.2}, 0.6, 0.5)  # two words co-occur
    assert admissible(op, {**solo, "bg_z": -1.0, "bg_gap": -0.2}, 0.6, 0.5, solo_bg_z=GATE_OFF)
    # every shared word inside quotation marks: neither words nor embedding speak for the request
    assert not admissible(op, {**solo, "multi": 1.0, "mention": 1.0}, 0.99, 0.5)
    # two words in one body paragraph only: the prompt must read closer to the document than to the background
    assert admissible(op, {**solo, "pair": 1.0, "bg_z": 0.0, "bg_gap": 0.01}, 0.9, 0.5)
    assert not admissible(op, {**solo, "pair": 1.0, "bg_z": 9.0, "bg_gap": -0.01}, 0.9, 0.5)


def test_operating_point_written_before_the_gate_reads_with_the_gate_off() -> None:
    data = {"threshold": 0.5, "bias": 0.0, "weights": {"sem": 1.0, "lex": 1.0}}
    op = OperatingPoint.from_dict(data, "old.toml")
    assert op.solo_bg_z == GATE_OFF and op.weights == {"sem": 1.0, "lex": 1.0}
    assert OperatingPoint.from_dict({**data, "solo_bg_z": 4}, "new.toml").solo_bg_z == 4.0
    from bosun.core.errors import InvalidInput

    with pytest.raises(InvalidInput, match="unknown"):
        OperatingPoint.from_dict({**data, "weights": {"semantic": 1.0}}, "bad.toml")


@pytest.mark.model
async def test_one_shared_word_everyday_prompts_abstain(real_client: Client) -> None:
    # each shares one content word with one demo policy; with the gate off every one of them routed
    # (docs/routing.md lists one-word prompts that still route: the gate lowers the rate, it is not zero)
    for prompt in (
        "Recommend a good book about the history of Rome",
        "Plan a three-day trip to Lisbon",
        "Give me a savings plan for buying a house",
        "Write a review of the new Italian restaurant downtown",
        "When do swallows migrate south for the winter?",
        "Is it safe to deploy an airbag myself?",
        "What secret ingredient makes pesto taste better?",
        "What's the best way to test if an egg is fresh?",
        "Translate 'rollback plan' into German",  # a mention: the quoted words are the document's, the request is not
    ):
        out = (await real_client.call_tool("route", {"prompt": prompt})).structured_content
        assert out is not None and out["hits"] == [] and out["abstained"] is True, (prompt, out)
    # while a prompt that names the policy's situation in two words still routes
    out = (await real_client.call_tool("route", {"prompt": "What is our rollback plan for this deploy?"})).structured_content
    assert out is not None and out["hits"] and out["hits"][0]["name"] == "production-deploys"


def test_background_vectors_are_normalised_rows() -> None:
    index = _index()
    assert index.bg_vecs is not None
    assert np.allclose(np.linalg.norm(index.bg_vecs, axis=1), 1.0, atol=1e-4)
