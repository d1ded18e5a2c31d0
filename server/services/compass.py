"""Tool Compass: which of a harness's tools fit a prompt, ranked by the route machinery.

OSIRIS's Tool Compass recommends the few tools that fit a request out of the many an agent
carries. bosun already ranks and abstains over a corpus of short documents (``route``); a
tool list is such a corpus: each tool becomes a document whose routing surface is its
description (the construction ``bench/route_common.metatool_docs`` evaluates on MetaTool).

The index over a tool list is built once per distinct list (fingerprint of names and
descriptions) and kept in a small LRU, so a harness that sends the same tools every turn pays
the build (embedding its descriptions, cached by content hash in the engine's store) only on
the first call. The decision is route's, on the list's own self-calibrated null, read at the
compass's levels (``COMPASS_LEVELS``): when no tool stands out from unrelated requests the answer is
empty (abstained). A multi-intent request is routed clause by clause, as route does.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import numpy as np

from bosun.core.errors import InvalidInput
from bosun.core.routing import shipped_vectors
from bosun.core.routing.abstain import SHIPPED
from bosun.core.routing.background import BACKGROUND
from bosun.core.routing.calibrate import Levels
from bosun.core.routing.corpus import Policy
from bosun.core.routing.route import (
    PolicyIndex,
    RouteResult,
    build_index,
    clause_texts,
    route,
    texts_to_embed,
)
from bosun.server.services.policies import validate_prompt

if TYPE_CHECKING:
    from bosun.server.services.ports import Models

Progress = Callable[[float, float | None, str | None], Awaitable[None]]

MAX_TOOLS = 2_000
MAX_NAME_CHARS = 200
MAX_DESCRIPTION_CHARS = 4_000  # MCP descriptions run long; the first part says what the tool is for
INDEXES_KEPT = 8
EMBED_BATCH = 32
TOOL_KEYS = {"name", "description", "inputSchema", "input_schema", "parameters", "annotations", "title"}
TOP_K = 3
# Where the compass's bars sit on the tool list's own null. A tool list serves everyday requests
# (weather, travel, shopping), so the one-word gate's everyday-gap test (the prompt must read closer to
# the tool than to every everyday background prompt), which keeps a governance corpus quiet on errands,
# is off; the gate sits higher to pay for it (route: p60 / p80 with the gap). Chosen on the MetaTool
# tune split by a rule stated before the grid: the most mean recall@3 over the 199-tool list and the
# 20-tool lists with "no tool fits" false alarms <= 0.25 in both (`python bench/compass_eval.py --grid`;
# route's own levels: recall@3 0.552 / 0.686, these: 0.556 / 0.764); the held-out split was read once after.
COMPASS_LEVELS = Levels(threshold=0.6, gate=0.85, next=0.4, everyday_gap=False)


@dataclass(frozen=True)
class ToolDoc:
    """One tool as the compass reads it: a name and what it is for."""

    name: str
    description: str

    def as_policy(self) -> Policy:
        """The tool as a routable document (surface = description, like the MetaTool bench corpus)."""
        return Policy(name=self.name, surface=self.description, text=self.description, source="compass", fmt="oiax")


def parse_tools(raw: Any, field_name: str = "tools") -> list[ToolDoc]:
    """Validate a tool list: ``{name, description}`` objects (MCP ``tools/list`` items are accepted as they are).

    Errors name the field (``tools[3].description``) so a caller can fix the exact item.
    """
    if not isinstance(raw, list):
        raise InvalidInput(field_name, "must be a list", "[{name, description}, ...]")
    if not raw:
        raise InvalidInput(field_name, "is empty", "the harness's tools, [{name, description}, ...]")
    if len(raw) > MAX_TOOLS:
        raise InvalidInput(field_name, f"{len(raw)} tools; the limit is {MAX_TOOLS}", "fewer tools")
    out: list[ToolDoc] = []
    seen: dict[str, int] = {}
    for i, item in enumerate(raw):
        where = f"{field_name}[{i}]"
        if not isinstance(item, dict):
            raise InvalidInput(where, f"is a {type(item).__name__}", "an object {name, description}")
        unknown = sorted(set(item) - TOOL_KEYS)
        if unknown:
            raise InvalidInput(where, f"unknown keys {unknown}", "name, description (inputSchema is ignored)")
        name, desc = item.get("name"), item.get("description")
        if not isinstance(name, str) or not name.strip():
            raise InvalidInput(f"{where}.name", "must be a non-empty string")
        if len(name) > MAX_NAME_CHARS:
            raise InvalidInput(f"{where}.name", f"is {len(name)} characters; the limit is {MAX_NAME_CHARS}")
        if not isinstance(desc, str) or not desc.strip():
            raise InvalidInput(f"{where}.description", "must be a non-empty string", "what the tool is for")
        if name in seen:
            raise InvalidInput(f"{where}.name", f"duplicate name {name!r} (also {field_name}[{seen[name]}])")
        seen[name] = i
        out.append(ToolDoc(name.strip(), " ".join(desc.split())[:MAX_DESCRIPTION_CHARS]))
    return out


def fingerprint(tools: list[ToolDoc]) -> str:
    h = hashlib.sha256()
    for t in tools:
        h.update(t.name.encode("utf-8", "surrogatepass") + b"\0" + t.description.encode("utf-8", "surrogatepass") + b"\1")
    return h.hexdigest()


class CompassService:
    """Ranks a caller's tools for a prompt; one warm index per distinct tool list."""

    def __init__(self, models: Models) -> None:
        self.models = models
        self._indexes: OrderedDict[str, PolicyIndex] = OrderedDict()
        self._building: dict[str, asyncio.Task[PolicyIndex]] = {}

    async def index_for(self, tools: list[ToolDoc], progress: Progress | None = None) -> PolicyIndex:
        """The index over ``tools``, built on first sight (concurrent callers share one build)."""
        key = fingerprint(tools)
        index = self._indexes.get(key)
        if index is not None:
            self._indexes.move_to_end(key)
            return index
        task = self._building.get(key)
        if task is None:
            task = asyncio.ensure_future(self._build(tools, progress))
            self._building[key] = task
            task.add_done_callback(lambda _t: self._building.pop(key, None))
        index = await asyncio.shield(task)
        self._indexes[key] = index
        while len(self._indexes) > INDEXES_KEPT:
            self._indexes.popitem(last=False)
        return index

    async def _build(self, tools: list[ToolDoc], progress: Progress | None) -> PolicyIndex:
        policies = [t.as_policy() for t in tools]
        texts = list(dict.fromkeys(texts_to_embed(policies)))
        emb = await self.models.embedder()
        model_id = emb.model_id()
        vectors = await self._background(model_id, texts)
        todo = [t for t in texts if t not in vectors]
        for start in range(0, len(todo), EMBED_BATCH):
            if progress is not None:
                await progress(float(start), float(len(todo)),
                               f"tool compass: indexing {len(tools)} tools, {start} of {len(todo)} texts embedded")
            batch = todo[start : start + EMBED_BATCH]
            vectors.update(zip(batch, await self.models.embed(batch), strict=True))
        return await anyio.to_thread.run_sync(build_index, policies, vectors, model_id, SHIPPED)

    async def _background(self, model_id: str, texts: list[str]) -> dict[str, np.ndarray]:
        """The background prompts' shipped vectors, when the live model reproduces them (as the policy index does)."""
        wanted = [t for t in BACKGROUND if t in set(texts)]
        shipped = shipped_vectors.load(model_id, wanted)
        if not shipped:
            return {}
        probe = next(iter(shipped))
        live = (await self.models.embed([probe]))[0]
        return shipped if shipped_vectors.verified(shipped[probe], live) else {}

    async def rank(self, prompt: Any, tools: Any, top_k: int | None = None,
                   progress: Progress | None = None) -> dict[str, Any]:
        """The tools that fit ``prompt``: ``{hits: [{name, score, why}], abstained, tools, compass_ms}``."""
        prompt = validate_prompt(prompt)
        if top_k is not None and not 1 <= top_k <= 10:
            raise InvalidInput("top_k", f"{top_k} is out of range", "1 to 10")
        docs = parse_tools(tools)
        t0 = time.perf_counter()
        index = await self.index_for(docs, progress)
        emb = await self.models.embedder()

        def work() -> RouteResult:
            parts = clause_texts(prompt)
            vecs = emb.embed([prompt, *parts])  # a multi-intent request's clauses in the same model call
            return decide(index, prompt, vecs[0], top_k if top_k is not None else TOP_K,
                          list(zip(parts, vecs[1:], strict=True)))

        result = await anyio.to_thread.run_sync(work)
        return {
            "hits": [h.as_dict() for h in result.hits],
            "abstained": result.abstained,
            "tools": len(docs),
            "compass_ms": round((time.perf_counter() - t0) * 1000, 3),
        }


def decide(index: PolicyIndex, prompt: str, qvec: np.ndarray, top_k: int = TOP_K,
           clause_vecs: list[tuple[str, np.ndarray]] | None = None, levels: Levels = COMPASS_LEVELS) -> RouteResult:
    """Route's ranking and decision over a tool list, with the bars at the compass's levels of the list's null."""
    cal = index.calibration.at(levels) if index.calibration is not None else None
    return route(index, prompt, qvec, SHIPPED, top_k, calibrated=True, clause_vecs=clause_vecs or (),
                 calibration=cal)

