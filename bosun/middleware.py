"""``ProvenanceMiddleware``: dokis's production pattern (filter the sources, audit the answer) on the warm daemon.

A dokis user changes one import::

    from bosun import ProvenanceMiddleware, ProvenanceConfig as Config

    mw = ProvenanceMiddleware(Config(allowed_domains=["pubmed.ncbi.nlm.nih.gov"], enforcement_mode="guardrail"))
    clean = mw.filter(chunks)                       # the admitted sources; clean.blocked says why others went
    result = mw.audit(query, clean, response)       # dokis's order, or mw.audit(answer, sources, query=...)

The configuration is dokis's (``provenance.toml`` or keyword arguments), validated here by the same code the
daemon runs (``bosun.core.audit.config``), so a typo fails when the object is built, naming the key. A dokis
option bosun would not carry out is an error naming it, never a silent no-op. Every method is one round trip
to the daemon (``filter_sources``, ``select_context``, ``audit``) through ``bosun.client``; the framework
adapters in ``bosun.adapters`` are built on this class, so they share its conversions and its connection.

Sources may be dicts (``{content, source_url, metadata}``, dokis's ``Chunk`` shape), objects with those
attributes (dokis's ``Chunk``), LangChain ``Document``s or LlamaIndex nodes; the URL comes from the source,
else from its metadata (``source_url``, ``url``, ``source``, or the ``url_key`` you name). The methods return
the sources you passed (the same objects), so the result feeds the next step of your pipeline unchanged.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

from bosun.client import AsyncBosun, Bosun, BosunClientError, ToolCallError
from bosun.core.audit.config import AuditConfig, config_from_dict, load_config_file
from bosun.core.errors import InvalidInput

__all__ = [
    "Answered",
    "AuditReport",
    "ComplianceViolation",
    "Filtered",
    "ProvenanceConfig",
    "ProvenanceMiddleware",
    "Selected",
    "close_shared",
    "to_chunk",
]

S = TypeVar("S")
URL_KEYS = ("source_url", "url", "source")  # where a source's URL is looked for in its metadata, in this order
DEFAULT_MODEL = AuditConfig().model
ENFORCE_REFUSAL = "audit failed in enforce mode"  # how the daemon's audit refuses an answer in enforce mode
Client = Bosun | AsyncBosun


class ComplianceViolation(BosunClientError):
    """The answer failed the audit under ``enforcement_mode="enforce"`` (dokis's exception of the same name).

    ``message`` is the daemon's refusal: the failure reasons and the claim counts. The daemon withholds the
    report in enforce mode, so ``report`` is None; audit in ``guardrail`` mode to read every claim.
    """

    def __init__(self, message: str, report: dict[str, Any] | None = None) -> None:
        self.message = message
        self.report = report
        super().__init__(message)


# -- configuration ---------------------------------------------------------------------------------
def _supported(cfg: AuditConfig) -> AuditConfig:
    """Refuse the dokis options that bosun accepts as names but would not carry out."""
    if cfg.model != DEFAULT_MODEL:
        raise InvalidInput("config.model", f"{cfg.model!r}: bosun audits with the daemon's warm model, chosen when the "
                                           "daemon starts (BOSUN_MODEL), not per call", f"omit it, or {DEFAULT_MODEL!r}")
    return cfg


class ProvenanceConfig:
    """dokis's ``Config``: the audit policy, validated when built (errors name ``config.<key>``).

    Keys: ``allowed_domains``, ``min_citation_rate``, ``claim_threshold`` (a probability here, default 0.5),
    ``extractor``, ``matcher``, ``enforcement_mode``, ``max_source_age_days``, ``stale_source_action``,
    ``source_date_metadata_key``, ``domain``, ``fail_on_violation`` (dokis's alias for enforce), and bosun's
    ``as_of`` and ``unknown_age_action``. ``from_toml`` reads a ``provenance.toml``; ``from_yaml`` is dokis's
    name for the same (it takes a .toml file, as dokis's does).
    """

    def __init__(self, **options: Any) -> None:
        self.resolved: AuditConfig = _supported(config_from_dict(options))

    @classmethod
    def from_toml(cls, path: str | Path) -> ProvenanceConfig:
        return cls._of(load_config_file(Path(path)))

    from_yaml = from_toml  # dokis's name, kept for its users: it reads TOML (a .yaml file is refused)

    @classmethod
    def _of(cls, resolved: AuditConfig) -> ProvenanceConfig:
        made = cls.__new__(cls)
        made.resolved = _supported(resolved)
        return made

    def replace(self, **options: Any) -> ProvenanceConfig:
        """This config with ``options`` changed (``fail_on_violation=True`` sets enforce, as in dokis)."""
        if "fail_on_violation" in options and "enforcement_mode" not in options:  # the merged config has a mode
            fail = options.pop("fail_on_violation")
            config_from_dict({"fail_on_violation": fail})  # true or false, or an error naming it
            options["enforcement_mode"] = "enforce" if fail else "guardrail"
        return ProvenanceConfig(**{**self.to_dict(), **options})

    def to_dict(self) -> dict[str, Any]:
        """The ``config`` argument of the daemon's audit and filter_sources."""
        return self.resolved.to_dict()

    @property
    def enforcement_mode(self) -> str:
        return self.resolved.enforcement_mode

    @property
    def allowed_domains(self) -> list[str]:
        return list(self.resolved.allowed_domains)

    def __repr__(self) -> str:
        return f"ProvenanceConfig({', '.join(f'{k}={v!r}' for k, v in self.to_dict().items())})"


ConfigLike = ProvenanceConfig | Mapping[str, Any] | str | Path | None


def as_config(config: ConfigLike = None, **options: Any) -> ProvenanceConfig:
    """A ``ProvenanceConfig`` from one, a dict of its options or a ``provenance.toml`` path; ``options`` win."""
    if isinstance(config, ProvenanceConfig):
        base = config
    elif isinstance(config, str | Path):
        base = ProvenanceConfig.from_toml(config)
    elif isinstance(config, Mapping):
        base = ProvenanceConfig(**config)
    elif config is None:
        base = ProvenanceConfig()
    else:
        raise InvalidInput("config", f"is a {type(config).__name__}",
                           "a ProvenanceConfig, a dict of its options, or a provenance.toml path")
    return base.replace(**options) if options else base


# -- sources ---------------------------------------------------------------------------------------
def _plain(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The metadata values a JSON call can carry (dates as ISO strings, for freshness); bosun's own keys left out."""
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or key.startswith("bosun_"):
            continue
        if isinstance(value, datetime | date):
            out[key] = value.isoformat()
        elif value is None or isinstance(value, str | int | float | bool):
            out[key] = value
    return out


def to_chunk(source: Any, index: int = 0, url_key: str | None = None) -> dict[str, Any]:
    """One source as the daemon's chunk ``{content, source_url, metadata, id}``; errors name ``sources[i]``."""
    where = f"sources[{index}]"
    url: Any = None
    ident: Any = None
    if isinstance(source, Mapping):
        content = source.get("content", source.get("text", source.get("page_content")))
        metadata = source.get("metadata") or {}
        url, ident = source.get("source_url", source.get("url")), source.get("id")
    elif hasattr(source, "page_content"):  # a LangChain Document
        content, metadata, ident = source.page_content, source.metadata, getattr(source, "id", None)
    elif callable(getattr(source, "get_content", None)):  # a LlamaIndex node or NodeWithScore
        content, metadata, ident = source.get_content(), source.metadata, getattr(source, "node_id", None)
    elif hasattr(source, "content"):  # dokis's Chunk
        content, metadata = source.content, getattr(source, "metadata", None) or {}
        url, ident = getattr(source, "source_url", None), getattr(source, "id", None)
    else:
        raise InvalidInput(where, f"is a {type(source).__name__}",
                           "{content, source_url, metadata}, a LangChain Document or a LlamaIndex node")
    if not isinstance(content, str):
        raise InvalidInput(f"{where}.content", f"must be text, got {type(content).__name__}")
    if not isinstance(metadata, Mapping):
        raise InvalidInput(f"{where}.metadata", f"must be a mapping, got {type(metadata).__name__}")
    if url is None:
        for key in (url_key,) if url_key else URL_KEYS:
            if metadata.get(key) is not None:
                url = metadata[key]
                break
    chunk: dict[str, Any] = {"content": content, "metadata": _plain(metadata)}
    if url is not None:
        chunk["source_url"] = str(url)
    if ident is not None:
        chunk["id"] = str(ident)
    return chunk


# -- results ---------------------------------------------------------------------------------------
class Filtered(list[S], Generic[S]):
    """The admitted sources (the objects passed in, in order); ``blocked`` says why each other one was dropped."""

    def __init__(self, kept: list[S], blocked: list[dict[str, Any]], warnings: list[dict[str, Any]]) -> None:
        super().__init__(kept)
        self.blocked = blocked  # [{index, id, url, domain, reason}]
        self.warnings = warnings

    @property
    def dropped(self) -> int:
        return len(self.blocked)

    def summary(self) -> dict[str, Any]:
        """What a framework adapter writes into each kept source's metadata."""
        return {"admitted": len(self), "dropped": self.dropped,
                "blocked_sources": [b.get("url") for b in self.blocked],
                "reasons": [b.get("reason") for b in self.blocked]}


class Selected(list[S], Generic[S]):
    """The picked sources in the daemon's order; ``picks[i]`` is the i-th one's rank, score, tokens and why."""

    def __init__(self, kept: list[S], picks: list[dict[str, Any]], result: dict[str, Any]) -> None:
        super().__init__(kept)
        self.picks = picks
        self.tokens_used: int = result.get("tokens_used", 0)
        self.budget_tokens: int = result.get("budget_tokens", 0)
        self.strategy: str = result.get("strategy", "")
        self.candidates: int = result.get("candidates", 0)

    def info(self, i: int) -> dict[str, Any]:
        """What a framework adapter writes into the i-th pick's metadata."""
        pick = self.picks[i]
        return {**{k: pick[k] for k in ("rank", "score", "relevance", "novelty", "tokens", "why") if k in pick},
                "tokens_used": self.tokens_used, "budget_tokens": self.budget_tokens, "strategy": self.strategy,
                "candidates": self.candidates}


class AuditReport(dict[str, Any]):
    """The daemon's trust report: a dict (JSON as it came), with dokis's result attributes on top."""

    @property
    def passed(self) -> bool:
        return bool(self.get("passed"))

    @property
    def trust_passed(self) -> bool:
        return bool(self.get("trust_passed"))

    @property
    def compliance_rate(self) -> float:
        return float(self.get("compliance_rate", 0.0))

    @property
    def provenance_map(self) -> dict[str, str]:
        return dict(self.get("provenance_map", {}))

    @property
    def violations(self) -> list[dict[str, Any]]:
        return list(self.get("violations", []))

    @property
    def claims(self) -> list[dict[str, Any]]:
        return list(self.get("claims", []))

    @property
    def claim_verdicts(self) -> list[dict[str, Any]]:
        return list(self.get("claim_verdicts", []))

    @property
    def blocked_sources(self) -> list[str]:
        return list(self.get("blocked_sources", []))

    @property
    def policy_issues(self) -> list[str]:
        return list(self.get("policy_issues", []))

    @property
    def enforcement_mode(self) -> str:
        return str(self.get("enforcement_mode", ""))

    @property
    def enforcement_verdict(self) -> str:
        return str(self.get("enforcement_verdict", ""))

    def model_dump_json(self) -> str:
        """dokis's serialisation call: the report as JSON."""
        return json.dumps(self, ensure_ascii=False)


@dataclass
class Answered(Generic[S]):
    """What ``ProvenanceMiddleware.__call__`` returns: the answer, the sources it was written from, the audit."""

    answer: str
    sources: Filtered[S]
    report: AuditReport


# -- the connection ----------------------------------------------------------------------------------
class _Link:
    """The client the middleware calls through: the one given, or a ``Bosun`` opened on first use. A daemon named
    by URL (or the default one of ``$BOSUN_HOME``) gets one session per process, shared by every middleware and
    adapter that names it; an in-process server object gets a session of this link's own."""

    def __init__(self, client: Client | None, server: Any, home: str | Path | None, token: str | None) -> None:
        self._given = client
        self._server, self._home, self._token = server, home, token
        self._own: Bosun | None = None
        self._lock = threading.Lock()

    def sync(self) -> Bosun:
        if isinstance(self._given, Bosun):
            return self._given
        if isinstance(self._given, AsyncBosun):
            raise BosunClientError("this middleware was given an AsyncBosun, which serves only the async calls "
                                   "(ainvoke, aquery, aaudit, ...); give it a Bosun to serve both")
        if self._server is not None and not isinstance(self._server, str):
            with self._lock:
                if self._own is None:
                    self._own = _open(self._server, self._home, self._token)
                    weakref.finalize(self, self._own.close)
                return self._own
        key = (self._server, str(self._home or os.environ.get("BOSUN_HOME", "")), self._token)
        with _SHARED_LOCK:
            if key not in _SHARED:
                _SHARED[key] = shared = _open(self._server, self._home, self._token)
                weakref.finalize(shared, shared.close)  # at exit
            return _SHARED[key]

    def call(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        return self.sync().call(tool, args)

    async def acall(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        if isinstance(self._given, AsyncBosun):
            return await self._given.call(tool, args)
        client = await asyncio.to_thread(self.sync)  # opening may wait for the daemon
        return await asyncio.to_thread(client.call, tool, args)  # the client's own loop thread does the I/O


def _open(server: Any, home: str | Path | None, token: str | None) -> Bosun:
    """An open ``Bosun``; raises ``ConnectionFailed`` naming the endpoint and how to start the daemon."""
    client = Bosun(server, home=home, token=token)
    client.__enter__()
    return client


_SHARED: dict[tuple[str | None, str, str | None], Bosun] = {}
_SHARED_LOCK = threading.Lock()


def close_shared() -> None:
    """Close the sessions the middlewares opened for themselves (they close at exit otherwise)."""
    with _SHARED_LOCK:
        clients = list(_SHARED.values())
        _SHARED.clear()
    for client in clients:
        client.close()


# -- the middleware --------------------------------------------------------------------------------
class ProvenanceMiddleware:
    """Filter sources by the allowlist, select them under a token budget, audit an answer; one daemon call each.

    ``config`` is a ``ProvenanceConfig``, a dict of its options or a ``provenance.toml`` path; keyword
    ``options`` override it. ``client`` is an open ``Bosun`` (sync and async calls) or ``AsyncBosun`` (async
    calls only); without one the middleware opens a ``Bosun(server, home=, token=)`` on first use (by default the
    daemon of ``$BOSUN_HOME``), shared with every other middleware naming the same daemon. ``url_key`` names the
    metadata key that holds a source's URL (default: ``source_url``, ``url``, then ``source``).
    """

    def __init__(self, config: ConfigLike = None, /, *, client: Client | None = None, server: Any = None,
                 home: str | Path | None = None, token: str | None = None, url_key: str | None = None,
                 **options: Any) -> None:
        self.config = as_config(config, **options)
        self.url_key = url_key
        self._link = _Link(client, server, home, token)

    def chunks(self, sources: Sequence[Any]) -> list[dict[str, Any]]:
        return [to_chunk(s, i, self.url_key) for i, s in enumerate(sources)]

    # -- filter ------------------------------------------------------------------------------------
    def filter(self, sources: Sequence[S]) -> Filtered[S]:
        """The sources the allowlist admits (the objects passed in); ``.blocked`` lists the others and why."""
        return self._filtered(sources, self._link.call("filter_sources", self._filter_args(sources)))

    async def afilter(self, sources: Sequence[S]) -> Filtered[S]:
        return self._filtered(sources, await self._link.acall("filter_sources", self._filter_args(sources)))

    def _filter_args(self, sources: Sequence[Any]) -> dict[str, Any]:
        return {"chunks": self.chunks(sources), "config": self.config.to_dict()}

    @staticmethod
    def _filtered(sources: Sequence[S], result: dict[str, Any]) -> Filtered[S]:
        kept = [sources[c["index"]] for c in result.get("chunks", [])]
        return Filtered(kept, list(result.get("blocked_source_details", [])), list(result.get("source_warnings", [])))

    # -- select ------------------------------------------------------------------------------------
    def select(self, goal: str, sources: Sequence[S], *, budget_tokens: int, strategy: str | None = None,
               options: dict[str, Any] | None = None) -> Selected[S]:
        """The sources worth reading for ``goal`` within ``budget_tokens``, relevant and not redundant, in order."""
        return self._selected(sources, self._link.call("select_context",
                                                       self._select_args(goal, sources, budget_tokens, strategy, options)))

    async def aselect(self, goal: str, sources: Sequence[S], *, budget_tokens: int, strategy: str | None = None,
                      options: dict[str, Any] | None = None) -> Selected[S]:
        args = self._select_args(goal, sources, budget_tokens, strategy, options)
        return self._selected(sources, await self._link.acall("select_context", args))

    def _select_args(self, goal: str, sources: Sequence[Any], budget_tokens: int, strategy: str | None,
                     options: dict[str, Any] | None) -> dict[str, Any]:
        # an empty source says nothing and costs nothing: it is never picked (the daemon refuses empty text)
        candidates = [{"id": str(i), "text": c["content"], **({"source": c["source_url"]} if "source_url" in c else {})}
                      for i, c in enumerate(self.chunks(sources)) if c["content"].strip()]
        return {"goal": goal, "candidates": candidates, "budget_tokens": budget_tokens, "strategy": strategy,
                "options": {"show_rejected": 0, **(options or {})}}

    @staticmethod
    def _selected(sources: Sequence[S], result: dict[str, Any]) -> Selected[S]:
        picks = list(result.get("selected", []))
        return Selected([sources[int(p["id"])] for p in picks], picks, result)

    # -- audit -------------------------------------------------------------------------------------
    def audit(self, answer: str, sources: Sequence[Any], response: str | None = None, *, query: str | None = None,
              as_of: str | None = None) -> AuditReport:
        """The trust report of ``answer`` against ``sources``; raises ``ComplianceViolation`` in enforce mode.

        dokis's order works too: ``audit(query, chunks, response)`` (a third positional argument is the answer).
        """
        try:
            return AuditReport(self._link.call("audit", self._audit_args(answer, sources, response, query, as_of)))
        except ToolCallError as exc:
            raise _enforced(exc) from exc

    async def aaudit(self, answer: str, sources: Sequence[Any], response: str | None = None, *,
                     query: str | None = None, as_of: str | None = None) -> AuditReport:
        args = self._audit_args(answer, sources, response, query, as_of)
        try:
            return AuditReport(await self._link.acall("audit", args))
        except ToolCallError as exc:
            raise _enforced(exc) from exc

    def _audit_args(self, answer: str, sources: Sequence[Any], response: str | None, query: str | None,
                    as_of: str | None) -> dict[str, Any]:
        if response is not None:  # dokis: audit(query, chunks, response)
            if query is not None:
                raise InvalidInput("query", "given twice (the first positional argument is the query when a "
                                            "response follows the sources)")
            answer, query = response, answer
        if not isinstance(answer, str):
            raise InvalidInput("answer", f"must be text, got {type(answer).__name__}")
        return {"response": answer, "chunks": self.chunks(sources), "query": query, "config": self.config.to_dict(),
                "as_of": as_of}

    # -- the whole pipeline ------------------------------------------------------------------------
    def __call__(self, query: str, sources: Sequence[S], generate: Callable[[str, Filtered[S]], str]) -> Answered[S]:
        """Filter ``sources``, let ``generate(query, admitted)`` write the answer, audit it: two daemon calls."""
        admitted = self.filter(sources)
        answer = generate(query, admitted)
        return Answered(answer, admitted, self.audit(answer, admitted, query=query))

    async def acall(self, query: str, sources: Sequence[S],
                    generate: Callable[[str, Filtered[S]], Awaitable[str]]) -> Answered[S]:
        admitted = await self.afilter(sources)
        answer = await generate(query, admitted)
        return Answered(answer, admitted, await self.aaudit(answer, admitted, query=query))


def _enforced(exc: ToolCallError) -> Exception:
    """The daemon's enforce-mode refusal as ``ComplianceViolation``; any other refusal unchanged."""
    return ComplianceViolation(exc.message) if exc.message.startswith(ENFORCE_REFUSAL) else exc


def as_middleware(middleware: ProvenanceMiddleware | None, config: ConfigLike, client: Client | None,
                  url_key: str | None) -> ProvenanceMiddleware:
    """The adapters' constructor arguments as one middleware (a given middleware wins)."""
    return middleware if middleware is not None else ProvenanceMiddleware(config, client=client, url_key=url_key)


def answer_text(answer: Any) -> str:
    """An answer as text: a string, a chat message (``.content``) or a LlamaIndex response (``.response``)."""
    if isinstance(answer, str):
        return answer
    for attr in ("text", "content", "response"):
        value = getattr(answer, attr, None)
        if isinstance(value, str):
            return value
    raise InvalidInput("answer", f"is a {type(answer).__name__}", "text, a chat message or a query response")
