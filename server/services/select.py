"""Resolve select_context items (inline text, refs, policy names) and run a selection.

Shared by the ``select_context`` tool and ``bosun select``: both turn the
caller's items into texts, embed them through ``engine.embed`` (cached by
content hash, so re-selecting the same candidates does not re-embed), and hand
the vectors to ``bosun.core.selection.select``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np

from bosun.core.errors import InvalidInput, NotFound
from bosun.core.selection.select import DEFAULT_STRATEGY, STRATEGIES, Params, Pool, Selection, select
from bosun.core.tokens import estimate_tokens

if TYPE_CHECKING:
    from bosun.server.services.ports import SelectSource

MAX_ITEM_BYTES = 1_000_000
MAX_CANDIDATES = 4_000  # the similarity matrix is n x n float32: 64 MB at this size
MAX_CONTEXT = 4_000
MAX_GOAL_BYTES = 100_000
ITEM_KEYS = {"id", "text", "ref", "policy", "source", "metadata"}
PROGRESS_POOL = 256  # pools at least this large embed in batches and report progress to a listening client
EMBED_BATCH = 64
Progress = Callable[[float, float | None, str | None], Awaitable[None]]
# select_context's ``options``: the rarely used knobs, off the tool listing (docs/select_context.md)
OPTION_TYPES: dict[str, tuple[type, ...]] = {
    "mmr_lambda": (int, float), "max_items": (int,), "min_relevance": (int, float),
    "relevance_floor": (int, float), "show_rejected": (int,), "include_text": (bool,), "lookahead": (int,),
}


def options_params(options: Any, iterative: Any = True) -> tuple[Params, int, bool]:
    """``options`` (and ``iterative``) as ``(Params, show_rejected, include_text)``; errors name ``options.<key>``."""
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise InvalidInput("options", "must be an object", ", ".join(OPTION_TYPES))
    if not isinstance(iterative, bool):
        raise InvalidInput("iterative", "must be true or false")
    for key, value in options.items():
        kinds = OPTION_TYPES.get(key)
        if kinds is None:
            raise InvalidInput(f"options.{key}", "is not an option", ", ".join(OPTION_TYPES))
        if value is None and key == "max_items":
            continue
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise InvalidInput(f"options.{key}", f"must be a {' or '.join(k.__name__ for k in kinds)}")
    show = options.get("show_rejected", 5)
    if show < 0:
        raise InvalidInput("options.show_rejected", f"{show} is negative", "a count >= 0")
    knobs = {k: options[k] for k in ("mmr_lambda", "max_items", "min_relevance", "relevance_floor", "lookahead")
             if k in options}
    params = replace(Params(), iterative=iterative, **knobs)
    try:
        params.check()
    except InvalidInput as exc:
        raise InvalidInput(f"options.{exc.field}", exc.problem, exc.accepted) from exc
    return params, show, bool(options.get("include_text", False))


@dataclass
class Item:
    """A candidate or context item after validation, with its text resolved."""

    id: str
    index: int
    kind: str  # text | ref | policy
    text: str = ""
    source: str | None = None
    metadata: dict[str, Any] | None = None
    ref: str | None = None
    policy: str | None = None
    tokens: int = 0


@dataclass
class Outcome:
    """A selection with the items it was made over and what it cost."""

    selection: Selection
    candidates: list[Item]
    context: list[Item]
    timings_ms: dict[str, float] = field(default_factory=dict)


@lru_cache(maxsize=32_768)
def _tokens(text: str) -> int:
    return estimate_tokens(text)


def parse_items(field_name: str, raw: Any, prefix: str) -> list[Item]:
    """Validate a list of strings or ``{id, text | ref | policy, source, metadata}`` objects."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidInput(field_name, "must be a list", "strings or {id, text | ref | policy, source, metadata}")
    items: list[Item] = []
    seen: dict[str, int] = {}
    for i, value in enumerate(raw):
        where = f"{field_name}[{i}]"
        if isinstance(value, str):
            item = Item(id=f"{prefix}{i}", index=i, kind="text", text=value)
        elif isinstance(value, dict):
            item = _parse_object(where, value, i, prefix)
        else:
            raise InvalidInput(where, f"is a {type(value).__name__}", "a string or {id, text | ref | policy}")
        if item.kind == "text":
            _check_text(f"{where}" + ("" if isinstance(value, str) else ".text"), item.text)
        if item.id in seen:
            raise InvalidInput(f"{where}.id", f"duplicate id {item.id!r} (also {field_name}[{seen[item.id]}])",
                               "a unique id per item")
        seen[item.id] = i
        items.append(item)
    return items


def _parse_object(where: str, value: dict[str, Any], i: int, prefix: str) -> Item:
    unknown = sorted(set(value) - ITEM_KEYS)
    if unknown:
        raise InvalidInput(where, f"unknown keys {unknown}", ", ".join(sorted(ITEM_KEYS)))
    given = [k for k in ("text", "ref", "policy") if value.get(k) is not None]
    if len(given) != 1:
        raise InvalidInput(where, f"needs exactly one of text, ref, policy (got {given or 'none'})",
                           "{id, text} or {id, ref} or {id, policy}")
    kind = given[0]
    if not isinstance(value[kind], str):
        raise InvalidInput(f"{where}.{kind}", "must be a string")
    ident = value.get("id")
    if ident is None:
        ident = value[kind] if kind == "policy" else f"{prefix}{i}"
    if not isinstance(ident, str | int) or isinstance(ident, bool) or not str(ident).strip():
        raise InvalidInput(f"{where}.id", "must be a non-empty string")
    source = value.get("source")
    if source is not None and not isinstance(source, str):
        raise InvalidInput(f"{where}.source", "must be a string")
    meta = value.get("metadata")
    if meta is not None and not isinstance(meta, dict):
        raise InvalidInput(f"{where}.metadata", "must be an object")
    item = Item(id=str(ident), index=i, kind=kind, source=source, metadata=meta)
    if kind == "text":
        item.text = value["text"]
    elif kind == "ref":
        item.ref = value["ref"]
    else:
        item.policy = value["policy"]
    return item


def _check_text(where: str, text: str) -> None:
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput(where, "is not valid UTF-8 (lone surrogate)") from exc
    if size > MAX_ITEM_BYTES:
        raise InvalidInput(where, f"is {size:,} bytes; the limit is {MAX_ITEM_BYTES:,}",
                           "split it, or store it and pass a smaller excerpt")
    if not text.strip():
        raise InvalidInput(where, "is empty or whitespace", "the item's text")


async def resolve(engine: SelectSource, field_name: str, items: list[Item]) -> None:
    """Fill in the text of ref and policy items (refs are verified against their hash on read)."""
    from bosun.store.refs import make_ref

    policies: Any = None
    for item in items:
        where = f"{field_name}[{item.index}]"
        if item.kind == "ref":
            assert item.ref is not None
            digest = await engine.recall.resolver.resolve(item.ref, f"{where}.ref")
            try:
                data = await engine.refs.get(digest)
            except NotFound as exc:
                raise NotFound("ref", make_ref(digest), "store it first (observe), or pass the text inline",
                               field=f"{where}.ref") from exc
            try:
                item.text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidInput(f"{where}.ref", "points at binary data, not UTF-8 text") from exc
            _check_text(f"{where}.ref", item.text)
            item.source = item.source or make_ref(digest)
        elif item.kind == "policy":
            assert item.policy is not None
            if policies is None:
                policies = engine.policies
            try:
                policy = await policies.get(item.policy)
            except NotFound as exc:
                raise NotFound("policy", item.policy, exc.args[0].split("; ", 1)[-1], field=f"{where}.policy") from exc
            item.text = policy.text
            _check_text(f"{where}.policy", item.text)
            item.source = item.source or f"bosun://policy/{policy.name}"


def check_goal(goal: Any) -> str:
    if not isinstance(goal, str):
        raise InvalidInput("goal", "must be a string", "what the context is for, in words")
    size = len(goal.encode("utf-8", "surrogatepass"))
    if not goal.strip():
        raise InvalidInput("goal", "is empty or whitespace", "what the context is for, in words")
    if size > MAX_GOAL_BYTES:
        raise InvalidInput("goal", f"is {size:,} bytes; the limit is {MAX_GOAL_BYTES:,}", "a shorter goal")
    return goal


def check_budget(budget: Any) -> int:
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise InvalidInput("budget_tokens", "must be an integer", "a token count >= 0")
    if budget < 0:
        raise InvalidInput("budget_tokens", f"{budget} is negative", "a token count >= 0")
    return budget


async def run_selection(
    engine: SelectSource,
    goal: Any,
    candidates: Any,
    context: Any = None,
    budget_tokens: Any = 2000,
    strategy: str = DEFAULT_STRATEGY,
    params: Params | None = None,
    explain: int = 10,
    progress: Progress | None = None,
) -> Outcome:
    """Validate, resolve, embed and select; raises InvalidInput/NotFound naming the field."""
    t0 = time.perf_counter()
    goal = check_goal(goal)
    budget = check_budget(budget_tokens)
    if strategy not in STRATEGIES:
        raise InvalidInput("strategy", f"unknown strategy {strategy!r}", ", ".join(STRATEGIES))
    params = params or Params()
    params.check()
    cands = parse_items("candidates", candidates, "c")
    ctx = parse_items("context", context, "ctx")
    if len(cands) > MAX_CANDIDATES:
        raise InvalidInput("candidates", f"{len(cands)} items; the limit is {MAX_CANDIDATES}",
                           "pre-filter (route, recall grep) before selecting")
    if len(ctx) > MAX_CONTEXT:
        raise InvalidInput("context", f"{len(ctx)} items; the limit is {MAX_CONTEXT}", "the items in the prompt now")
    await resolve(engine, "candidates", cands)
    await resolve(engine, "context", ctx)
    t1 = time.perf_counter()
    for item in cands:
        item.tokens = _tokens(item.text)
    if not cands:
        sel = Selection(strategy=strategy, budget_tokens=budget, note="no candidates to select from")
        return Outcome(sel, cands, ctx, {"resolve": (t1 - t0) * 1000})
    texts = [goal] + [c.text for c in cands] + [c.text for c in ctx]
    if progress is None or len(texts) < PROGRESS_POOL:
        vecs = np.asarray(await engine.embed(texts))
    else:  # a big pool: embed in batches and tell a listening client how far along it is
        parts = []
        for start in range(0, len(texts), EMBED_BATCH):
            await progress(float(start), float(len(texts)), f"select_context: {start} of {len(texts)} texts embedded")
            parts.append(np.asarray(await engine.embed(texts[start : start + EMBED_BATCH])))
        await progress(float(len(texts)), float(len(texts)), f"select_context: selecting from {len(cands)} candidates")
        vecs = np.vstack(parts)
    t2 = time.perf_counter()
    n = len(cands)
    pool = Pool(
        goal=vecs[0],
        candidates=vecs[1 : n + 1],
        tokens=[c.tokens for c in cands],
        labels=[c.id for c in cands],
        context=vecs[n + 1 :] if ctx else None,
        context_labels=[f"context {c.id}" for c in ctx],
        candidate_texts=[c.text for c in cands],
        goal_text=goal,
        context_texts=[c.text for c in ctx],
    )
    sel = select(pool, budget, strategy, params, explain=explain)
    t3 = time.perf_counter()
    return Outcome(sel, cands, ctx, {"resolve": (t1 - t0) * 1000, "embed": (t2 - t1) * 1000,
                                     "select": (t3 - t2) * 1000})


def to_result(out: Outcome, show_rejected: int = 5, include_text: bool = False) -> dict[str, Any]:
    """The tool's answer: the picks in order, then the strongest rejections (the forensic view)."""
    sel = out.selection
    selected = []
    for rank, pick in enumerate(sel.selected, 1):
        item = out.candidates[pick.index]
        row: dict[str, Any] = {
            "id": item.id, "rank": rank, "tokens": pick.tokens, "relevance": round(pick.relevance, 3),
            "novelty": round(pick.novelty, 3), "score": round(pick.score, 3), "why": pick.why,
        }
        if item.source:
            row["source"] = item.source
        if item.metadata:
            row["metadata"] = item.metadata
        if include_text:
            row["text"] = item.text
        selected.append(row)
    rejected = []
    for rej in sel.rejected[: max(0, show_rejected)]:
        row = {"id": out.candidates[rej.index].id, "reason": rej.reason, "why": rej.why,
               "relevance": round(rej.relevance, 3), "novelty": round(rej.novelty, 3), "tokens": rej.tokens}
        if rej.redundant_with:
            row["redundant_with"] = rej.redundant_with.removeprefix("context ")
        rejected.append(row)
    result: dict[str, Any] = {
        "selected": selected,
        "tokens_used": sel.tokens_used,
        "budget_tokens": sel.budget_tokens,
        "strategy": sel.strategy,
        "candidates": len(out.candidates),
        "rejected": rejected,
        "rejected_total": sel.rejected_total,
        "rejected_counts": sel.rejected_counts,
    }
    if sel.note:
        result["note"] = sel.note
    return result


class SelectService:
    """select_context: validate, resolve refs and policies, embed with the warm model, select."""

    def __init__(self, engine: SelectSource, policies: Any) -> None:
        self.engine = engine
        self.policies = policies  # the route index: {"policy": name} items are read from it

    async def select(self, goal: Any, candidates: Any, context: Any, budget_tokens: Any, strategy: str,
                     params: Params, show_rejected: int = 5, include_text: bool = False,
                     progress: Progress | None = None) -> dict[str, Any]:
        """The tool's answer (see ``to_result``)."""
        out = await run_selection(self.engine, goal, candidates, context, budget_tokens, strategy, params,
                                  explain=max(0, show_rejected), progress=_quiet(progress))
        return to_result(out, show_rejected=show_rejected, include_text=include_text)


def _quiet(progress: Progress | None) -> Progress | None:
    """``progress`` that never fails the selection (a closed stream costs the notice, not the answer)."""
    if progress is None:
        return None

    async def tell(done: float, total: float | None, message: str | None) -> None:
        try:
            await progress(done, total, message)
        except Exception:
            pass

    return tell
