"""Compaction plans: which observed results may leave the prompt now, reversibly.

A plan never deletes anything. Every item already lives in the ref store
(observe stores every result, passed through or not), so a plan only lists
what the agent may evict from its prompt, the one-line digest to carry instead,
and the recall call that brings each item back. The agent applies a plan by
evicting the items and sending drop receipts (observe kind="dropped"), which is
when the savings are credited.

- ``compact``: every eligible item, replaced by one digest line each.
- ``trim``: the largest eligible items first, until ``target_tokens`` are freed.
- ``clear``: everything rehydratable, whatever the mode (the agent keeps the manifest and the digest).

Eligibility follows the pruning mode (see core/offload/offload.py); the newest
``keep_recent`` results always stay (except for ``clear``). Items in the working
zone (after the last checkpoint snapshot) never sit in a cached prefix; older
ones do while the prompt cache is alive, and evicting them costs a re-fill of
the tokens after them, reported as ``refill_tokens``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from bosun.core.errors import InvalidInput
from bosun.core.offload.offload import PruneMode

PLAN_MODES = ("compact", "trim", "clear")
DIGEST_LINE_CHARS = 120


@dataclass
class Item:
    """One observed result the agent may be carrying."""

    seq: int
    kind: str  # tool_result | tool_failure | file_read
    label: str  # tool and short args
    ref: str
    tokens: int
    carried: int  # tokens the agent carries for it now (the result, or its stub)
    created_at: float
    dropped: bool = False


@dataclass
class Plan:
    mode: str
    items: list[Item] = field(default_factory=list)
    freed_tokens: int = 0
    digest_tokens: int = 0
    refill_tokens: int = 0
    cache_alive: bool = True
    scope: str = ""
    kept: int = 0

    @property
    def net_tokens(self) -> int:
        return self.freed_tokens - self.digest_tokens - self.refill_tokens

    def to_dict(self, max_items: int = 50) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "scope": self.scope,
            "cache_alive": self.cache_alive,
            "items": len(self.items),
            "kept": self.kept,
            "freed_tokens": self.freed_tokens,
            "digest_tokens": self.digest_tokens,
            "refill_tokens": self.refill_tokens,
            "net_tokens": self.net_tokens,
            "digest": [digest_line(i) for i in self.items[:max_items]],
            "drop": [i.ref for i in self.items],
            "restore": "recall(ref, op='raw'|'range'|'grep') brings any item back; nothing was deleted",
        }


def digest_line(item: Item) -> str:
    ref = item.ref.rsplit(":", 1)[-1][:16]
    line = f"#{item.seq} {item.label} -> mem://sha256:{ref} ({item.tokens} tok)"
    return line if len(line) <= DIGEST_LINE_CHARS else line[: DIGEST_LINE_CHARS - 1] + "…"


ITEM_KINDS = frozenset({"tool_result", "tool_failure", "file_read", "dropped", "checkpoint_saved"})
ITEM_KEYS = ("ref", "stored_ref", "tokens", "stub_tokens", "offloaded", "response_tokens", "path", "tool", "args")


def items_from_events(events: Iterable[Any]) -> tuple[list[Item], int]:
    """The carried items of a journal, and the seq of the last snapshot (0 if none)."""
    items: dict[str, Item] = {}
    last_snapshot = 0
    dropped: set[str] = set()
    for ev in events:
        p = ev.payload
        if ev.kind in ("tool_result", "tool_failure", "file_read"):
            ref = p.get("ref") or p.get("stored_ref")
            if not isinstance(ref, str) or not ref:
                continue
            tokens = int(p.get("tokens") or 0)
            carried = int(p.get("stub_tokens") or 0) if p.get("offloaded") else tokens
            if ev.kind == "file_read":
                label = f"read {p.get('path', '?')}"
                carried = int(p.get("response_tokens") or 0)
            else:
                args = p.get("args")
                label = f"{p.get('tool', '?')} {args if isinstance(args, str) else ''}".strip()
            items[ref] = Item(ev.seq, ev.kind, label[:80], ref, tokens, carried, ev.created_at)
        elif ev.kind == "dropped":
            ref = p.get("ref")
            if isinstance(ref, str):
                dropped.add(ref)
        elif ev.kind == "checkpoint_saved":
            last_snapshot = ev.seq
    for ref in dropped:
        if ref in items:
            items[ref].dropped = True
    return sorted(items.values(), key=lambda i: i.seq), last_snapshot


def plan_compaction(
    events: Iterable[Any], mode: PruneMode, plan_mode: str, now: float, target_tokens: int | None = None,
    digest_cost: int = 14, last_activity: float | None = None, ttl_s: float | None = None,
) -> Plan:
    """A compaction plan over the task's journal (pure: the caller passes ``now``).

    ``events`` may be only the kinds ``items_from_events`` reads (results, file reads, drops,
    snapshots) when ``last_activity`` gives the time of the task's newest event of any kind.
    ``ttl_s``: the provider's prompt-cache TTL (``BOSUN_CACHE_TTL_S``); default the mode's own.
    """
    if plan_mode not in PLAN_MODES:
        raise InvalidInput("mode", f"unknown compaction mode {plan_mode!r}", ", ".join(PLAN_MODES))
    if target_tokens is not None and (not isinstance(target_tokens, int) or target_tokens < 1):
        raise InvalidInput("target_tokens", f"must be a positive integer, got {target_tokens!r}")
    events = list(events)
    items, snapshot = items_from_events(events)
    live = [i for i in items if not i.dropped and i.carried > digest_cost]
    small = {i.ref for i in live if i.carried < mode.min_evict_tokens} if plan_mode != "clear" else set()
    if last_activity is None:
        last_activity = max((ev.created_at for ev in events), default=now)
    cache_alive = (now - last_activity) <= (mode.ttl_s if ttl_s is None else ttl_s)
    cold_cut = live[-mode.cold_after].seq if len(live) > mode.cold_after else 0

    def eligible(item: Item) -> bool:
        working = item.seq > snapshot
        if plan_mode == "clear" or mode.evict == "all":
            return True
        if mode.evict == "working":
            return working
        if mode.evict == "cold":
            return working or item.seq < cold_cut
        return working or not cache_alive  # ttl

    protected = {i.ref for i in live[len(live) - mode.keep_recent :]} if plan_mode != "clear" and mode.keep_recent else set()
    chosen = [i for i in live if eligible(i) and i.ref not in protected and i.ref not in small]
    scope = "everything rehydratable" if plan_mode == "clear" else {
        "all": "everything rehydratable", "working": "working zone (since the last snapshot)",
        "cold": "working zone and cold history", "ttl": "everything (prompt cache expired)" if not cache_alive
        else "working zone (prompt cache alive)",
    }[mode.evict]
    if plan_mode == "trim":
        goal = target_tokens or sum(i.carried for i in chosen) // 2
        picked: list[Item] = []
        freed = 0
        for item in sorted(chosen, key=lambda i: (-i.carried, i.seq)):
            if freed >= goal:
                break
            picked.append(item)
            freed += item.carried - digest_cost
        chosen = sorted(picked, key=lambda i: i.seq)
    plan = Plan(plan_mode, chosen, scope=scope, cache_alive=cache_alive)
    plan.freed_tokens = sum(i.carried for i in chosen)
    plan.digest_tokens = digest_cost * len(chosen)
    plan.kept = len(live) - len(chosen)
    if cache_alive and chosen:
        first_cached = min((i.seq for i in chosen if i.seq <= snapshot), default=None)
        if first_cached is not None:
            chosen_refs = {i.ref for i in chosen}
            plan.refill_tokens = sum(i.carried for i in live if i.seq > first_cached and i.ref not in chosen_refs)
    return plan
