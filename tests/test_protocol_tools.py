"""The tool list: its token budget (bench/tool_tokens.py's measure), annotations, the docs resource, dispatch mode
and progress."""

from __future__ import annotations

import importlib.util
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from bosun.core.tokens import estimate_tokens
from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine
from bosun.server.protocol.progress import ProgressReporter

TOOL_TOKENS = Path(__file__).resolve().parents[1] / "bench" / "tool_tokens.py"
LIST_BUDGET = 1500  # issue 16: every listed tool, as tools/list sends it, in cl100k tokens (estimated)
DISPATCH_BUDGET = 400


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("tool_tokens", TOOL_TOKENS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dispatch_engine(config: Config) -> Engine:
    from bosun.core.embedding import HashEmbedder

    config.tools = ["dispatch"]
    return Engine(config, embedder_factory=lambda _c: HashEmbedder(64))


def test_the_whole_tool_list_fits_its_token_budget() -> None:
    costs = _bench().tool_costs()
    assert sum(costs.values()) <= LIST_BUDGET, f"tools/list costs {sum(costs.values())} tokens: {costs}"


def test_dispatch_mode_lists_one_tool_within_its_budget() -> None:
    costs = _bench().tool_costs(["dispatch"])
    assert list(costs) == ["bosun"] and costs["bosun"] <= DISPATCH_BUDGET, costs


async def test_the_bench_measures_what_the_server_lists(client: Client) -> None:
    listed = {t.name: t for t in (await client.list_tools()).tools}
    for item in _bench().listed_tools():
        sent = listed[item["name"]].model_dump(by_alias=True, exclude_none=True, mode="json")
        measured = estimate_tokens(json.dumps({k: sent[k] for k in item}, separators=(",", ":")))
        assert measured == estimate_tokens(json.dumps(item, separators=(",", ":"))), item["name"]


async def test_annotations_say_what_each_tool_does_to_state(client: Client) -> None:
    tools = {t.name: t.annotations for t in (await client.list_tools()).tools}
    for name, ann in tools.items():
        assert ann is not None, name
        if ann.read_only_hint:
            assert name in {"route", "get_policy", "precheck", "select_context", "audit", "filter_sources"}, name
        else:  # writes journal entries, never deletes: not destructive
            assert ann.destructive_hint is False, name


async def test_the_docs_resource_has_a_section_per_tool_with_what_the_listing_left_out(client: Client) -> None:
    text = (await client.read_resource("bosun://docs/tools")).contents[0].text  # type: ignore[union-attr]
    for t in (await client.list_tools()).tools:
        assert f"## {t.name}\n\n{t.description}" in text, t.name
    recall = text.split("## recall", 1)[1].split("\n## ", 1)[0]
    # what the listing drops: bounds, defaults said in words, examples
    assert "`context` (integer >= 0 <= 50, default 0)" in recall and "(default 40)" in recall and 'op="grep"' in recall


async def test_dispatch_routes_to_the_same_tools_with_the_same_checks(config: Config) -> None:
    async with Client(create_server(_dispatch_engine(config))) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["bosun"]
        started = await client.call_tool("bosun", {"tool": "plan", "args": {"mode": "start", "objective": "x",
                                                                             "steps": ["a"]}})
        assert not started.is_error, started.content
        assert str(started.structured_content["task_id"]).startswith("t_")  # type: ignore[index]
        typo = await client.call_tool("bosun", {"tool": "recall", "args": {"ref": "mem://sha256:" + "0" * 64,
                                                                            "patern": "x"}})
        assert typo.is_error and "did you mean 'pattern'" in typo.content[0].text  # type: ignore[union-attr]
        missing = await client.call_tool("bosun", {"tool": "recall", "args": {"ref": "mem://sha256:" + "0" * 64}})
        assert missing.is_error and "Error executing tool" not in missing.content[0].text  # type: ignore[union-attr]
        unknown = await client.call_tool("bosun", {"tool": "nope"})
        assert unknown.is_error and "recall" in unknown.content[0].text  # type: ignore[union-attr]
        docs = await client.call_tool("bosun", {"tool": "docs", "args": {"tool": "handoff"}})
        assert docs.content[0].text.startswith("## handoff") and "is_ref" in docs.content[0].text  # type: ignore[union-attr]


async def test_audit_reports_progress_when_asked(client: Client) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    result = await client.call_tool("audit", {"response": "Aspirin lowers fever.", "chunks": [
        {"content": "Aspirin lowers fever by inhibiting COX enzymes.", "source_url": "https://example.org/a"}]},
        progress_callback=on_progress)
    assert not result.is_error, result.content
    assert seen, "no progress notification"
    values = [p for p, _, _ in seen]
    assert values == sorted(values) and len(set(values)) == len(values)  # strictly increasing


@pytest.mark.parametrize("reports", [[0.0, 0.0, 0.5, 0.5, 1.0], [3, 1, 2]])
async def test_reported_progress_always_increases_and_stays_within_its_total(reports: list[float]) -> None:
    sent: list[tuple[float, float | None]] = []

    async def send(progress: float, total: float | None, message: str | None) -> None:
        sent.append((progress, total))

    reporter = ProgressReporter(send)
    for value in reports:
        await reporter(value, 3.0, "step")
    values = [p for p, _ in sent]
    assert all(a < b for a, b in itertools.pairwise(values))
    assert all(total is None or p <= total for p, total in sent)
