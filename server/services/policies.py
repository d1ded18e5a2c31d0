"""The warm policy index: load corpora, embed through the engine's cache, reload on change.

Corpora come from ``engine.config.policies`` (``--policies DIR`` / ``BOSUN_POLICIES``);
an empty list serves the demo corpus shipped in ``bosun/server/policies``. A
background task polls file mtimes and rebuilds the index when anything changed;
only texts never seen before are embedded (``engine.embed`` caches by sha256 in
the store), so a reload of one edited file costs one embedding plus a TF-IDF fit.
The previous index keeps serving until the new one is ready, and a reload that
fails (duplicate names, say) keeps the old index and reports why.
"""

from __future__ import annotations

import asyncio
import importlib.resources
import logging
import os
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from bosun.core.errors import BosunError, InvalidInput, NotFound
from bosun.core.routing import shipped_vectors
from bosun.core.routing.abstain import SHIPPED, OperatingPoint, divergence, separability
from bosun.core.routing.background import BACKGROUND
from bosun.core.routing.corpus import Policy, PolicyParseError, corpus_fingerprint, is_active, parse_policy
from bosun.core.routing.rerank import judged_route
from bosun.core.routing.route import (
    PolicyIndex,
    RouteResult,
    body_chunks,
    build_index,
    clause_texts,
    route,
    surface_phrases,
)
from bosun.server.judge_model import serves_route
from bosun.server.services.changes import ChangeListeners

log = logging.getLogger("bosun.policies")
route_log = logging.getLogger("bosun.route")  # index build progress
EMBED_BATCH = 32  # texts per model call: cancellation and progress are checked between batches

MAX_PROMPT_BYTES = 100_000
CACHE_ITEMS = 2048


class CorpusError(BosunError):
    """The corpus cannot be served as configured (e.g. two files claim one name)."""


def demo_corpus_dir() -> Path:
    return Path(str(importlib.resources.files("bosun.server") / "policies"))


FileStamp = tuple[int, int]  # (mtime_ns, size)


@dataclass
class Scan:
    policies: list[Policy]
    warnings: list[str]
    stamps: dict[str, FileStamp]
    skipped_inactive: list[str] = field(default_factory=list)


def _candidate_files(root: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for fn in sorted(filenames):
            if fn.endswith((".md", ".mdc")) and not fn.startswith("."):
                out.append(Path(dirpath) / fn)
    return out


def stamp_files(dirs: list[Path]) -> dict[str, FileStamp]:
    """mtime and size of every candidate file: the cheap change detector."""
    out: dict[str, FileStamp] = {}
    for root in dirs:
        if not root.is_dir():
            continue
        for path in _candidate_files(root):
            try:
                st = path.stat()
            except OSError:
                continue
            out[str(path)] = (st.st_mtime_ns, st.st_size)
    return out


def scan_corpus(dirs: list[Path]) -> Scan:
    """Read and parse every policy file. Problems with single files become warnings naming them;
    two files with one name raise CorpusError naming both."""
    policies: list[Policy] = []
    warnings: list[str] = []
    stamps: dict[str, FileStamp] = {}
    inactive: list[str] = []
    seen: dict[str, str] = {}
    for root in dirs:
        if not root.exists():
            warnings.append(f"policy directory {root} does not exist (check --policies / BOSUN_POLICIES)")
            continue
        if not root.is_dir():
            warnings.append(f"policy path {root} is not a directory")
            continue
        for path in _candidate_files(root):
            if path.name.lower() == "readme.md":
                continue
            try:
                st = path.stat()
                stamps[str(path)] = (st.st_mtime_ns, st.st_size)
                data = path.read_bytes()
            except OSError as exc:
                warnings.append(f"{path}: unreadable ({exc.strerror or exc}); skipped")
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                warnings.append(f"{path}: not valid UTF-8 (byte {exc.start}); skipped")
                continue
            stem = path.parent.name if path.name == "SKILL.md" else None
            try:
                policy = parse_policy(str(path), text, stem=stem)
            except PolicyParseError as exc:
                warnings.append(f"{exc}; skipped")
                continue
            if policy is None:
                warnings.append(
                    f"{path}: no routing surface (an **Agent-trigger:** line, a front-matter description, or a "
                    "title with an opening paragraph); skipped"
                )
                continue
            if policy.surface_derived:
                warnings.append(
                    f"{path}: no **Agent-trigger:** line or description; routed on its title and opening paragraph "
                    "(add a trigger line to say what it governs)"
                )
            if not is_active(policy):
                inactive.append(policy.name)
                continue
            if policy.name in seen:
                raise CorpusError(f"duplicate policy name {policy.name!r}: {seen[policy.name]} and {path}")
            seen[policy.name] = str(path)
            policies.append(policy)
    return Scan(policies, warnings, stamps, inactive)


@dataclass
class BuildPlan:
    """What one build embeds, in the order that gets routing answering soonest.

    ``first``: each document's whole routing surface (one text per document: enough to rank and
    decide); ``rest``: the surface's phrases, the title and the body chunks.
    """

    scan: Scan
    first: list[str]
    rest: list[str]


def _plan(dirs: list[Path]) -> BuildPlan:
    """Scan and list the texts to embed, off the event loop (0.5 s at 6,000 documents).

    Each list is sorted by length: the model pads a batch to its longest text, so similar lengths
    together cost about half of the file order (measured 7.4 s -> 4.0 s for 150 texts of a 13-policy
    corpus on a loaded 2-core machine).
    """
    scan = scan_corpus(dirs)
    first = list(dict.fromkeys(p.surface for p in scan.policies))
    seen = set(first)
    rest = [t for t in dict.fromkeys(t for p in scan.policies for t in (*surface_phrases(p), *body_chunks(p)))
            if t not in seen]
    return BuildPlan(scan, sorted(first, key=len), sorted(rest, key=len))


def load_operating_point_file(path: Path) -> OperatingPoint:
    import tomllib

    try:
        data = tomllib.loads(path.read_text())
    except OSError as exc:
        raise InvalidInput("operating_point", f"cannot read {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput("operating_point", f"{path} is not valid TOML: {exc}") from exc
    return OperatingPoint.from_dict(data, source=str(path))


@dataclass
class Served:
    """One built generation of the index, swapped atomically on reload."""

    index: PolicyIndex
    generation: int
    fingerprint: str
    separability: float
    notices: list[str]
    built_at: float
    build_seconds: float
    complete: bool = True  # False: served from surfaces while body text is still being embedded


COMPLETE_WAIT_S = 5.0  # how long routes wait for a first index's bodies before answering from surfaces


class PolicyService:
    """The warm state behind ``route`` and ``get_policy``."""

    def __init__(self, engine: Any, dirs: list[Path] | None = None, op: OperatingPoint | None = None,
                 poll_seconds: float | None = None, complete_wait_s: float = COMPLETE_WAIT_S) -> None:
        self.engine = engine
        self.complete_wait_s = complete_wait_s
        configured = list(dirs) if dirs is not None else list(engine.config.policies)
        self.demo = not configured
        self.dirs = configured or [demo_corpus_dir()]
        self.op_path: Path | None = engine.config.route_operating_point
        self.op_explicit = op is not None or self.op_path is not None
        self._op = op
        self.poll_seconds = engine.config.policy_poll_s if poll_seconds is None else poll_seconds
        self.served: Served | None = None
        self.warnings: list[str] = []
        self.inactive: list[str] = []
        self.error: str | None = None
        self.stamps: dict[str, FileStamp] = {}
        self.generation = 0
        self.reloads = 0
        self._lock = asyncio.Lock()
        self._first: asyncio.Task[None] | None = None
        self._poller: asyncio.Task[None] | None = None
        self._cache: OrderedDict[tuple[int, int | None, str], dict[str, Any]] = OrderedDict()
        self._stopping = False
        # told "policies" after every new index generation is serving (resources/list_changed, dashboard)
        self.changes = ChangeListeners("policy corpus")
        self._served = asyncio.Event()  # set once any index (even a surfaces-only one) is serving
        self._complete = asyncio.Event()  # set once an index with every phrase and body is serving
        self._partial_at = 0.0  # monotonic time the first, surfaces-only index went live
        self._state: dict[str, Any] = {"state": "loading", "done": 0, "total": 0, "documents": 0, "error": None,
                                       "phase": "scanning", "background": "pending"}

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._first = loop.create_task(self._initial_load())
        if self.poll_seconds > 0:
            self._poller = loop.create_task(self._poll())

    async def _initial_load(self) -> None:
        try:
            await self.reload()
        except Exception as exc:  # reported on every route call; the daemon keeps serving
            self.error = str(exc)
            log.error("policy corpus failed to load: %s", exc)

    def index_state(self) -> dict[str, Any]:
        """Build progress for /healthz: state loading|building|ready|failed, texts embedded of total."""
        out = dict(self._state)
        if self.error and out["state"] != "building":
            out["state"] = "failed" if self.served is None else "ready"
            out["error"] = self.error
        if self.served is not None:
            out["generation"] = self.served.generation
            out["build_seconds"] = round(self.served.build_seconds, 3)
        return out

    async def aclose(self) -> None:
        self._stopping = True  # the build checks this between embedding batches
        for task in (self._poller, self._first):
            if task is not None and not task.done():
                task.cancel()
                try:
                    await task
                except (asyncio.CancelledError, Exception):
                    pass

    async def _poll(self) -> None:
        while True:
            # stat-ing every file costs ~10 us each: past 1,000 files poll less often so a large corpus
            # does not keep a core busy on a shared machine
            await asyncio.sleep(self.poll_seconds * max(1.0, len(self.stamps) / 1000))
            try:
                if self._first is not None and not self._first.done():
                    continue
                stamps = await anyio.to_thread.run_sync(stamp_files, self.dirs)
                if stamps != self.stamps:
                    log.info("policy files changed; reloading")
                    await self.reload()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("policy reload failed: %s", exc)

    def operating_point(self) -> OperatingPoint:
        if self._op is None:
            self._op = load_operating_point_file(self.op_path) if self.op_path is not None else SHIPPED
        return self._op

    async def reload(self) -> Served:
        """Rescan, embed what is new, rebuild; on failure keep serving the previous index.

        The first build serves as soon as the surfaces are embedded (routing works, body evidence
        arrives with the second stage); ``index_state`` and the ``bosun.route`` log show progress.
        """
        async with self._lock:
            try:
                return await self._rebuild()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self._state.update(state="failed" if self.served is None else "ready", error=str(exc))
                raise

    async def _rebuild(self) -> Served:
        self._state.update(state="loading", phase="scanning", error=None)
        try:
            plan = await anyio.to_thread.run_sync(_plan, self.dirs)
        except CorpusError as exc:
            self.error = str(exc)
            self.stamps = await anyio.to_thread.run_sync(stamp_files, self.dirs)
            raise
        scan = plan.scan
        self.stamps = scan.stamps
        self.warnings = scan.warnings
        self.inactive = scan.skipped_inactive
        for w in scan.warnings:
            log.warning("%s", w)
        t0 = time.perf_counter()
        op = self.operating_point()
        self._state.update(phase="model")
        emb = await self.engine.embedder()
        model_id = emb.model_id()
        if self.op_explicit and op.model_id and op.model_id != model_id:
            self.error = (
                f"operating point {op.source} was measured under {op.model_id}, but the model is {model_id}; "
                "recalibrate with `bosun eval route calibrate`"
            )
            raise CorpusError(self.error)
        vectors: dict[str, np.ndarray] = {}
        background = await self._background_vectors(model_id) if scan.policies else {}
        vectors.update(background)
        if self.demo and scan.policies:  # the package's own corpus: its vectors ship with it
            vectors.update(await self._shipped_vectors(model_id, plan.first + plan.rest, shipped_vectors.DEMO))
        plan = BuildPlan(scan, [t for t in plan.first if t not in vectors], [t for t in plan.rest if t not in vectors])
        first = self.served is None
        total = len(plan.first) + len(plan.rest)
        self._state.update(state="building", phase="surfaces", done=0, total=total, documents=len(scan.policies))
        route_log.info("building policy index: %d documents, %d texts to embed (cached texts are free)",
                       len(scan.policies), total)
        await self._embed_into(vectors, plan.first, 0, total)
        if first and plan.rest:
            # serve from the surfaces while the bodies embed: routing answers within the first seconds
            partial = await self._build(scan, vectors, model_id, op, t0, complete=False)
            route_log.info("policy index serving from whole surfaces (%d documents); embedding %d more texts",
                           len(partial.index), len(plan.rest))
            self._state.update(phase="phrases and bodies")
        await self._embed_into(vectors, plan.rest, len(plan.first), total)
        served = await self._build(scan, vectors, model_id, op, t0, complete=True)
        self._state.update(state="ready", phase="ready", done=total)
        return served

    async def _embed_into(self, vectors: dict[str, np.ndarray], texts: list[str], offset: int, total: int) -> None:
        """Embed ``texts`` in batches through the engine's cache, checking for shutdown between batches."""
        last_log = time.perf_counter()
        for start in range(0, len(texts), EMBED_BATCH):
            if self._stopping:
                raise asyncio.CancelledError
            batch = texts[start : start + EMBED_BATCH]
            vecs = await self.engine.embed(batch)
            vectors.update(zip(batch, vecs, strict=True))
            done = offset + start + len(batch)
            self._state["done"] = done
            if time.perf_counter() - last_log >= 2.0:
                route_log.info("index building: %d of %d texts embedded", done, total)
                last_log = time.perf_counter()

    async def _shipped_vectors(self, model_id: str, texts: list[str], kind: str) -> dict[str, np.ndarray]:
        """Those of ``texts`` whose vectors ship as package data, when the live model reproduces one of them."""
        shipped = shipped_vectors.load(model_id, texts, kind)
        if not shipped:
            return {}
        probe = texts[0] if texts[0] in shipped else next(iter(shipped))
        live = (await self.engine.embed([probe]))[0]
        if shipped_vectors.verified(shipped[probe], live):
            return shipped
        route_log.warning("shipped %s vectors for %s do not match the live model; embedding them", kind, model_id)
        return {}

    async def _background_vectors(self, model_id: str) -> dict[str, np.ndarray]:
        """The background prompts' vectors: shipped package data when the live model reproduces it."""
        texts = list(BACKGROUND)
        shipped = await self._shipped_vectors(model_id, texts, shipped_vectors.BACKGROUND)
        if shipped:
            self._state["background"] = "shipped"
            missing = [t for t in texts if t not in shipped]
            if missing:
                shipped.update(zip(missing, await self.engine.embed(missing), strict=True))
            return shipped
        self._state["background"] = "embedded"
        out: dict[str, np.ndarray] = {}
        await self._embed_into(out, texts, 0, len(texts))
        return out

    async def _build(self, scan: Scan, vectors: dict[str, np.ndarray], model_id: str, op: OperatingPoint,
                     t0: float, complete: bool) -> Served:
        """Build the index from ``vectors`` (texts missing from it are left out) and swap it in."""
        policies = scan.policies
        index = await anyio.to_thread.run_sync(build_index, policies, vectors, model_id, op)
        sep = await anyio.to_thread.run_sync(separability, index.surface_vectors())
        notices = []
        # self-calibration fits the corpus's size and separability; only a different model is far from
        # where the decision weights were measured (an explicit point also reports size and separability)
        reasons = divergence(op, len(index), sep, model_id)
        if self.calibrated():
            reasons = [r for r in reasons if r.startswith("the operating point was measured under")]
        if reasons:  # an explicit point too: measured elsewhere is as unmeasured here as the shipped one
            notices.append(
                "bosun routing is running far from its calibration (recall and precision here are "
                "unmeasured; run `bosun eval route calibrate`): " + "; ".join(reasons)
            )
        if not complete:
            notices.append(f"index building, {self._state['done']} of {self._state['total']} texts embedded: "
                           "routing on whole routing surfaces until their phrases and the policy bodies are indexed")
        self.generation += 1
        self.reloads += 1
        served = Served(index, self.generation, corpus_fingerprint(policies), sep, notices,
                        time.time(), time.perf_counter() - t0, complete)
        self.served = served
        self._served.set()
        if complete:
            self._complete.set()
        else:
            self._partial_at = time.monotonic()
        self.error = None
        self._cache.clear()
        self.changes.notify("policies")
        cal = index.calibration.describe() if index.calibration is not None else "not calibrated (no documents)"
        route_log.info("policy index generation %d: %d documents in %.3fs%s; %s%s", served.generation, len(index),
                       served.build_seconds, "" if complete else " (surfaces only)", cal,
                       "; prompt adapter on" if index.adapter is not None else "")
        return served

    def calibrated(self) -> bool:
        """True when routing uses the corpus's self-calibration (no operating point file given)."""
        return not self.op_explicit

    async def ready(self) -> Served:
        """The current index, waiting for the first load (a first index built from surfaces is enough)."""
        if self.served is not None:
            return self.served
        if self._first is not None and not self._first.done():
            served: asyncio.Future[Any] = asyncio.ensure_future(self._served.wait())
            first: asyncio.Future[Any] = asyncio.shield(self._first)
            try:
                await asyncio.wait({served, first}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                served.cancel()
                if first.done() and not first.cancelled():
                    first.exception()  # retrieved here; the reason is reported through self.error below
        if self.served is None:
            # never loaded: try again, so the caller sees the real reason (model failed, duplicate names)
            return await self.reload()
        return self.served

    async def _settled(self, served: Served) -> Served:
        """A first index served from surfaces only: wait for the full one, but no longer than
        ``complete_wait_s`` after the surfaces went live (one bounded wait for a burst of calls, not one each).

        Why: answers from surfaces alone are less accurate (on a blind 16-policy corpus, a fresh home's
        first 60 prompts scored recall@2 0.696 with 10 answered while building vs 0.725 warm), and a small
        corpus's bodies embed within a second or two; a large one still answers from surfaces, with the
        "index building" notice, once the wait is over.
        """
        if served.complete or self._complete.is_set():
            return self.served or served
        remaining = self._partial_at + self.complete_wait_s - time.monotonic()
        if remaining > 0:
            try:
                await asyncio.wait_for(self._complete.wait(), remaining)
            except TimeoutError:
                pass
        return self.served or served

    # -- queries ------------------------------------------------------------------------------
    async def route(self, prompt: Any, top_k: int | None = None) -> dict[str, Any]:
        prompt = validate_prompt(prompt)
        if top_k is not None and not 1 <= top_k <= 10:
            raise InvalidInput("top_k", f"{top_k} is out of range", "1 to 10")
        t0 = time.perf_counter()
        served = await self._settled(await self.ready())
        key = (served.generation, top_k, prompt)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            hit = dict(cached)
            hit["cached"] = True
            hit["route_ms"] = round((time.perf_counter() - t0) * 1000, 3)
            return hit
        emb = await self.engine.embedder()
        judge = await self.engine.judge()
        op = self.operating_point()

        def work() -> RouteResult:
            # prompts are not persisted to the SQLite embedding cache: a commit per turn costs more
            # than it saves; the in-memory LRU still serves repeats
            if judge is not None and serves_route(judge):  # the judge re-reads the first stage's top documents
                vec = emb.embed([prompt])
                with _blas().limit(limits=1, user_api="blas"):
                    return judged_route(served.index, prompt, vec[0], judge, op.top_k if top_k is None else top_k,
                                        rrf_k=op.rrf_k)
            # a multi-intent prompt's clauses are embedded in the same model call (route scores each one)
            clauses = clause_texts(prompt)
            vecs = emb.embed([prompt, *clauses])
            # one BLAS thread for a matrix-vector product: measured 5.5 ms -> 0.2 ms at 1,000 documents,
            # because multi-threaded OpenBLAS fights onnxruntime's spinning threads for the 2 cores
            with _blas().limit(limits=1, user_api="blas"):
                return route(served.index, prompt, vecs[0], op, top_k, calibrated=self.calibrated(),
                             clause_vecs=list(zip(clauses, vecs[1:], strict=True)))

        result = await anyio.to_thread.run_sync(work)
        out: dict[str, Any] = {
            "hits": [h.as_dict() for h in result.hits],
            "abstained": result.abstained,
        }
        notices = list(served.notices)
        if self.error:
            notices.append(f"the last corpus reload failed, serving the previous index: {self.error}")
            out["degraded"] = True  # routing on a stale corpus: telemetry counts it
        cal = served.index.calibration
        judge_notice = self.engine.judge_notice()
        if judge_notice:
            notices.append(judge_notice)
        if judge is not None:
            out["judge"] = judge.model_id()
        elif self.calibrated() and cal is not None:
            # one short line on every answer; the full figures are in bosun://policies and /healthz
            notices.append(cal.describe())
        if notices:
            out["notices"] = notices
        if not served.complete:
            out["index"] = self.index_state()
        out["corpus_size"] = len(served.index)
        self._cache[key] = dict(out)
        while len(self._cache) > CACHE_ITEMS:
            self._cache.popitem(last=False)
        out["cached"] = False
        out["route_ms"] = round((time.perf_counter() - t0) * 1000, 3)
        return out

    async def get(self, name: str) -> Policy:
        served = await self.ready()
        idx = served.index.by_name.get(name)
        if idx is None:
            if name in self.inactive:
                raise NotFound("policy", name, "its **Status:** marks it inactive (deprecated, superseded, ...), so it is not served")
            raise NotFound("policy", name, f"closest names: {', '.join(closest_names(name, list(served.index.by_name)))}")
        return served.index.policies[idx]

    async def listing(self) -> dict[str, Any]:
        served = await self.ready()
        return {
            "policies": [p.summary() for p in served.index.policies],
            "count": len(served.index),
            "generation": served.generation,
            "demo_corpus": self.demo,
            "warnings": self.warnings,
            "inactive": self.inactive,
            "operating_point": self.operating_point().describe(),
            "calibration": (served.index.calibration.as_dict()
                            if self.calibrated() and served.index.calibration is not None else None),
            "calibration_summary": (served.index.calibration.describe()
                                    if self.calibrated() and served.index.calibration is not None
                                    else f"explicit operating point {self.operating_point().source}"),
            # prompts go through the package's learned adapter for this model (core/routing/adapter.py)
            "prompt_adapter": served.index.adapter is not None,
            "index": self.index_state(),
        }


_BLAS_CONTROLLER: Any = None


def _blas() -> Any:
    global _BLAS_CONTROLLER
    if _BLAS_CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _BLAS_CONTROLLER = ThreadpoolController()
    return _BLAS_CONTROLLER


def validate_prompt(prompt: Any) -> str:
    if not isinstance(prompt, str):
        raise InvalidInput("prompt", "must be a string")
    try:
        size = len(prompt.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInput("prompt", "is not valid UTF-8 (lone surrogate)", "UTF-8 text") from exc
    if not prompt.strip():
        raise InvalidInput("prompt", "is empty or whitespace", "the user's request as text")
    if size > MAX_PROMPT_BYTES:
        raise InvalidInput("prompt", f"is {size} bytes; the limit is {MAX_PROMPT_BYTES}", "a shorter prompt")
    return prompt


def closest_names(name: str, names: list[str], n: int = 3) -> list[str]:
    import difflib

    close = difflib.get_close_matches(name, names, n=n, cutoff=0.0)
    return close or sorted(names)[:n]
