"""What a service needs from the process that composes it, as Protocols: no service imports the Engine.

Why: the Engine builds every service (``engine._compose``, the one composition root); a service typed by
``Engine`` pointed back at its own builder, a circle that made neither side readable or testable alone. A
service gets its configuration, the other services it calls, and these narrow views. The stores and the
models open after the services are built, so a service reads them at call time through the view.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from bosun.core.embedding import CachingEmbedder, Vectors
    from bosun.core.judge import Judge
    from bosun.server.config import Config
    from bosun.store.backend import Stores
    from bosun.store.refs import RefStore


class OpenStores(Protocol):
    """The open backend's stores (SQLite or PostgreSQL); RuntimeError before it opens."""

    @property
    def refs(self) -> RefStore: ...

    @property
    def store_set(self) -> Stores: ...


class Models(Protocol):
    """The warm models: the embedder (awaited while it loads), embedding through its caches, the judge."""

    config: Config

    async def embedder(self) -> CachingEmbedder: ...

    async def embed(self, texts: Sequence[str]) -> Vectors: ...

    async def judge(self) -> Judge | None: ...

    def judge_notice(self) -> str | None: ...


class SelectSource(OpenStores, Protocol):
    """What select_context reads items from and embeds them with."""

    recall: Any  # RecallService: short refs resolve through its resolver
    policies: Any  # PolicyService: {"policy": name} items are read from the route index

    async def embed(self, texts: Sequence[str]) -> Vectors: ...


class StatsSource(Protocol):
    """What the figures are read from: the services the tools use, the health answer, the configuration."""

    config: Config
    started_at: float
    tasks: Any  # TaskService
    ledger: Any  # LedgerService
    policies: Any  # PolicyService

    def health(self, detail: bool = True) -> dict[str, Any]: ...
