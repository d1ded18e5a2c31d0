"""select_context with the real embedded model: tests about meaning."""

from __future__ import annotations

from mcp import Client

GOAL = "Improve API retry handling for transient failures and rate limits."


async def test_prefers_the_novel_note_over_one_that_repeats_the_context(real_client: Client) -> None:
    res = await real_client.call_tool("select_context", {
        "goal": GOAL,
        "context": ["The current client already retries transient failures with fixed delay."],
        "candidates": [
            {"id": "repeat", "text": "Improve API retry handling for transient failures with fixed delay."},
            {"id": "backoff", "text": "Exponential backoff with jitter reduces rate-limit collisions during retries."},
            {"id": "logs", "text": "Capture request IDs in logs for easier debugging."},
        ],
        "budget_tokens": 20,
    })
    assert not res.is_error, res.content[0].text
    out = res.structured_content
    assert [s["id"] for s in out["selected"]] == ["backoff"]
    repeat = next(r for r in out["rejected"] if r["id"] == "repeat")
    assert repeat["reason"] == "redundant" and "ctx0" in repeat["why"]


async def test_a_paraphrase_of_a_pick_gives_way_to_a_new_aspect(real_client: Client) -> None:
    cands = [
        {"id": "a", "text": "Retry failed HTTP requests with exponential backoff and random jitter."},
        {"id": "a2", "text": "Failed HTTP calls should be retried using exponential back-off plus jitter."},
        {"id": "b", "text": "Honour the Retry-After header when the server answers 429 Too Many Requests."},
    ]
    res = await real_client.call_tool("select_context", {
        "goal": "How should the client retry requests that fail or hit rate limits?",
        "candidates": cands, "budget_tokens": 40,
    })
    out = res.structured_content
    ids = [s["id"] for s in out["selected"]]
    assert "b" in ids and len({"a", "a2"} & set(ids)) == 1, out


async def test_an_unrelated_item_is_not_packed_because_the_budget_allows(real_client: Client) -> None:
    res = await real_client.call_tool("select_context", {
        "goal": GOAL,
        "candidates": [
            {"id": "backoff", "text": "Exponential backoff with jitter reduces rate-limit collisions during retries."},
            {"id": "retry_after", "text": "Honour the Retry-After header when the server answers 429 Too Many Requests."},
            {"id": "cat", "text": "My cat likes tuna."},
        ],
        "budget_tokens": 500,
    })
    out = res.structured_content
    assert out is not None and "cat" not in [s["id"] for s in out["selected"]], out
    assert next(r for r in out["rejected"] if r["id"] == "cat")["reason"] == "irrelevant"


async def test_the_near_duplicate_is_not_packed_when_the_novel_note_does_not_fit(real_client: Client) -> None:
    # psi-loop's retry task: the novel note is 13 tokens; at 12 only the repeat (and the unrelated note) fit
    res = await real_client.call_tool("select_context", {
        "goal": GOAL,
        "context": ["The current client already retries transient failures with fixed delay.",
                    "Avoid selecting another note that repeats the fixed-delay policy."],
        "candidates": [
            {"id": "repeat", "text": "Improve API retry handling for transient failures with fixed delay."},
            {"id": "backoff", "text": "Exponential backoff with jitter reduces rate-limit collisions during retries."},
            {"id": "logs", "text": "Capture request IDs in logs for easier debugging."},
        ],
        "budget_tokens": 12,
    })
    out = res.structured_content
    assert out is not None and "repeat" not in [s["id"] for s in out["selected"]], out
    reasons = {r["id"]: r["reason"] for r in out["rejected"]}
    assert reasons["backoff"] == "over_budget" and reasons["repeat"] == "redundant"
