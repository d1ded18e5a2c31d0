"""Tool Compass: a caller's tool list ranked for a prompt with the route machinery (services/compass.py)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import pytest
from mcp import Client

from bosun.core.embedding import HashEmbedder, Vectors
from bosun.core.errors import InvalidInput
from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine
from bosun.server.services.compass import CompassService, parse_tools

TOOLS: list[dict[str, Any]] = [
    {"name": "get_weather", "description": "Current weather and the forecast for a city: temperature, rain, wind."},
    {"name": "run_sql", "description": "Run a read-only SQL query against the analytics database and return rows."},
    {"name": "send_email", "description": "Send an email message to a recipient with a subject and body."},
    {"name": "translate_text", "description": "Translate text between languages, e.g. English to French."},
    {"name": "create_calendar_event", "description": "Create a calendar event with a title, start time and attendees."},
    {"name": "search_flights", "description": "Search airline flights between two airports on a date, with prices."},
]


class CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__(64)
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(list(texts))
        return super().embed(texts)


def test_parse_tools_names_the_bad_field() -> None:
    with pytest.raises(InvalidInput, match=r"tools\[1\]\.description"):
        parse_tools([TOOLS[0], {"name": "x"}])
    with pytest.raises(InvalidInput, match=r"tools\[1\]\.name.*duplicate"):
        parse_tools([TOOLS[0], TOOLS[0]])
    with pytest.raises(InvalidInput, match=r"tools\[0\].*unknown keys"):
        parse_tools([{"name": "a", "description": "b", "colour": "red"}])
    with pytest.raises(InvalidInput, match="tools"):
        parse_tools("get_weather")
    with pytest.raises(InvalidInput, match="empty"):
        parse_tools([])
    # an MCP tools/list item is accepted as it is (the schema is ignored)
    assert parse_tools([{"name": "a", "description": "b", "inputSchema": {"type": "object"}}])[0].name == "a"


async def test_index_is_built_once_per_tool_list(config: Config) -> None:
    emb = CountingEmbedder()
    engine = Engine(config, embedder_factory=lambda _c: emb)
    await engine.open(watch_policies=False)
    try:
        compass = engine.compass
        assert engine.compass is compass
        await compass.rank("will it rain in Paris tomorrow", TOOLS)
        embedded = sum(len(c) for c in emb.calls)
        assert embedded > len(TOOLS)  # descriptions (and background prompts) were embedded
        await compass.rank("send a note to Ana about the budget", TOOLS)
        # the same list again: only the new prompt is embedded, the index is reused
        assert sum(len(c) for c in emb.calls) - embedded <= 1
        other = await compass.rank("will it rain in Paris tomorrow", TOOLS[:3])
        assert other["tools"] == 3
    finally:
        await engine.close()


async def test_progress_is_reported_while_a_new_list_is_indexed(config: Config) -> None:
    engine = Engine(config, embedder_factory=lambda _c: HashEmbedder(64))
    await engine.open(watch_policies=False)
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total, message))

    try:
        await CompassService(engine).rank("forecast for Oslo", TOOLS, progress=progress)
    finally:
        await engine.close()
    assert seen and all("tool compass" in (m or "") for _, _, m in seen)
    assert seen[0][0] == 0.0 and (seen[0][1] or 0) > 0


async def test_route_tool_with_tools_runs_the_compass(client: Client) -> None:
    res = await client.call_tool("route", {"prompt": "translate this paragraph into French", "tools": TOOLS})
    assert not res.is_error, res.content
    out = res.structured_content
    assert out is not None and out["tools"] == len(TOOLS)
    assert set(out) >= {"hits", "abstained", "tools"}
    assert all(h["name"] in {t["name"] for t in TOOLS} for h in out["hits"])
    bad = await client.call_tool("route", {"prompt": "x", "tools": [{"name": "a"}]})
    assert bad.is_error and "tools[0].description" in bad.content[0].text  # type: ignore[union-attr]


@pytest.mark.model
async def test_compass_never_recommends_the_wrong_tool_first(real_engine: Engine) -> None:
    await real_engine.open(watch_policies=False)
    try:
        compass = real_engine.compass
        for prompt, want in [
            ("what's the weather going to be like in Lisbon this weekend?", "get_weather"),
            ("book me a flight from Boston to Denver next Friday", "search_flights"),
            ("how many orders did we get last month per region? query the database", "run_sql"),
        ]:
            out = await compass.rank(prompt, TOOLS)
            # the decision may abstain (route's self-calibration; bench/compass_eval.py measures how often),
            # but a recommendation must be the tool that fits
            assert not out["hits"] or out["hits"][0]["name"] == want, (prompt, out)
            assert out["abstained"] == (not out["hits"])
    finally:
        await real_engine.close()


@pytest.mark.model
async def test_route_tool_reports_progress_to_a_listening_client(real_engine: Engine) -> None:
    got: list[float] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        got.append(progress)

    async with Client(create_server(real_engine)) as c:
        res = await c.call_tool("route", {"prompt": "forecast for Rome", "tools": TOOLS}, progress_callback=on_progress)
    assert not res.is_error
    assert got  # a new tool list is indexed while the client listens


class GatedEmbedder(HashEmbedder):
    """Embeds only once the gate opens (or after 10 s): the index cannot finish before the test says so."""

    def __init__(self) -> None:
        super().__init__(64)
        self.gate = threading.Event()

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.gate.wait(timeout=10)
        return super().embed(texts)


async def test_first_route_reports_index_progress_to_a_listening_client(config: Config,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from bosun.server.tools import route as route_tool

    monkeypatch.setattr(route_tool, "PROGRESS_EVERY_S", 0.01)
    emb = GatedEmbedder()
    engine = Engine(config, embedder_factory=lambda _c: emb)
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")
        emb.gate.set()  # the index may build now that the client has heard it is building

    async with Client(create_server(engine)) as c:
        res = await c.call_tool("route", {"prompt": "roll back the deploy"}, progress_callback=on_progress)
    assert not res.is_error
    assert messages and messages[0].startswith("route index")


async def test_a_multi_intent_request_embeds_its_clauses_in_the_same_call(config: Config) -> None:
    emb = CountingEmbedder()
    engine = Engine(config, embedder_factory=lambda _c: emb)
    await engine.open(watch_policies=False)
    try:
        compass = engine.compass
        await compass.rank("warm up", TOOLS)
        emb.calls.clear()
        prompt = "search flights from Boston to Denver, then check the weather forecast in Denver"
        await compass.rank(prompt, TOOLS)
        assert emb.calls[-1][0] == prompt and len(emb.calls[-1]) == 3  # the prompt and its two clauses, one call
    finally:
        await engine.close()


def test_the_compass_decides_at_its_own_levels_without_the_everyday_gap() -> None:
    """A tool list serves everyday requests: reading like one is no reason to recommend nothing."""
    import numpy as np

    from bosun.core.routing.abstain import SHIPPED, admissible
    from bosun.core.routing.calibrate import ROUTE_LEVELS
    from bosun.core.routing.route import build_index_with
    from bosun.server.services.compass import COMPASS_LEVELS, ToolDoc, decide

    assert not COMPASS_LEVELS.everyday_gap and ROUTE_LEVELS.everyday_gap
    one_word = {"multi": 0.0, "mention": 0.0, "pair": 0.0, "bg_z": 5.0, "bg_gap": -0.05}
    assert not admissible(SHIPPED, one_word, 0.9, 0.5, 3.0)  # route: closer to an everyday request
    assert admissible(SHIPPED, one_word, 0.9, 0.5, 3.0, everyday_gap=False)
    emb = HashEmbedder(64)
    index = build_index_with([ToolDoc(t["name"], t["description"]).as_policy() for t in TOOLS], emb)
    assert index.calibration is not None
    prompt = "Search airline flights between two airports on a date"
    qvec = emb.embed([prompt])[0]
    loose = decide(index, prompt, qvec, levels=dataclasses_replace(COMPASS_LEVELS, threshold=0.0, gate=0.0))
    assert loose.hits and loose.hits[0].name == "search_flights"
    at = index.calibration.at(COMPASS_LEVELS)  # the list's own null, read at the compass's levels
    assert at.solo_bg_z >= index.calibration.solo_bg_z and at.levels == COMPASS_LEVELS
    assert index.calibration.levels == ROUTE_LEVELS  # the index's own calibration is left as it was
    assert np.isfinite(loose.hits[0].score)


def dataclasses_replace(obj: Any, **changes: Any) -> Any:
    import dataclasses

    return dataclasses.replace(obj, **changes)
