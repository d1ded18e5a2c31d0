"""What the LangChain and LlamaIndex adapters share: their connection fields and how picks are marked.

Both frameworks' components are pydantic models, so the fields live on one mixin model that each adapter's
base class inherits after the framework's (pydantic merges the bases' configs in order, so its
``extra="forbid"`` wins over LangChain's ``extra="ignore"``). Each base class calls ``connect`` from its own
``model_post_init``: the frameworks' generic classes stand before the mixin in the method order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, PrivateAttr

from bosun.middleware import Filtered, ProvenanceMiddleware, Selected, as_middleware

S = TypeVar("S")
PROVENANCE_KEY = "bosun_provenance"  # on each kept source: how many were dropped, and why
SELECTION_KEY = "bosun_selection"  # on each pick: rank, score, relevance, novelty, tokens, the budget
Mark = Callable[[S, str, dict[str, Any]], S]  # a copy of the source with one more metadata key


class DaemonFields(BaseModel):
    """The middleware an adapter calls through: given, or built from ``config``, ``client`` and ``url_key``."""

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")  # a misspelt option is an error
    config: Any = None  # a ProvenanceConfig, a dict of its options, or a provenance.toml path
    client: Any = None  # an open bosun.client.Bosun or AsyncBosun; None: the daemon of $BOSUN_HOME
    middleware: ProvenanceMiddleware | None = None  # share one (its config and connection) between adapters
    url_key: str | None = None  # the metadata key holding a source's URL (default: source_url, url, source)
    _mw: ProvenanceMiddleware = PrivateAttr()

    def connect(self) -> None:
        """Build the middleware when the adapter is built, so a bad config fails there, naming the key."""
        self._mw = as_middleware(self.middleware, self.config, self.client, self.url_key)


def mark_kept(kept: Filtered[S], mark: Mark[S]) -> list[S]:
    info = kept.summary()
    return [mark(source, PROVENANCE_KEY, info) for source in kept]


def mark_picked(picked: Selected[S], mark: Mark[S]) -> list[S]:
    return [mark(source, SELECTION_KEY, picked.info(i)) for i, source in enumerate(picked)]
