"""Memory scopes: what one task records for the project, the agent or everyone, and what the next task sees.

OSIRIS keeps memory at four scopes: ``task`` -> ``project`` -> ``agent`` -> ``global``. A task's
own memory lives in its journal. Shared memory lives in the journal of a reserved pseudo-task per
scope (``scope:project:<id>``, ``scope:agent:<name>``, ``scope:global``), folded by the same
reducer, so it is durable, append-only and replayable like any task, with provenance (the task
and agent that recorded each item, and when). A later write to the same key replaces the item.

What a task is shown is bounded: the newest items, most specific scope first, until
``SHARED_MEMORY_TOKENS`` (about two manifests) are spent; the rest is counted as omitted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from bosun.core.errors import InvalidInput
from bosun.core.tokens import estimate_tokens

SHARED_SCOPES = ("project", "agent", "global")
SCOPE_PREFIX = "scope:"
SHARED_MEMORY_TOKENS = 240  # what a task start / resume shows of shared memory at most
DEFAULT_PROJECT = "default"
_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,127}$")


def check_project(value: Any, field: str = "project") -> str:
    """A project id: what the harness names the repository or workspace by (BOSUN_PROJECT, or per task)."""
    if not isinstance(value, str) or not _ID.match(value.strip()):
        raise InvalidInput(field, f"not a project id: {str(value)[:80]!r}",
                           "letters, digits and _ . : / @ + - (max 128), e.g. 'github.com/acme/api'")
    return value.strip()


def scope_id(scope: str, project: str, agent: str | None) -> str:
    """The reserved journal id that holds one scope's shared memory."""
    if scope == "project":
        return f"{SCOPE_PREFIX}project:{project}"
    if scope == "agent":
        if not agent:
            raise InvalidInput("agent", "is required to record agent-scoped memory", "your agent name")
        return f"{SCOPE_PREFIX}agent:{agent}"
    if scope == "global":
        return f"{SCOPE_PREFIX}global"
    raise InvalidInput("scope", f"not a shared scope {scope!r}", ", ".join(SHARED_SCOPES))


def is_scope_id(task_id: str) -> bool:
    return task_id.startswith(SCOPE_PREFIX)


def visible_scopes(project: str, agents: Iterable[str]) -> list[tuple[str, str]]:
    """(scope, journal id) a task sees, most specific first: its project, its agents, global."""
    out = [("project", scope_id("project", project, None))]
    out += [("agent", scope_id("agent", project, a)) for a in dict.fromkeys(a for a in agents if a)]
    out.append(("global", scope_id("global", project, None)))
    return out


def item_tokens(item: Mapping[str, Any]) -> int:
    return estimate_tokens(f"{item.get('scope')}:{item.get('key')} {item.get('text')}") + 4


def select_shared(by_scope: Sequence[Sequence[Mapping[str, Any]]], max_tokens: int = SHARED_MEMORY_TOKENS) -> dict[str, Any]:
    """The items shown to a task: per scope (most specific first) newest first, within ``max_tokens``.

    ``by_scope`` lists each visible scope's items oldest first (journal order). Items are shown
    whole or not at all; a key shadowed by a more specific scope is shown once (the specific one).
    """
    shown: list[dict[str, Any]] = []
    seen_keys: set[str] = set()
    tokens = omitted = 0
    for items in by_scope:
        for item in reversed(items):
            key = str(item.get("key"))
            if key in seen_keys:
                continue
            cost = item_tokens(item)
            if tokens + cost > max_tokens:
                omitted += 1
                continue
            seen_keys.add(key)
            tokens += cost
            shown.append({"scope": item.get("scope"), "key": key, "text": item.get("text"),
                          "by": {"task": item.get("task_id"), "agent": item.get("agent")}, "at": item.get("at")})
    return {"items": shown, "tokens": tokens, "omitted": omitted}
