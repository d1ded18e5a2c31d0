"""Memory scopes (issue 19 item 2): project / agent / global memory shared across tasks, bounded, with provenance."""

from __future__ import annotations

from typing import Any

from mcp import Client

from bosun.core.task.memory import SHARED_MEMORY_TOKENS, select_shared
from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine


def _sc(result: Any) -> dict[str, Any]:
    assert not result.is_error, result.content[0].text
    assert result.structured_content is not None
    return result.structured_content


async def _start(client: Client, agent: str = "alice", **more: Any) -> dict[str, Any]:
    args: dict[str, Any] = {"mode": "start", "objective": "work", "agent": agent}
    if more:
        args["more"] = more
    return _sc(await client.call_tool("plan", args))


async def _remember(client: Client, task_id: str, scope: str, key: str, text: str, agent: str = "alice") -> None:
    _sc(await client.call_tool("plan", {"mode": "update", "task_id": task_id, "agent": agent,
                                        "more": {"memory": [{"scope": scope, "key": key, "text": text}]}}))


async def test_project_memory_recorded_in_one_task_appears_in_the_next_with_provenance(client: Client) -> None:
    first = await _start(client, project="github.com/acme/api")
    await _remember(client, first["task_id"], "project", "db", "migrations run with alembic, never by hand")
    await _remember(client, first["task_id"], "task", "scratch", "only for this task")
    nxt = await _start(client, agent="bob", project="github.com/acme/api")
    shared = nxt["shared_memory"]
    assert [(m["scope"], m["key"], m["text"]) for m in shared["items"]] == [
        ("project", "db", "migrations run with alembic, never by hand")]
    assert shared["items"][0]["by"] == {"task": first["task_id"], "agent": "alice"}
    other = await _start(client, project="github.com/acme/web")
    assert "shared_memory" not in other  # another project sees nothing
    resumed = _sc(await client.call_tool("plan", {"mode": "resume", "task_id": nxt["task_id"]}))
    assert resumed["resume"]["shared_memory"]["items"][0]["key"] == "db"


async def test_agent_memory_follows_the_agent_and_global_memory_reaches_everyone(client: Client) -> None:
    a = await _start(client, agent="alice")
    await _remember(client, a["task_id"], "agent", "style", "alice prefers small commits")
    await _remember(client, a["task_id"], "global", "tz", "all times are UTC")
    again = await _start(client, agent="alice", project="elsewhere")
    assert {m["key"] for m in again["shared_memory"]["items"]} == {"style", "tz"}
    bob = await _start(client, agent="bob")
    assert {m["key"] for m in bob["shared_memory"]["items"]} == {"tz"}
    # the default project (BOSUN_PROJECT) is shared by tasks that name none
    await _remember(client, bob["task_id"], "project", "ci", "CI runs on every push", agent="bob")
    assert "ci" in {m["key"] for m in (await _start(client, agent="carol"))["shared_memory"]["items"]}


async def test_a_rewrite_of_a_key_replaces_the_item(client: Client) -> None:
    a = await _start(client)
    await _remember(client, a["task_id"], "project", "python", "3.11")
    await _remember(client, a["task_id"], "project", "python", "3.12 since the upgrade")
    items = (await _start(client))["shared_memory"]["items"]
    assert [(m["key"], m["text"]) for m in items] == [("python", "3.12 since the upgrade")]


async def test_what_a_task_is_shown_is_bounded_newest_first() -> None:
    items = [{"scope": "project", "key": f"k{i}", "text": "a fact worth remembering " * 4} for i in range(60)]
    shown = select_shared([items, [{"scope": "global", "key": "g", "text": "global fact"}]])
    assert shown["tokens"] <= SHARED_MEMORY_TOKENS and shown["omitted"] > 0
    assert shown["items"][0]["key"] == "k59"  # newest first, most specific scope first
    assert len(shown["items"]) + shown["omitted"] == 61


async def test_shared_memory_survives_a_restart_and_its_journal_is_not_writable_as_a_task(
        config: Config) -> None:
    from bosun.core.embedding import HashEmbedder

    def engine() -> Engine:
        return Engine(config, embedder_factory=lambda _c: HashEmbedder(64))

    async with Client(create_server(engine())) as client:
        a = await _start(client)
        await _remember(client, a["task_id"], "project", "owner", "team platform")
    async with Client(create_server(engine())) as client:
        items = (await _start(client))["shared_memory"]["items"]
        assert items[0]["text"] == "team platform"
        res = await client.call_tool("plan", {"mode": "update", "task_id": "scope:project:default",
                                              "decisions": ["x"]})
        assert res.is_error and "shared-memory journal" in res.content[0].text


async def test_agent_scope_needs_an_agent_name(client: Client) -> None:
    a = _sc(await client.call_tool("plan", {"mode": "start", "objective": "o"}))
    res = await client.call_tool("plan", {"mode": "update", "task_id": a["task_id"],
                                          "more": {"memory": [{"scope": "agent", "key": "k", "text": "v"}]}})
    assert res.is_error and "agent" in res.content[0].text


async def test_a_secret_in_a_project_or_agent_name_never_becomes_a_journal_id(client: Client, engine: Engine) -> None:
    token = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
    a = await _start(client, agent=f"bot-{token}", project=f"acme-{token}")
    await _remember(client, a["task_id"], "project", "k", "v", agent=f"bot-{token}")
    await _remember(client, a["task_id"], "agent", "k2", "v2", agent=f"bot-{token}")
    ids = [t["task_id"] for t in await engine.tasks.list_tasks(limit=100)]
    assert any(i.startswith("scope:project:") for i in ids) and any(i.startswith("scope:agent:") for i in ids)
    assert not any(token in i for i in ids)
    again = await _start(client, agent=f"bot-{token}", project=f"acme-{token}")
    assert {m["key"] for m in again["shared_memory"]["items"]} == {"k", "k2"}
