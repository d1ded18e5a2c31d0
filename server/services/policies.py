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
from bosun.core.routing.abstain import SHIPPED, OperatingPoint, divergence, separability
from bosun.core.routing.corpus import Policy, PolicyParseError, corpus_fingerprint, is_active, parse_policy
from bosun.core.routing.route import PolicyIndex, RouteResult, build_index, route, texts_to_embed

log = logging.getLogger("bosun.policies")

EXTENSION_KEY = "policies"
MAX_PROMPT_BYTES = 100_000
POLL_SECONDS = 1.0
POLL_ENV = "BOSUN_POLICY_POLL_S"
CACHE_ITEMS = 2048
OPERATING_POINT_ENV = "BOSUN_ROUTE_OPERATING_POINT"


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
                    f"{path}: no routing surface (an **Agent-trigger:** line or a front-matter description); skipped"
                )
                continue
            if not is_active(policy):
                inactive.append(policy.name)
                continue
            if policy.name in seen:
                raise CorpusError(f"duplicate policy name {policy.name!r}: {seen[policy.name]} and {path}")
            seen[policy.name] = str(path)
            policies.append(policy)
    return Scan(policies, warnings, stamps, inactive)


def _scan_with_texts(dirs: list[Path]) -> tuple[Scan, list[str]]:
    """Scan and list the texts to embed, off the event loop (0.5 s at 6,000 documents)."""
    scan = scan_corpus(dirs)
    return scan, texts_to_embed(scan.policies)


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


class PolicyService:
    """The warm state behind ``route`` and ``get_policy``."""

    def __init__(self, engine: Any, dirs: list[Path] | None = None, op: OperatingPoint | None = None,
                 poll_seconds: float | None = None) -> None:
        self.engine = engine
        configured = list(dirs) if dirs is not None else list(engine.config.policies)
        self.demo = not configured
        self.dirs = configured or [demo_corpus_dir()]
        self.op_explicit = op is not None or bool(os.environ.get(OPERATING_POINT_ENV, "").strip())
        self._op = op
        if poll_seconds is None:
            try:
                poll_seconds = float(os.environ.get(POLL_ENV, "") or POLL_SECONDS)
            except ValueError:
                log.warning("%s is not a number; polling every %.1fs", POLL_ENV, POLL_SECONDS)
                poll_seconds = POLL_SECONDS
        self.poll_seconds = poll_seconds
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

    async def aclose(self) -> None:
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
            path = os.environ.get(OPERATING_POINT_ENV, "").strip()
            self._op = load_operating_point_file(Path(path).expanduser()) if path else SHIPPED
        return self._op

    async def reload(self) -> Served:
        """Rescan, embed what is new, rebuild; on failure keep serving the previous index."""
        async with self._lock:
            try:
                scan, texts = await anyio.to_thread.run_sync(_scan_with_texts, self.dirs)
            except CorpusError as exc:
                self.error = str(exc)
                self.stamps = await anyio.to_thread.run_sync(stamp_files, self.dirs)
                raise
            self.stamps = scan.stamps
            self.warnings = scan.warnings
            self.inactive = scan.skipped_inactive
            for w in scan.warnings:
                log.warning("%s", w)
            t0 = time.perf_counter()
            op = self.operating_point()
            emb = await self.engine.embedder()
            model_id = emb.model_id()
            if self.op_explicit and op.model_id and op.model_id != model_id:
                self.error = (
                    f"operating point {op.source} was measured under {op.model_id}, but the model is {model_id}; "
                    "recalibrate with `bosun eval route calibrate`"
                )
                raise CorpusError(self.error)
            vecs = await self.engine.embed(texts) if texts else np.zeros((0, emb.dimension()), np.float32)
            vectors = dict(zip(texts, vecs, strict=True))
            index = await anyio.to_thread.run_sync(build_index, scan.policies, vectors, model_id)
            sep = await anyio.to_thread.run_sync(separability, index.surface_vectors())
            notices = []
            if not self.op_explicit or op.source == "shipped":
                reasons = divergence(op, len(index), sep, model_id)
                if reasons:
                    notices.append(
                        "bosun routing is running far from its calibration (recall and precision here are "
                        "unmeasured; run `bosun eval route calibrate`): " + "; ".join(reasons)
                    )
            self.generation += 1
            self.reloads += 1
            served = Served(index, self.generation, corpus_fingerprint(scan.policies), sep, notices,
                            time.time(), time.perf_counter() - t0)
            self.served = served
            self.error = None
            self._cache.clear()
            log.info("policy index generation %d: %d documents in %.3fs", served.generation, len(index),
                     served.build_seconds)
            return served

    async def ready(self) -> Served:
        """The current index, waiting for the first load."""
        if self._first is not None and not self._first.done():
            await asyncio.shield(self._first)
        if self.served is None:
            # never loaded: try again, so the caller sees the real reason (model failed, duplicate names)
            return await self.reload()
        return self.served

    # -- queries ------------------------------------------------------------------------------
    async def route(self, prompt: Any, top_k: int | None = None) -> dict[str, Any]:
        prompt = validate_prompt(prompt)
        if top_k is not None and not 1 <= top_k <= 10:
            raise InvalidInput("top_k", f"{top_k} is out of range", "1 to 10")
        t0 = time.perf_counter()
        served = await self.ready()
        key = (served.generation, top_k, prompt)
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            hit = dict(cached)
            hit["cached"] = True
            hit["route_ms"] = round((time.perf_counter() - t0) * 1000, 3)
            return hit
        emb = await self.engine.embedder()
        op = self.operating_point()

        def work() -> RouteResult:
            # prompts are not persisted to the SQLite embedding cache: a commit per turn costs more
            # than it saves; the in-memory LRU still serves repeats
            qvec = emb.embed([prompt])[0]
            # one BLAS thread for a matrix-vector product: measured 5.5 ms -> 0.2 ms at 1,000 documents,
            # because multi-threaded OpenBLAS fights onnxruntime's spinning threads for the 2 cores
            with _blas().limit(limits=1, user_api="blas"):
                return route(served.index, prompt, qvec, op, top_k)

        result = await anyio.to_thread.run_sync(work)
        out: dict[str, Any] = {
            "hits": [h.as_dict() for h in result.hits],
            "abstained": result.abstained,
        }
        notices = list(served.notices)
        if self.error:
            notices.append(f"the last corpus reload failed, serving the previous index: {self.error}")
            out["degraded"] = True  # routing on a stale corpus: telemetry counts it
        if notices:
            out["notices"] = notices
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


def service_of(engine: Any) -> PolicyService:
    svc = engine.extensions.get(EXTENSION_KEY)
    if svc is None:
        svc = PolicyService(engine)
        engine.extensions[EXTENSION_KEY] = svc
        svc.start()
    return svc  # type: ignore[no-any-return]
