"""Shared fixtures: an Engine on a temp BOSUN_HOME, with a fast deterministic
embedder for tests about logic, or the real embedded model for tests about meaning."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from mcp import Client

from bosun.core.embedding import HashEmbedder
from bosun.server.app import create_server
from bosun.server.config import Config
from bosun.server.engine import Engine

_REAL_MODEL = None


def real_model_factory(config: Config):  # type: ignore[no-untyped-def]
    """Load the embedded model once per test session (it is read-only)."""
    global _REAL_MODEL
    if _REAL_MODEL is None:
        from bosun.server.engine import default_embedder_factory

        _REAL_MODEL = default_embedder_factory(config)
    return _REAL_MODEL


@pytest.fixture
def anyio_backend() -> str:
    """Async tests and fixtures run under anyio (auto mode, see pyproject) on asyncio."""
    return "asyncio"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "bosun-home"


@pytest.fixture
def config(home: Path) -> Config:
    """The environment's configuration (tests set BOSUN_* with monkeypatch) on a temp home."""
    return Config.from_env(home=home, policies=[])


@pytest.fixture
def engine(config: Config) -> Engine:
    """An Engine with the deterministic HashEmbedder (open it through a client)."""
    return Engine(config, embedder_factory=lambda _c: HashEmbedder(64))


@pytest.fixture
def real_engine(config: Config) -> Engine:
    """An Engine with the real embedded model (shared across the session)."""
    return Engine(config, embedder_factory=real_model_factory)


@pytest.fixture(params=["auto", "legacy"])
async def client(request: pytest.FixtureRequest, engine: Engine) -> AsyncIterator[Client]:
    """In-memory MCP client over both wire eras (2026-07-28 and 2025-11-25)."""
    async with Client(create_server(engine), mode=request.param) as c:
        yield c


@pytest.fixture
async def real_client(real_engine: Engine) -> AsyncIterator[Client]:
    async with Client(create_server(real_engine)) as c:
        yield c
