"""route / get_policy over MCP: contract, bad input, reload without restart, resources."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from mcp import Client

from bosun.core.embedding import HashEmbedder, Vectors
from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine
from bosun.server.services.policies import PolicyService

DEPLOY = "# Deploy\n\n**Agent-trigger:** deploying the service to production, rollback plans\n\nRULE-TEXT: canary first.\n"
MIGRATE = "# Migrations\n\n**Agent-trigger:** database schema migrations, dropping columns\n\nRULE-TEXT: expand then contract.\n"


class CountingEmbedder(HashEmbedder):
    """HashEmbedder that records every text it was asked to embed."""

    def __init__(self) -> None:
        super().__init__(64)
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.seen.extend(texts)
        return super().embed(texts)


async def test_route_returns_names_and_evidence_never_rule_text(real_client: Client) -> None:
    res = await real_client.call_tool("route", {"prompt": "roll back the production deploy of the billing service"})
    assert not res.is_error, res.content
    out = res.structured_content
    assert out is not None
    assert 1 <= len(out["hits"]) <= 2
    assert out["hits"][0]["name"] == "production-deploys"
    why = " ".join(out["hits"][0]["why"])
    assert "production" in why and "the" not in why.split(": ")[1].split(", ")
    assert "canary (5% of traffic" not in json.dumps(out)  # never rule text
    assert out["hits"][0]["requires"] == ["code-review"]  # **Requires:** travels with the name


async def test_get_policy_whole_document_once(client: Client) -> None:
    res = await client.call_tool("get_policy", {"name": "database-migrations"})
    assert not res.is_error
    text = res.structured_content["text"]  # type: ignore[index]
    assert text.count("**Agent-trigger:**") == 1
    assert "## Exceptions" in text  # the carve-out travels with the rule


async def test_unknown_policy_lists_closest_names(client: Client) -> None:
    res = await client.call_tool("get_policy", {"name": "database-migration"})
    assert res.is_error
    assert "database-migrations" in res.content[0].text  # type: ignore[union-attr]
    res = await client.call_tool("get_policy", {"name": "deploy-freeze-2024"})
    assert res.is_error and "inactive" in res.content[0].text  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("prompt", "needle"),
    [("", "empty"), ("   \n\t", "empty"), ("x" * 100_001, "limit"), ("bad \udc80 text", "UTF-8")],
)
async def test_bad_prompts_get_named_errors(client: Client, prompt: str, needle: str) -> None:
    res = await client.call_tool("route", {"prompt": prompt})
    assert res.is_error
    text = res.content[0].text  # type: ignore[union-attr]
    assert "prompt" in text and needle in text
    ok = await client.call_tool("route", {"prompt": "deploy to production"})
    assert not ok.is_error  # the daemon keeps serving


async def test_resources(client: Client) -> None:
    listing = await client.read_resource("bosun://policies")
    body = json.loads(listing.contents[0].text)  # type: ignore[union-attr]
    names = {p["name"] for p in body["policies"]}
    assert {"production-deploys", "release-notes", "python-style"} <= names
    assert "deploy-freeze-2024" not in names  # superseded
    assert body["demo_corpus"] is True
    doc = await client.read_resource("bosun://policy/secrets-handling")
    assert "Rotate" in doc.contents[0].text or "rotate" in doc.contents[0].text  # type: ignore[union-attr]


async def test_reload_on_file_change_reembeds_only_changed_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BOSUN_POLICY_POLL_S", "0.05")
    corpus = tmp_path / "policies"
    corpus.mkdir()
    (corpus / "deploy.md").write_text(DEPLOY)
    embedder = CountingEmbedder()
    engine = Engine(Config(home=tmp_path / "home", policies=[corpus]), embedder_factory=lambda _c: embedder)
    async with Client(create_server(engine)) as client:
        res = await client.call_tool("get_policy", {"name": "deploy"})
        assert not res.is_error
        svc: PolicyService = engine.policies
        for _ in range(200):  # the first build serves from whole surfaces, then embeds the rest
            if svc.index_state()["state"] == "ready":
                break
            await asyncio.sleep(0.02)
        gen = svc.served.generation  # type: ignore[union-attr]
        before = list(embedder.seen)
        (corpus / "migrate.md").write_text(MIGRATE)
        for _ in range(100):
            await asyncio.sleep(0.05)
            if svc.served is not None and svc.served.generation > gen:
                break
        assert svc.served is not None and svc.served.generation > gen
        fresh = embedder.seen[len(before):]
        assert fresh and all("deploy" not in t.lower() for t in fresh)  # unchanged document not re-embedded
        res = await client.call_tool("get_policy", {"name": "migrate"})
        assert not res.is_error
        # a duplicate name keeps the old index serving and reports the error
        (corpus / "sub").mkdir()
        (corpus / "sub" / "deploy.md").write_text(DEPLOY)
        for _ in range(100):
            await asyncio.sleep(0.05)
            if svc.error:
                break
        assert svc.error and "deploy.md" in svc.error and "sub" in svc.error
        res = await client.call_tool("route", {"prompt": "deploying the service to production"})
        assert not res.is_error
        assert any("reload failed" in n for n in res.structured_content.get("notices", []))  # type: ignore[union-attr]
        assert res.structured_content.get("degraded") is True  # type: ignore[union-attr]


async def test_repeated_prompt_is_served_from_cache(engine: Engine) -> None:
    async with Client(create_server(engine)) as client:
        await client.call_tool("route", {"prompt": "deploy to production"})
        svc: PolicyService = engine.policies
        first = await svc.route("what is the rollback plan for the deploy")
        again = await svc.route("what is the rollback plan for the deploy")
        assert first["cached"] is False and again["cached"] is True
        assert again["hits"] == first["hits"]


async def test_missing_corpus_directory_warns_and_serves(tmp_path: Path) -> None:
    engine = Engine(Config(home=tmp_path / "h", policies=[tmp_path / "nope"]),
                    embedder_factory=lambda _c: HashEmbedder(64))
    async with Client(create_server(engine)) as client:
        res = await client.call_tool("route", {"prompt": "deploy"})
        assert not res.is_error
        assert res.structured_content["hits"] == []  # type: ignore[index]
        listing = json.loads((await client.read_resource("bosun://policies")).contents[0].text)  # type: ignore[union-attr]
        assert any("nope does not exist" in w for w in listing["warnings"])


async def test_model_failure_is_a_named_error_and_a_telemetry_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events = tmp_path / "events.jsonl"
    monkeypatch.setenv("BOSUN_TELEMETRY_PATH", str(events))

    def broken(_c: Config) -> HashEmbedder:
        raise RuntimeError("weights missing")

    engine = Engine(Config(home=tmp_path / "h", policies=[]), embedder_factory=broken)
    async with Client(create_server(engine)) as client:
        res = await client.call_tool("route", {"prompt": "deploy to production"})
        assert res.is_error and "weights missing" in res.content[0].text  # type: ignore[union-attr]
    # the route event (a generic "tool" event for the same call may follow it)
    last = [e for e in map(json.loads, events.read_text().splitlines()) if e.get("event") == "route"][-1]
    assert (last["outcome"], last["failure_class"]) == ("failed", "model")


async def test_divergence_notice_comes_back_from_the_tool(tmp_path: Path) -> None:
    corpus = tmp_path / "tiny"
    corpus.mkdir()
    (corpus / "deploy.md").write_text(DEPLOY)
    engine = Engine(Config(home=tmp_path / "h", policies=[corpus]), embedder_factory=lambda _c: HashEmbedder(64))
    async with Client(create_server(engine)) as client:
        out = (await client.call_tool("route", {"prompt": "deploy to production"})).structured_content
        assert out is not None
        notice = " ".join(out["notices"])
        # self-calibrated (the default): the corpus's size is fitted, the model the weights came from is not
        assert "far from its calibration" in notice and "hash-bow-64" in notice and "1 documents" not in notice
        assert "self-calibrated on this corpus: threshold" in notice


class GatedEmbedder(HashEmbedder):
    """Lets ``free`` multi-text batches through, then holds each one until the test releases it."""

    def __init__(self, free: int) -> None:
        super().__init__(64)
        self.gate = threading.Semaphore(free)

    def embed(self, texts: Sequence[str]) -> Vectors:
        if len(texts) > 1:
            self.gate.acquire()
        return super().embed(texts)


async def test_a_route_waiting_for_the_bodies_reports_progress_then_answers_on_the_full_index(tmp_path: Path) -> None:
    corpus = tmp_path / "policies"
    corpus.mkdir()
    (corpus / "deploy.md").write_text(DEPLOY)
    (corpus / "migrate.md").write_text(MIGRATE)
    embedder = GatedEmbedder(free=6)  # the 133 background prompts in 5 batches, then the surfaces
    engine = Engine(Config(home=tmp_path / "home", policies=[corpus]), embedder_factory=lambda _c: embedder)
    seen: list[str | None] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append(message)

    try:
        async with Client(create_server(engine)) as client:
            engine.policies.complete_wait_s = 600  # only the full index may answer: the bodies come when released
            for _ in range(3000):  # the first index, from surfaces only, is serving
                if engine.policies.served is not None:
                    break
                await asyncio.sleep(0.01)
            assert engine.policies.served is not None and not engine.policies.served.complete
            call = asyncio.ensure_future(client.call_tool(
                "route", {"prompt": "deploying the service to production"}, progress_callback=on_progress))
            for _ in range(3000):
                if seen or call.done():
                    break
                await asyncio.sleep(0.01)
            assert seen and not call.done()  # waiting, and saying so
            for _ in range(50):
                embedder.gate.release()
            res = await call
            assert not res.is_error
            out = res.structured_content or {}
            assert not any(n.startswith("index building") for n in out.get("notices", []))
            assert "route index" in (seen[0] or "")
    finally:
        for _ in range(50):
            embedder.gate.release()
