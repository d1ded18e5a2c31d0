"""Subscriptions: a task write announces its manifest to subscribers; a new policy generation announces
resources/list_changed; 2025 sessions (resources/subscribe) and 2026 listen streams alike."""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.subscriptions import ResourcesListChanged, ResourceUpdated
from mcp.types import ResourceListChangedNotification, ResourceUpdatedNotification

from bosun.server.app import create_server
from bosun.server.engine import Engine

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")


class Notices:
    """A message handler that keeps the server's notifications in arrival order."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.changed = anyio.Event()

    async def __call__(self, message: Any) -> None:
        self.seen.append(getattr(message, "root", message))
        self.changed.set()
        self.changed = anyio.Event()

    def updated(self) -> list[str]:
        return [str(n.params.uri) for n in self.seen if isinstance(n, ResourceUpdatedNotification)]

    async def wait(self, done: Any) -> None:
        with anyio.fail_after(10):
            while not done():
                await self.changed.wait()


async def _start(client: Client, objective: str) -> str:
    started = await client.call_tool("plan", {"mode": "start", "objective": objective, "steps": ["a", "b"]})
    assert not started.is_error, started.content
    return str(started.structured_content["task_id"])  # type: ignore[index]


async def test_another_agents_update_notifies_the_subscriber_and_unsubscribe_stops_it(engine: Engine) -> None:
    mcp = create_server(engine)
    notices = Notices()
    async with Client(mcp, mode="legacy", message_handler=notices) as watcher, Client(mcp, mode="legacy") as agent:
        first, second = await _start(agent, "first task"), await _start(agent, "second task")
        for task in (first, second):
            await watcher.subscribe_resource(f"bosun://task/{task}/manifest")
        await watcher.unsubscribe_resource(f"bosun://task/{first}/manifest")
        for task in (first, second):  # another connection writes both tasks, in this order
            result = await agent.call_tool("plan", {"mode": "update", "task_id": task, "decisions": ["use blue-green"]})
            assert not result.is_error, result.content
        await notices.wait(lambda: f"bosun://task/{second}/manifest" in notices.updated())
    # the first task's notice would have been sent before the second's: it never was
    assert notices.updated() == [f"bosun://task/{second}/manifest"]


async def test_a_2026_listen_stream_gets_the_manifest_update(engine: Engine) -> None:
    mcp = create_server(engine)
    async with Client(mcp, mode="auto") as watcher, Client(mcp, mode="auto") as agent:
        task = await _start(agent, "watched task")
        uri = f"bosun://task/{task}/manifest"
        async with watcher.listen(resource_subscriptions=[uri]) as events:
            result = await agent.call_tool("plan", {"mode": "update", "task_id": task, "decisions": ["canary first"]})
            assert not result.is_error, result.content
            with anyio.fail_after(10):
                async for event in events:
                    assert isinstance(event, ResourceUpdated) and event.uri == uri
                    break


async def test_a_new_policy_generation_announces_list_changed(engine: Engine) -> None:
    mcp = create_server(engine)
    notices = Notices()
    async with Client(mcp, mode="legacy", message_handler=notices) as legacy, Client(mcp, mode="auto") as modern:
        assert legacy.server_capabilities.resources.list_changed is True  # type: ignore[union-attr]
        await engine.policies.ready()
        async with modern.listen(resources_list_changed=True) as events:
            await engine.policies.reload()  # a new generation serves: the corpus changed
            with anyio.fail_after(10):
                async for event in events:
                    assert isinstance(event, ResourcesListChanged)
                    break
        await notices.wait(lambda: any(isinstance(n, ResourceListChangedNotification) for n in notices.seen))


async def test_subscribing_to_a_uri_bosun_never_changes_is_accepted(client: Client) -> None:
    if client.protocol_version == "2026-07-28":
        pytest.skip("resources/subscribe is a 2025 method; 2026 clients listen")
    assert (await client.subscribe_resource("test://watched-resource")).model_dump(exclude_none=True) == {}
    assert (await client.unsubscribe_resource("test://watched-resource")).model_dump(exclude_none=True) == {}
