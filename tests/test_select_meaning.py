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
