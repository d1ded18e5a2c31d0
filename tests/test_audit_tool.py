"""The audit and filter_sources MCP tools, over both wire eras."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

CHUNKS = [
    {"content": "Aspirin lowers fever by inhibiting COX enzymes. Common side effects include stomach irritation "
                "and nausea.", "source_url": "https://pubmed.ncbi.nlm.nih.gov/12345", "metadata": {"year": 2024}},
    {"content": "Miracle cures are available with no side effects or drug interactions.",
     "source_url": "https://discountpharma.biz/meds"},
]
CONFIG = {"allowed_domains": ["ncbi.nlm.nih.gov"], "max_source_age_days": 365, "stale_source_action": "fail"}


async def call(client: Client, name: str, args: dict[str, Any]) -> Any:
    return await client.call_tool(name, args)


async def test_audit_tool(client: Client) -> None:
    res = await call(client, "audit", {
        "response": "Aspirin lowers fever by inhibiting COX enzymes. Aspirin does not lower fever.",
        "chunks": CHUNKS, "config": CONFIG, "as_of": "2024-06-01",
    })
    assert not res.is_error, res.content
    rep = res.structured_content
    assert [c["verdict"] for c in rep["claims"]] == ["supported", "contradicted"]
    assert rep["claims"][0]["freshness_status"] == "fresh"
    assert rep["blocked_source_details"][0]["reason"] == "domain_not_allowlisted"
    assert rep["as_of"] == "2024-06-01" and rep["trust_passed"] is False


async def test_audit_tool_semantic_uses_engine_model(client: Client) -> None:
    res = await call(client, "audit", {
        "response": "Aspirin lowers fever by inhibiting COX enzymes.", "chunks": CHUNKS,
        "config": {"matcher": "semantic"},
    })
    assert not res.is_error, res.content
    rep = res.structured_content
    assert rep["matcher"] == "semantic" and rep["matcher_model"].startswith("hash-bow")
    assert rep["claims"][0]["features"]["sem_max"] > 0.5


async def test_enforce_mode_raises_with_reasons(client: Client) -> None:
    res = await call(client, "audit", {"response": "Aspirin cures cancer in every patient.", "chunks": CHUNKS,
                                       "config": {"enforcement_mode": "enforce"}})
    assert res.is_error and "enforce mode" in res.content[0].text


@pytest.mark.parametrize(
    ("args", "field"),
    [
        ({"response": "A claim here.", "chunks": [{"source_url": "https://x.org"}]}, "chunks[0].content"),
        ({"response": "A claim here.", "chunks": [], "config": {"matcher": "magic"}}, "config.matcher"),
        ({"response": "A claim here.", "chunks": [], "as_of": "yesterday"}, "as_of"),
    ],
)
async def test_audit_bad_input(client: Client, args: dict[str, Any], field: str) -> None:
    res = await call(client, "audit", args)
    assert res.is_error and field in res.content[0].text


async def test_filter_sources_tool(client: Client) -> None:
    res = await call(client, "filter_sources", {"chunks": [*CHUNKS, {"content": "x"}], "config": CONFIG})
    assert not res.is_error
    out = res.structured_content
    assert [c["id"] for c in out["chunks"]] == ["c0"]
    assert [b["reason"] for b in out["blocked_source_details"]] == ["domain_not_allowlisted", "missing_source_url"]


@pytest.mark.model
async def test_semantic_real_model_sees_paraphrase(real_client: Client) -> None:
    """The warm model scores a paraphrase that shares almost no words as close; the lexical path does not."""
    chunks = [{"content": "Acetylsalicylic acid reduces a high body temperature by blocking cyclooxygenase.",
               "source_url": "https://who.int/x"},
              {"content": "The museum opened to the public in 1937.", "source_url": "https://who.int/y"}]
    res = await call(real_client, "audit", {"response": "Aspirin lowers fever by inhibiting COX enzymes.",
                                            "chunks": chunks, "config": {"matcher": "semantic"}})
    assert not res.is_error, res.content
    claim = res.structured_content["claims"][0]
    assert claim["features"]["sem_max"] > 0.4 > claim["features"]["cov1"]
    assert res.structured_content["matcher_model"]


async def test_audit_tool_reports_progress_while_it_embeds(client: Client) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    res = await client.call_tool("audit", {"response": "Aspirin lowers fever by inhibiting COX enzymes.",
                                           "chunks": CHUNKS}, progress_callback=on_progress)
    assert not res.is_error, res.content
    assert seen and seen[0][0] == 0 and "embedding model" in (seen[0][2] or "")
    assert seen[-1][0] == seen[-1][1] == 1 and "matching" in (seen[-1][2] or "")
