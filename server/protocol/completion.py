"""``completion/complete``: what a harness can offer while a person types a prompt argument or a
resource URI: task ids, policy names and stored-ref prefixes.

The argument decides the source, whichever prompt or template asks: ``task_id`` completes from
the tasks (most recent first), ``name`` of ``bosun://policy/{name}`` from the served policy
corpus, ``sha256`` of ``bosun://ref/{sha256}`` from the stored payloads. Matching is by prefix
(case-insensitive for names), at most ``MAX_VALUES`` values (the spec's cap), with ``total``
and ``hasMore`` telling the client there is more. A reference bosun does not serve completes to
nothing (the SDK's convention, and what the conformance suite expects of an unknown prompt).
Everything is read-only: the task and policy services, and one prefix scan of the stored refs
through the store's ref index (the same range scan short refs resolve with, on either backend).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server import MCPServer
from mcp.types import (
    Completion,
    CompletionArgument,
    CompletionContext,
    PromptReference,
    ResourceTemplateReference,
)

from bosun.core.errors import BosunError

log = logging.getLogger("bosun.server")

MAX_VALUES = 100  # the spec's cap on completion values per answer
TASK_SCAN = 1000  # most recent tasks considered for a task id prefix
HEX = re.compile(r"[0-9a-f]*")

Source = Callable[[Any, str], Awaitable[list[str]]]


async def task_ids(engine: Any, prefix: str) -> list[str]:
    tasks = await engine.tasks.list_tasks(limit=TASK_SCAN)
    return [t["task_id"] for t in tasks if t["task_id"].startswith(prefix)]


async def policy_names(engine: Any, prefix: str) -> list[str]:
    served = await engine.policies.ready()
    wanted = prefix.lower()
    return sorted(p.name for p in served.index.policies if p.name.lower().startswith(wanted))


async def ref_prefixes(engine: Any, prefix: str) -> list[str]:
    """Stored digests starting with ``prefix`` (a ``mem://sha256:`` or ``sha256:`` head is ignored)."""
    hexpart = prefix.lower().removeprefix("mem://").removeprefix("sha256:")
    if not HEX.fullmatch(hexpart):
        return []
    return list(await engine.store_set.ref_index.complete(hexpart, MAX_VALUES + 1))


def source_for(ref: PromptReference | ResourceTemplateReference, argument: str) -> Source | None:
    """Where the values of ``argument`` of ``ref`` come from; None for what bosun does not complete."""
    if argument == "task_id":
        return task_ids
    if isinstance(ref, ResourceTemplateReference):
        if ref.uri == "bosun://policy/{name}" and argument == "name":
            return policy_names
        if ref.uri == "bosun://ref/{sha256}" and argument == "sha256":
            return ref_prefixes
    return None


async def complete(engine: Any, ref: PromptReference | ResourceTemplateReference, argument: CompletionArgument,
                   context: CompletionContext | None = None) -> Completion:
    source = source_for(ref, argument.name)
    if source is None:
        return Completion(values=[])
    try:
        values = await source(engine, argument.value)
    except BosunError as exc:  # a corpus that failed to load, a store that is closing: nothing to offer
        log.info("completion of %s found nothing: %s", argument.name, exc)
        return Completion(values=[])
    return Completion(values=values[:MAX_VALUES], total=len(values), has_more=len(values) > MAX_VALUES)


def register(mcp: MCPServer[Any], engine: Any) -> None:
    @mcp.completion()
    async def bosun_completion(ref: Any, argument: CompletionArgument, context: CompletionContext | None) -> Completion:
        return await complete(engine, ref, argument, context)
